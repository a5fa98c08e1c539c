// RUN: coda-opt %s --coda-test-differential-main="fuse fuse-tile=4" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse="tile=4" | FileCheck %s --check-prefix=CHECK-FUSED

// Reductions over the rows of a GEMM output (dgamma-like column sums of
// dy * x, and a column maximum), 13 rows in tiles of 4 (a short last tile),
// against the unfused program.

// CHECK: coda-check ok: 7 elements
// CHECK: coda-check ok: 7 elements

// CHECK-FUSED-DAG: coda.col_reduce sum
// CHECK-FUSED-DAG: coda.col_reduce max
// CHECK-FUSED-NOT: linalg.generic

#id = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %x: tensor<13x7xf32>) -> (tensor<7xf32>, tensor<7xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %dy = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %prod = linalg.mul ins(%dy, %x : tensor<13x7xf32>, tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %ce = tensor.empty() : tensor<7xf32>
  %c0 = linalg.fill ins(%zero : f32) outs(%ce : tensor<7xf32>) -> tensor<7xf32>
  %dgamma = linalg.reduce { arith.addf } ins(%prod : tensor<13x7xf32>) outs(%c0 : tensor<7xf32>) dimensions = [0]
  %m0 = linalg.fill ins(%ninf : f32) outs(%ce : tensor<7xf32>) -> tensor<7xf32>
  %cmax = linalg.reduce { arith.maximumf } ins(%dy : tensor<13x7xf32>) outs(%m0 : tensor<7xf32>) dimensions = [0]
  return %dgamma, %cmax : tensor<7xf32>, tensor<7xf32>
}
