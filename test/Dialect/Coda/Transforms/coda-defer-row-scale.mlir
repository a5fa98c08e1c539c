// RUN: coda-opt %s --coda-convert-matmuls --coda-defer-row-scale --canonicalize --split-input-file | FileCheck %s

#id = affine_map<(m, k) -> (m, k)>
#row = affine_map<(m, k) -> (m)>
#col = affine_map<(m, k) -> (k)>

// RMSNorm then a projection: y = x * rsqrt(s / K + eps) * gamma feeds
// y W^T. The GEMM reads x, scales its accumulator by r[m], and uses
// diag(gamma) W.
// CHECK-LABEL: func @rmsnorm_then_linear
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xbf16>, %[[S:[a-z0-9_]+]]: tensor<4xf32>, %[[GAMMA:[a-z0-9_]+]]: tensor<8xbf16>, %[[W:[a-z0-9_]+]]: tensor<6x8xbf16>)
// CHECK: %[[R:.+]] = linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%[[S]] : tensor<4xf32>)
// CHECK: math.rsqrt
// CHECK: %[[WG:.+]] = linalg.generic {{.*}} ins(%[[W]], %[[GAMMA]] : tensor<6x8xbf16>, tensor<8xbf16>) {{.*}} attrs = {coda.weight_transform}
// CHECK: %[[Y:.+]] = coda.gemm %[[X]], %[[WG]] transpose_b : tensor<4x8xbf16>, tensor<6x8xbf16>
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]], row %[[RV:[a-z0-9_]+]] = %[[R]] : tensor<4xf32>)
// CHECK: %[[SCALED:.+]] = arith.mulf %[[ACC]], %[[RV]] : f32
// CHECK: coda.yield %[[SCALED]] : f32
// CHECK: return %[[Y]]
func.func @rmsnorm_then_linear(%x: tensor<4x8xbf16>, %s: tensor<4xf32>, %gamma: tensor<8xbf16>, %w: tensor<6x8xbf16>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xbf16>
  %y = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s, %gamma : tensor<4x8xbf16>, tensor<4xf32>, tensor<8xbf16>) outs(%e : tensor<4x8xbf16>) {
  ^bb0(%v: bf16, %ss: f32, %g: bf16, %o: bf16):
    %k = arith.constant 8.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %ss, %k : f32
    %a = arith.addf %mean, %eps : f32
    %r = math.rsqrt %a : f32
    %vf = arith.extf %v : bf16 to f32
    %n = arith.mulf %vf, %r : f32
    %nb = arith.truncf %n : f32 to bf16
    %out = arith.mulf %g, %nb : bf16
    linalg.yield %out : bf16
  } -> tensor<4x8xbf16>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%y, %w : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %sum = arith.addf %acc, %p : f32
    linalg.yield %sum : f32
  } -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}

// -----

#id = affine_map<(m, k) -> (m, k)>
#row = affine_map<(m, k) -> (m)>

// A row scale alone (written as a division) folds nothing into the weight.
// CHECK-LABEL: func @row_scale_only
// CHECK-NOT: coda.weight_transform
// CHECK: %[[R:.+]] = linalg.generic
// CHECK: arith.divf
// CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x6xf32>
// CHECK-NEXT: epilogue(%{{.*}}, row %{{.*}} = %[[R]] : tensor<4xf32>)
func.func @row_scale_only(%x: tensor<4x8xf32>, %s: tensor<4xf32>, %w: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %ss: f32, %o: f32):
    %sq = math.sqrt %ss : f32
    %n = arith.divf %v, %sq : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %r = linalg.matmul ins(%y, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}

// -----

#id = affine_map<(m, k) -> (m, k)>
#row = affine_map<(m, k) -> (m)>
#col = affine_map<(m, k) -> (k)>

// Not deferred: a shift (x * r + b) is not a product of row and column
// factors, and a scaled lhs that is also returned must still be written.
// CHECK-LABEL: func @not_deferred
// CHECK-NOT: row %
// CHECK: return
func.func @not_deferred(%x: tensor<4x8xf32>, %s: tensor<4xf32>, %b: tensor<8xf32>, %w: tensor<8x6xf32>)
    -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %shifted = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s, %b : tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %r: f32, %c: f32, %o: f32):
    %m = arith.mulf %v, %r : f32
    %a = arith.addf %m, %c : f32
    linalg.yield %a : f32
  } -> tensor<4x8xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<4x8xf32>, tensor<4xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %r: f32, %o: f32):
    %m = arith.mulf %v, %r : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x6xf32>) -> tensor<4x6xf32>
  %r0 = linalg.matmul ins(%shifted, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %r1 = linalg.matmul ins(%scaled, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %r0, %r1, %scaled : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x8xf32>
}
