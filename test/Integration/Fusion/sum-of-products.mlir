// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=CHECK-FUSED

// Two products summed elementwise (a gated or LoRA-style sum x W + u V, or
// two attention branches' projections): the sum joins the epilogue of the
// later GEMM, which reads the earlier one's result as a tile input.
// 13 x 7 outputs (no tile divides them).

// CHECK: coda-check ok: 91 elements

// CHECK-FUSED-LABEL: func.func @reference
// CHECK-FUSED: %[[FIRST:.+]] = coda.gemm %arg0, %arg1
// CHECK-FUSED: coda.gemm %arg2, %arg3
// CHECK-FUSED-NEXT: epilogue(%{{.*}}, tile %{{.*}} = %[[FIRST]] : tensor<13x7xf32>)
// CHECK-FUSED-NOT: linalg.generic

func.func @reference(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %c: tensor<13x6xf32>,
                     %d: tensor<6x7xf32>) -> tensor<13x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm1 = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm2 = linalg.matmul ins(%c, %d : tensor<13x6xf32>, tensor<6x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %sum = linalg.add ins(%mm1, %mm2 : tensor<13x7xf32>, tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  return %sum : tensor<13x7xf32>
}
