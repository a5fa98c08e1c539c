// RUN: %differential %s | coda-opt --coda-to-llvm-cpu | not %run-main | FileCheck %s

// The differential harness itself: a fused program that leaves one column
// unwritten (its destination is poisoned with NaN) and gets another wrong must
// fail the run.

// CHECK: coda-check mismatch at linear index 0:
// CHECK: coda-check mismatch at linear index 2: got nan
// CHECK: coda-check FAILED: 16 of 16 elements differ

func.func @fused(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>, %o: tensor<4x4xf32>, %h0: tensor<4x2xf32>) -> tensor<4x4xf32> {
  // Yields each pair's odd column where the reference keeps every column;
  // columns 2 and 3 are never written and stay NaN.
  %h = coda.gemm %a, %b : tensor<4x2xf32>, tensor<2x4xf32> epilogue(%acc) outs(%h0 : tensor<4x2xf32>) {
    %pc = coda.pair_contract (%even, %odd) = %acc : f32 -> !coda.pair<f32> {
      coda.yield %odd : f32
    }
    coda.yield %pc : !coda.pair<f32>
  }
  %nan = arith.constant 0x7FC00000 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %poison = linalg.fill ins(%nan : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %full = tensor.insert_slice %h into %poison[0, 0] [4, 2] [1, 1] : tensor<4x2xf32> into tensor<4x4xf32>
  return %full : tensor<4x4xf32>
}

func.func @reference(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x2xf32>, tensor<2x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %mm : tensor<4x4xf32>
}
