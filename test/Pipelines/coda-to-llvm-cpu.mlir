// RUN: coda-opt %s --coda-to-llvm-cpu | FileCheck %s --implicit-check-not=rsqrtf

// The CPU pipeline leaves only the LLVM dialect: coda, linalg, scf, tensor,
// memref and math are all gone, and math without an LLVM intrinsic (rsqrt)
// is expanded (into sqrt, a libm call) rather than left as a call to a libm
// function that does not exist.

// CHECK: llvm.func @sqrtf(f32) -> f32
// CHECK-LABEL: llvm.func @scaled(
// CHECK-NOT: coda.
// CHECK-NOT: linalg.
// CHECK-NOT: scf.
// CHECK-NOT: tensor.
// CHECK-NOT: memref.
// CHECK-NOT: math.
// CHECK: llvm.call @sqrtf
// CHECK: llvm.return
func.func @scaled(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %s: tensor<4xf32>, %o: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32> epilogue(%acc, row %sv = %s : tensor<4xf32>) outs(%o : tensor<4x6xf32>) {
    %r = math.rsqrt %sv : f32
    %0 = arith.mulf %acc, %r : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<4x6xf32>
}
