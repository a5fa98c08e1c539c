// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused tile=16" | %differential | %cpu-runner | FileCheck %s

// SwiGLU backward derived from the interleaved gate/up GEMM (with the
// deferred RMSNorm row scale r): the adjoint GEMM reads the M x N/2 gradient
// at each pair (access form `pair`), recomputes the activation, and writes
// dgate and dup interleaved as dAcc through a pair_map; r's gradient comes as
// row partials. Against the gradient written out per element.
// Gradients: dx, dW, dr.

// CHECK-COUNT-3: coda-check ok

func.func @forward(%x: tensor<36x24xf32>, %w: tensor<24x40xf32>, %r: tensor<36xf32>) -> tensor<36x20xf32> {
  %o = tensor.empty() : tensor<36x20xf32>
  %h = coda.gemm %x, %w : tensor<36x24xf32>, tensor<24x40xf32>
      epilogue(%acc, row %rv = %r : tensor<36xf32>) outs(%o : tensor<36x20xf32>) {
    %s = arith.mulf %acc, %rv : f32
    %p = coda.pair_contract (%g, %u) = %s : f32 -> !coda.pair<f32> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      coda.yield %y : f32
    }
    coda.yield %p : !coda.pair<f32>
  }
  return %h : tensor<36x20xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#nk = affine_map<(m, n, k) -> (n, k)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>

func.func @reference(%x: tensor<36x24xf32>, %w: tensor<24x40xf32>, %r: tensor<36xf32>, %dy: tensor<36x20xf32>)
    -> (tensor<36x24xf32>, tensor<24x40xf32>, tensor<36xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<36x40xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<36x40xf32>) -> tensor<36x40xf32>
  %acc = linalg.matmul ins(%x, %w : tensor<36x24xf32>, tensor<24x40xf32>) outs(%z : tensor<36x40xf32>) -> tensor<36x40xf32>
  // Column 2j holds the gate g, 2j + 1 the up value u of pair j (scaled by
  // r): ds = dy u silu'(g) at 2j, dy silu(g) at 2j + 1; dacc = ds r.
  %ds = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<36x40xf32>) {
  ^bb0(%out: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %one = arith.constant 1.0 : f32
    %j = arith.divui %n, %c2 : index
    %gi = arith.muli %j, %c2 : index
    %ui = arith.addi %gi, %c1 : index
    %isg = arith.cmpi eq, %n, %gi : index
    %rv = tensor.extract %r[%m] : tensor<36xf32>
    %ga = tensor.extract %acc[%m, %gi] : tensor<36x40xf32>
    %ua = tensor.extract %acc[%m, %ui] : tensor<36x40xf32>
    %g = arith.mulf %ga, %rv : f32
    %u = arith.mulf %ua, %rv : f32
    %dyv = tensor.extract %dy[%m, %j] : tensor<36x20xf32>
    %ng = arith.negf %g : f32
    %ex = math.exp %ng : f32
    %den = arith.addf %one, %ex : f32
    %sig = arith.divf %one, %den : f32
    %silu = arith.mulf %g, %sig : f32
    %oms = arith.subf %one, %sig : f32
    %gs = arith.mulf %g, %oms : f32
    %t = arith.addf %one, %gs : f32
    %dsilu = arith.mulf %sig, %t : f32
    %a = arith.mulf %u, %dsilu : f32
    %dg = arith.mulf %dyv, %a : f32
    %du = arith.mulf %dyv, %silu : f32
    %v = arith.select %isg, %dg, %du : f32
    linalg.yield %v : f32
  } -> tensor<36x40xf32>
  %dacc = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ds, %r : tensor<36x40xf32>, tensor<36xf32>) outs(%e : tensor<36x40xf32>) {
  ^bb0(%g: f32, %rv: f32, %out: f32):
    %p = arith.mulf %g, %rv : f32
    linalg.yield %p : f32
  } -> tensor<36x40xf32>
  %re = tensor.empty() : tensor<36xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%re : tensor<36xf32>) -> tensor<36xf32>
  %dr = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ds, %acc : tensor<36x40xf32>, tensor<36x40xf32>) outs(%r0 : tensor<36xf32>) {
  ^bb0(%g: f32, %a: f32, %s: f32):
    %p = arith.mulf %g, %a : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<36xf32>
  %ex = tensor.empty() : tensor<36x24xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<36x24xf32>) -> tensor<36x24xf32>
  %dx = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %w : tensor<36x40xf32>, tensor<24x40xf32>) outs(%zx : tensor<36x24xf32>) {
  ^bb0(%g: f32, %wv: f32, %s: f32):
    %p = arith.mulf %g, %wv : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<36x24xf32>
  %ew = tensor.empty() : tensor<24x40xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<24x40xf32>) -> tensor<24x40xf32>
  %dw = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %dacc : tensor<36x24xf32>, tensor<36x40xf32>) outs(%zw : tensor<24x40xf32>) {
  ^bb0(%xv: f32, %g: f32, %s: f32):
    %p = arith.mulf %xv, %g : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<24x40xf32>
  return %dx, %dw, %dr : tensor<36x24xf32>, tensor<24x40xf32>, tensor<36xf32>
}
