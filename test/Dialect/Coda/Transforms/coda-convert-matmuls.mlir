// RUN: coda-opt %s --coda-convert-matmuls --split-input-file | FileCheck %s

// CHECK-LABEL: func @named_matmul
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<4x8xbf16>, %[[B:[a-z0-9_]+]]: tensor<8x6xbf16>)
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4x6xf32>
// CHECK: %[[G:.+]] = coda.gemm %[[A]], %[[B]] : tensor<4x8xbf16>, tensor<8x6xbf16>
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]])
// CHECK-NEXT: outs(%[[E]] : tensor<4x6xf32>)
// CHECK-NEXT: coda.yield %[[ACC]] : f32
// CHECK-NOT: linalg.matmul
// CHECK: return %[[G]]
func.func @named_matmul(%a: tensor<4x8xbf16>, %b: tensor<8x6xbf16>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x6xbf16>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// A generic contraction reading its rhs as N x K, with a low-precision
// result: the epilogue rounds the f32 accumulator.
// CHECK-LABEL: func @transposed_rhs_bf16_result
// CHECK: coda.gemm %{{.*}}, %{{.*}} transpose_b : tensor<4x8xbf16>, tensor<6x8xbf16>
// CHECK: %[[T:.+]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: coda.yield %[[T]] : bf16
func.func @transposed_rhs_bf16_result(%a: tensor<4x8xbf16>, %b: tensor<6x8xbf16>) -> tensor<4x6xbf16> {
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<4x6xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<4x6xbf16>) -> tensor<4x6xbf16>
  %0 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%z : tensor<4x6xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  } -> tensor<4x6xbf16>
  return %0 : tensor<4x6xbf16>
}

// -----

// CHECK-LABEL: func @batched
// CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<2x8x6xf32>
func.func @batched(%a: tensor<2x4x8xf32>, %b: tensor<2x8x6xf32>) -> tensor<2x4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x6xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %0 : tensor<2x4x6xf32>
}

// -----

// C += A B: a destination that is not a zero fill is read as a tile input.
// CHECK-LABEL: func @accumulate
// CHECK-SAME: %[[C:[a-z0-9_]+]]: tensor<4x6xf32>)
// CHECK: coda.gemm
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]], tile %[[CV:[a-z0-9_]+]] = %[[C]] : tensor<4x6xf32>)
// CHECK-NEXT: outs(%[[C]] : tensor<4x6xf32>)
// CHECK: arith.addf %[[ACC]], %[[CV]] : f32
func.func @accumulate(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// Integer products and non-multiply-add bodies are not GEMMs.
// CHECK-LABEL: func @not_converted
// CHECK-NOT: coda.gemm
// CHECK: linalg.matmul
// CHECK: linalg.generic
func.func @not_converted(%a: tensor<4x8xi32>, %b: tensor<8x6xi32>, %c: tensor<4x6xi32>, %x: tensor<4x8xf32>, %y: tensor<8x6xf32>, %z: tensor<4x6xf32>)
    -> (tensor<4x6xi32>, tensor<4x6xf32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xi32>, tensor<8x6xi32>) outs(%c : tensor<4x6xi32>) -> tensor<4x6xi32>
  %1 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.maximumf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  return %0, %1 : tensor<4x6xi32>, tensor<4x6xf32>
}
