// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused" | %differential | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused" | FileCheck %s --check-prefix=DERIVED

// A per-head RMSNorm on a projection (QK-norm: 2 heads of 8, a weight per
// column), derived: the adjoint epilogue sums each head's adjoint of its
// statistic with a group_reduce of the same heads, so the backward of the
// group statistic is again one epilogue. Against the derivative written out:
// with r = (mean_j q_j^2 + eps)^(-1/2) over the head and t = sum_j gamma_j
// dy_j q_j, dq_i = r gamma_i dy_i - r^3 / 8 q_i t; dgamma sums dy q r over
// the rows. Gradients: dx, dW, dgamma.

// CHECK-COUNT-3: coda-check ok

// DERIVED-LABEL: func.func @fused
// DERIVED: coda.gemm
// DERIVED: coda.group_reduce sum %{{.+}} row group 8 : f32 -> f32
// DERIVED: coda.group_reduce sum %{{.+}} row group 8 : f32 -> f32
// DERIVED: coda.col_reduce sum

func.func @forward(%x: tensor<5x6xf32>, %w: tensor<16x6xf32>, %gamma: tensor<16xf32>) -> tensor<5x16xf32> {
  %e = tensor.empty() : tensor<5x16xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<5x6xf32>, tensor<16x6xf32>
      epilogue(%acc, col %g = %gamma : tensor<16xf32>) outs(%e : tensor<5x16xf32>) {
    %sq = arith.mulf %acc, %acc : f32
    %ss = coda.group_reduce sum %sq row group 8 : f32 -> f32
    %d = arith.constant 8.0 : f32
    %eps = arith.constant 1.0e-2 : f32
    %mean = arith.divf %ss, %d : f32
    %me = arith.addf %mean, %eps : f32
    %r = math.rsqrt %me : f32
    %n = arith.mulf %acc, %r : f32
    %o = arith.mulf %n, %g : f32
    coda.yield %o : f32
  }
  return %y : tensor<5x16xf32>
}

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id3 = affine_map<(m, h, i) -> (m, h, i)>
#head = affine_map<(m, h, i) -> (m, h)>
#gam = affine_map<(m, h, i) -> (h, i)>
#id2 = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%x: tensor<5x6xf32>, %w: tensor<16x6xf32>, %gamma: tensor<16xf32>,
                     %dy: tensor<5x16xf32>) -> (tensor<5x6xf32>, tensor<16x6xf32>, tensor<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5x16xf32>) -> tensor<5x16xf32>
  %q = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<5x6xf32>, tensor<16x6xf32>) outs(%z : tensor<5x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<5x16xf32>
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [5, 2, 8] : tensor<5x16xf32> into tensor<5x2x8xf32>
  %dy3 = tensor.expand_shape %dy [[0], [1, 2]] output_shape [5, 2, 8] : tensor<5x16xf32> into tensor<5x2x8xf32>
  %g2 = tensor.expand_shape %gamma [[0, 1]] output_shape [2, 8] : tensor<16xf32> into tensor<2x8xf32>
  %eh = tensor.empty() : tensor<5x2xf32>
  %zh = linalg.fill ins(%zero : f32) outs(%eh : tensor<5x2xf32>) -> tensor<5x2xf32>
  // Per head: the sum of squares and t = sum_j gamma_j dy_j q_j.
  %ss:2 = linalg.generic {indexing_maps = [#id3, #id3, #gam, #head, #head], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%q3, %dy3, %g2 : tensor<5x2x8xf32>, tensor<5x2x8xf32>, tensor<2x8xf32>) outs(%zh, %zh : tensor<5x2xf32>, tensor<5x2xf32>) {
  ^bb0(%qv: f32, %dv: f32, %gv: f32, %s: f32, %t: f32):
    %sq = arith.mulf %qv, %qv : f32
    %s1 = arith.addf %s, %sq : f32
    %gd = arith.mulf %gv, %dv : f32
    %gdq = arith.mulf %gd, %qv : f32
    %t1 = arith.addf %t, %gdq : f32
    linalg.yield %s1, %t1 : f32, f32
  } -> (tensor<5x2xf32>, tensor<5x2xf32>)
  %e3 = tensor.empty() : tensor<5x2x8xf32>
  // dq = r gamma dy - r^3 / 8 q t; the normalized q r for dgamma.
  %dq3:2 = linalg.generic {indexing_maps = [#id3, #id3, #gam, #head, #head, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q3, %dy3, %g2, %ss#0, %ss#1 : tensor<5x2x8xf32>, tensor<5x2x8xf32>, tensor<2x8xf32>, tensor<5x2xf32>, tensor<5x2xf32>)
      outs(%e3, %e3 : tensor<5x2x8xf32>, tensor<5x2x8xf32>) {
  ^bb0(%qv: f32, %dv: f32, %gv: f32, %s: f32, %t: f32, %o0: f32, %o1: f32):
    %d = arith.constant 8.0 : f32
    %eps = arith.constant 1.0e-2 : f32
    %mean = arith.divf %s, %d : f32
    %me = arith.addf %mean, %eps : f32
    %r = math.rsqrt %me : f32
    %rg = arith.mulf %r, %gv : f32
    %a = arith.mulf %rg, %dv : f32
    %r2 = arith.mulf %r, %r : f32
    %r3 = arith.mulf %r2, %r : f32
    %r3d = arith.divf %r3, %d : f32
    %qt = arith.mulf %qv, %t : f32
    %b = arith.mulf %r3d, %qt : f32
    %dq = arith.subf %a, %b : f32
    %qr = arith.mulf %qv, %r : f32
    linalg.yield %dq, %qr : f32, f32
  } -> (tensor<5x2x8xf32>, tensor<5x2x8xf32>)
  %dq = tensor.collapse_shape %dq3#0 [[0], [1, 2]] : tensor<5x2x8xf32> into tensor<5x16xf32>
  %qr = tensor.collapse_shape %dq3#1 [[0], [1, 2]] : tensor<5x2x8xf32> into tensor<5x16xf32>
  %ex = tensor.empty() : tensor<5x6xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<5x6xf32>) -> tensor<5x6xf32>
  %dx = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dq, %w : tensor<5x16xf32>, tensor<16x6xf32>) outs(%zx : tensor<5x6xf32>) {
  ^bb0(%g: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %g, %wv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<5x6xf32>
  %ew = tensor.empty() : tensor<16x6xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<16x6xf32>) -> tensor<16x6xf32>
  %dw = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dq, %x : tensor<5x16xf32>, tensor<5x6xf32>) outs(%zw : tensor<16x6xf32>) {
  ^bb0(%g: f32, %xv: f32, %acc: f32):
    %p = arith.mulf %g, %xv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x6xf32>
  %eg = tensor.empty() : tensor<16xf32>
  %zg = linalg.fill ins(%zero : f32) outs(%eg : tensor<16xf32>) -> tensor<16xf32>
  %dgamma = linalg.generic {indexing_maps = [#id2, #id2, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %qr : tensor<5x16xf32>, tensor<5x16xf32>) outs(%zg : tensor<16xf32>) {
  ^bb0(%dv: f32, %n: f32, %acc: f32):
    %p = arith.mulf %dv, %n : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %dx, %dw, %dgamma : tensor<5x6xf32>, tensor<16x6xf32>, tensor<16xf32>
}
