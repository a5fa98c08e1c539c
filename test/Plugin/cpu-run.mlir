// RUN: coda-opt %s --coda-test-differential-main | mlir-opt --load-dialect-plugin=%coda_plugin --load-pass-plugin=%coda_plugin --pass-pipeline="builtin.module(coda-to-llvm-cpu)" | %run-main | FileCheck %s

// Stock mlir-opt-22 with the plugin runs coda's whole CPU pipeline; the
// result computes what the unfused program computes.

// CHECK: coda-check ok: 60 elements

func.func @fused(%a: tensor<6x4xf32>, %b: tensor<4x10xf32>, %c: tensor<10xf32>, %o: tensor<6x10xf32>) -> tensor<6x10xf32> {
  %0 = coda.gemm %a, %b : tensor<6x4xf32>, tensor<4x10xf32> epilogue(%acc, col %cv = %c : tensor<10xf32>) outs(%o : tensor<6x10xf32>) {
    %0 = arith.addf %acc, %cv : f32
    %zero = arith.constant 0.0 : f32
    %1 = arith.maximumf %0, %zero : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<6x10xf32>
}

func.func @reference(%a: tensor<6x4xf32>, %b: tensor<4x10xf32>, %c: tensor<10xf32>) -> tensor<6x10xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<6x10xf32>) -> tensor<6x10xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<6x4xf32>, tensor<4x10xf32>) outs(%z : tensor<6x10xf32>) -> tensor<6x10xf32>
  %cb = linalg.broadcast ins(%c : tensor<10xf32>) outs(%e : tensor<6x10xf32>) dimensions = [0]
  %s = linalg.add ins(%mm, %cb : tensor<6x10xf32>, tensor<6x10xf32>) outs(%e : tensor<6x10xf32>) -> tensor<6x10xf32>
  %r = linalg.max ins(%s, %z : tensor<6x10xf32>, tensor<6x10xf32>) outs(%e : tensor<6x10xf32>) -> tensor<6x10xf32>
  return %r : tensor<6x10xf32>
}
