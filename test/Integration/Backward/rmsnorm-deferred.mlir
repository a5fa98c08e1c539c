// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused tile=16" | %differential | %cpu-runner | FileCheck %s

// RMSNorm backward through the deferred row scale, derived from the fused
// forward (residual + partial sums of squares, finish, row-scaled GEMM with
// gamma folded into the weight) and checked against the textbook RMSNorm
// gradient written out unfused. The derivation recomputes both GEMMs: the
// second's adjoint emits the row reduction sum(dy * acc) as partials; the
// first's adjoint applies the correction 2 h ds[m] in its epilogue, next to
// the residual stream's own gradient.
// Gradients in argument order: dx, dWo, dres, dgamma, dW.

// CHECK-COUNT-5: coda-check ok

func.func @forward(%x: tensor<29x12xf32>, %wo: tensor<12x36xf32>, %res: tensor<29x36xf32>, %gamma: tensor<36xf32>,
                   %w: tensor<36x20xf32>) -> (tensor<29x36xf32>, tensor<29x20xf32>) {
  %hE = tensor.empty() : tensor<29x36xf32>
  %pE = tensor.empty() : tensor<29x3xf32>
  %h, %p = coda.gemm %x, %wo : tensor<29x12xf32>, tensor<12x36xf32>
      epilogue(%acc, tile %r = %res : tensor<29x36xf32>) outs(%hE, %pE : tensor<29x36xf32>, tensor<29x3xf32>) {
    %v = arith.addf %acc, %r : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 16 : f32
    coda.yield %v, %part : f32, !coda.partial<f32>
  }
  %sE = tensor.empty() : tensor<29xf32>
  %ss = coda.reduce_partials sum row %p : tensor<29x3xf32> outs(%sE : tensor<29xf32>)
  %rstd = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%ss : tensor<29xf32>) outs(%sE : tensor<29xf32>) {
  ^bb0(%s: f32, %out: f32):
    %n = arith.constant 36.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %s, %n : f32
    %t = arith.addf %mean, %eps : f32
    %rs = math.rsqrt %t : f32
    linalg.yield %rs : f32
  } -> tensor<29xf32>
  %wgE = tensor.empty() : tensor<36x20xf32>
  %wg = linalg.generic {indexing_maps = [affine_map<(k, n) -> (k, n)>, affine_map<(k, n) -> (k)>, affine_map<(k, n) -> (k, n)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%w, %gamma : tensor<36x20xf32>, tensor<36xf32>) outs(%wgE : tensor<36x20xf32>) {
  ^bb0(%wv: f32, %g: f32, %out: f32):
    %m = arith.mulf %wv, %g : f32
    linalg.yield %m : f32
  } -> tensor<36x20xf32>
  %yE = tensor.empty() : tensor<29x20xf32>
  %y = coda.gemm %h, %wg : tensor<29x36xf32>, tensor<36x20xf32>
      epilogue(%acc, row %rv = %rstd : tensor<29xf32>) outs(%yE : tensor<29x20xf32>) {
    %s = arith.mulf %acc, %rv : f32
    coda.yield %s : f32
  }
  return %h, %y : tensor<29x36xf32>, tensor<29x20xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#nk = affine_map<(m, n, k) -> (n, k)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>

func.func @reference(%x: tensor<29x12xf32>, %wo: tensor<12x36xf32>, %res: tensor<29x36xf32>, %gamma: tensor<36xf32>,
                     %w: tensor<36x20xf32>, %dhout: tensor<29x36xf32>, %dy: tensor<29x20xf32>)
    -> (tensor<29x12xf32>, tensor<12x36xf32>, tensor<29x36xf32>, tensor<36xf32>, tensor<36x20xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<29x36xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<29x36xf32>) -> tensor<29x36xf32>
  // h = x Wo + res; r = rsqrt(mean(h^2) + eps); nh = h r; a = nh gamma.
  %o = linalg.matmul ins(%x, %wo : tensor<29x12xf32>, tensor<12x36xf32>) outs(%z : tensor<29x36xf32>) -> tensor<29x36xf32>
  %h = linalg.add ins(%o, %res : tensor<29x36xf32>, tensor<29x36xf32>) outs(%e : tensor<29x36xf32>) -> tensor<29x36xf32>
  %re = tensor.empty() : tensor<29xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%re : tensor<29xf32>) -> tensor<29xf32>
  %ms = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<29x36xf32>) outs(%r0 : tensor<29xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<29xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%ms : tensor<29xf32>) outs(%re : tensor<29xf32>) {
  ^bb0(%s: f32, %out: f32):
    %n = arith.constant 36.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %s, %n : f32
    %t = arith.addf %mean, %eps : f32
    %rs = math.rsqrt %t : f32
    linalg.yield %rs : f32
  } -> tensor<29xf32>
  %nh = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h, %r : tensor<29x36xf32>, tensor<29xf32>) outs(%e : tensor<29x36xf32>) {
  ^bb0(%v: f32, %rv: f32, %out: f32):
    %p = arith.mulf %v, %rv : f32
    linalg.yield %p : f32
  } -> tensor<29x36xf32>
  %a = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%nh, %gamma : tensor<29x36xf32>, tensor<36xf32>) outs(%e : tensor<29x36xf32>) {
  ^bb0(%v: f32, %g: f32, %out: f32):
    %p = arith.mulf %v, %g : f32
    linalg.yield %p : f32
  } -> tensor<29x36xf32>
  // da = dy W^T; dW = a^T dy; dgamma = sum_m da nh; dnh = da gamma.
  %da = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dy, %w : tensor<29x20xf32>, tensor<36x20xf32>) outs(%z : tensor<29x36xf32>) {
  ^bb0(%g: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %g, %wv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<29x36xf32>
  %ew = tensor.empty() : tensor<36x20xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<36x20xf32>) -> tensor<36x20xf32>
  %dw = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %dy : tensor<29x36xf32>, tensor<29x20xf32>) outs(%zw : tensor<36x20xf32>) {
  ^bb0(%av: f32, %g: f32, %acc: f32):
    %p = arith.mulf %av, %g : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<36x20xf32>
  %eg = tensor.empty() : tensor<36xf32>
  %zg = linalg.fill ins(%zero : f32) outs(%eg : tensor<36xf32>) -> tensor<36xf32>
  %dgamma = linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%da, %nh : tensor<29x36xf32>, tensor<29x36xf32>) outs(%zg : tensor<36xf32>) {
  ^bb0(%g: f32, %v: f32, %acc: f32):
    %p = arith.mulf %g, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<36xf32>
  %dnh = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%da, %gamma : tensor<29x36xf32>, tensor<36xf32>) outs(%e : tensor<29x36xf32>) {
  ^bb0(%g: f32, %gv: f32, %out: f32):
    %p = arith.mulf %g, %gv : f32
    linalg.yield %p : f32
  } -> tensor<29x36xf32>
  // dh = dhout + r (dnh - nh mean_n(dnh nh)).
  %dot = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dnh, %nh : tensor<29x36xf32>, tensor<29x36xf32>) outs(%r0 : tensor<29xf32>) {
  ^bb0(%g: f32, %v: f32, %acc: f32):
    %p = arith.mulf %g, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<29xf32>
  %dh = linalg.generic {indexing_maps = [#id, #id, #id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dhout, %dnh, %nh, %r, %dot : tensor<29x36xf32>, tensor<29x36xf32>, tensor<29x36xf32>, tensor<29xf32>, tensor<29xf32>)
      outs(%e : tensor<29x36xf32>) {
  ^bb0(%g0: f32, %g: f32, %v: f32, %rv: f32, %d: f32, %out: f32):
    %n = arith.constant 36.0 : f32
    %mean = arith.divf %d, %n : f32
    %c = arith.mulf %v, %mean : f32
    %t = arith.subf %g, %c : f32
    %u = arith.mulf %rv, %t : f32
    %s = arith.addf %g0, %u : f32
    linalg.yield %s : f32
  } -> tensor<29x36xf32>
  // dx = dh Wo^T; dWo = x^T dh; dres = dh.
  %ex = tensor.empty() : tensor<29x12xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<29x12xf32>) -> tensor<29x12xf32>
  %dx = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dh, %wo : tensor<29x36xf32>, tensor<12x36xf32>) outs(%zx : tensor<29x12xf32>) {
  ^bb0(%g: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %g, %wv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<29x12xf32>
  %eo = tensor.empty() : tensor<12x36xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%eo : tensor<12x36xf32>) -> tensor<12x36xf32>
  %dwo = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dh : tensor<29x12xf32>, tensor<29x36xf32>) outs(%zo : tensor<12x36xf32>) {
  ^bb0(%xv: f32, %g: f32, %acc: f32):
    %p = arith.mulf %xv, %g : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<12x36xf32>
  return %dx, %dwo, %dh, %dgamma, %dw
      : tensor<29x12xf32>, tensor<12x36xf32>, tensor<29x36xf32>, tensor<36xf32>, tensor<36x20xf32>
}
