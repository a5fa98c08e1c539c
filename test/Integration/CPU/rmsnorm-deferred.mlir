// RUN: %differential %s | %cpu-runner | FileCheck %s

// The RMSNorm reparameterization end to end: a producer GEMM adds the
// residual and emits per-tile partial sums of squares; a finish turns them
// into r = (mean(h^2) + eps)^-1/2; the consumer GEMM applies r as a row scale
// in its epilogue, gamma folded into its weight. Against the unfused
// matmul -> add -> RMSNorm -> matmul.

// CHECK: coda-check ok: 1044 elements
// CHECK: coda-check ok: 580 elements

func.func @fused(%x: tensor<29x12xf32>, %wo: tensor<12x36xf32>, %res: tensor<29x36xf32>, %gamma: tensor<36xf32>,
                 %w: tensor<36x20xf32>) -> (tensor<29x36xf32>, tensor<29x20xf32>) {
  %eps = arith.constant 1.0e-5 : f32
  %hE = tensor.empty() : tensor<29x36xf32>
  %pE = tensor.empty() : tensor<29x3xf32>
  %h, %p = coda.gemm %x, %wo : tensor<29x12xf32>, tensor<12x36xf32>
      epilogue(%acc, tile %r = %res : tensor<29x36xf32>) outs(%hE, %pE : tensor<29x36xf32>, tensor<29x3xf32>) {
    %v = arith.addf %acc, %r : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 16 : f32
    coda.yield %v, %part : f32, !coda.partial<f32>
  }
  // Finish: r = rsqrt(sum / N + eps).
  %sE = tensor.empty() : tensor<29xf32>
  %ss = coda.reduce_partials sum row %p : tensor<29x3xf32> outs(%sE : tensor<29xf32>)
  %rstd = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%ss : tensor<29xf32>) outs(%sE : tensor<29xf32>) {
  ^bb0(%s: f32, %out: f32):
    %n = arith.constant 36.0 : f32
    %mean = arith.divf %s, %n : f32
    %t = arith.addf %mean, %eps : f32
    %rs = math.rsqrt %t : f32
    linalg.yield %rs : f32
  } -> tensor<29xf32>
  // Weight-side: diag(gamma) W.
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

func.func @reference(%x: tensor<29x12xf32>, %wo: tensor<12x36xf32>, %res: tensor<29x36xf32>, %gamma: tensor<36xf32>,
                     %w: tensor<36x20xf32>) -> (tensor<29x36xf32>, tensor<29x20xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<29x36xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<29x36xf32>) -> tensor<29x36xf32>
  %o = linalg.matmul ins(%x, %wo : tensor<29x12xf32>, tensor<12x36xf32>) outs(%z : tensor<29x36xf32>) -> tensor<29x36xf32>
  %h = linalg.add ins(%o, %res : tensor<29x36xf32>, tensor<29x36xf32>) outs(%e : tensor<29x36xf32>) -> tensor<29x36xf32>
  %re = tensor.empty() : tensor<29xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%re : tensor<29xf32>) -> tensor<29xf32>
  %ms = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<29x36xf32>) outs(%r0 : tensor<29xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %n = arith.constant 36.0 : f32
    %sq = arith.mulf %v, %v : f32
    %q = arith.divf %sq, %n : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  } -> tensor<29xf32>
  %normed = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h, %ms, %gamma : tensor<29x36xf32>, tensor<29xf32>, tensor<36xf32>) outs(%e : tensor<29x36xf32>) {
  ^bb0(%v: f32, %m: f32, %g: f32, %out: f32):
    %eps = arith.constant 1.0e-5 : f32
    %t = arith.addf %m, %eps : f32
    %sq = math.sqrt %t : f32
    %d = arith.divf %v, %sq : f32
    %r = arith.mulf %d, %g : f32
    linalg.yield %r : f32
  } -> tensor<29x36xf32>
  %ye = tensor.empty() : tensor<29x20xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<29x20xf32>) -> tensor<29x20xf32>
  %y = linalg.matmul ins(%normed, %w : tensor<29x36xf32>, tensor<36x20xf32>) outs(%yz : tensor<29x20xf32>) -> tensor<29x20xf32>
  return %h, %y : tensor<29x36xf32>, tensor<29x20xf32>
}
