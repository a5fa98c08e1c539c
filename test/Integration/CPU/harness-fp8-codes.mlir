// RUN: coda-opt %s --coda-test-differential-main="rtol=0 atol=0" | coda-opt --coda-to-llvm-cpu | not %run-main | FileCheck %s

// The differential harness on FP8 results: e4m3 codes one code away from the
// expected ones pass (values that differ in their last f32 bits can round to
// neighbouring codes, 6-12 % apart), two codes away fail, even with no
// tolerance on the values.

// CHECK: coda-check ok: 16 elements
// CHECK: coda-check mismatch at linear index 0:
// CHECK: coda-check FAILED: 16 of 16 elements differ

#id = affine_map<(m, n) -> (m, n)>

// The product's e4m3 codes, each moved `steps` codes up.
func.func private @shifted(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>, %steps: i8) -> tensor<4x4xf8E4M3FN> {
  %e = tensor.empty() : tensor<4x4xf8E4M3FN>
  %q = coda.gemm %a, %b : tensor<4x2xf32>, tensor<2x4xf32> epilogue(%acc) outs(%e : tensor<4x4xf8E4M3FN>) {
    %c = arith.truncf %acc : f32 to f8E4M3FN
    coda.yield %c : f8E4M3FN
  }
  %moved = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q : tensor<4x4xf8E4M3FN>) outs(%e : tensor<4x4xf8E4M3FN>) {
  ^bb0(%x: f8E4M3FN, %o: f8E4M3FN):
    %bits = arith.bitcast %x : f8E4M3FN to i8
    %up = arith.addi %bits, %steps : i8
    %y = arith.bitcast %up : i8 to f8E4M3FN
    linalg.yield %y : f8E4M3FN
  } -> tensor<4x4xf8E4M3FN>
  return %moved : tensor<4x4xf8E4M3FN>
}

func.func @fused_0(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>) -> tensor<4x4xf8E4M3FN> {
  %one = arith.constant 1 : i8
  %r = call @shifted(%a, %b, %one) : (tensor<4x2xf32>, tensor<2x4xf32>, i8) -> tensor<4x4xf8E4M3FN>
  return %r : tensor<4x4xf8E4M3FN>
}

func.func @fused_1(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>) -> tensor<4x4xf8E4M3FN> {
  %two = arith.constant 2 : i8
  %r = call @shifted(%a, %b, %two) : (tensor<4x2xf32>, tensor<2x4xf32>, i8) -> tensor<4x4xf8E4M3FN>
  return %r : tensor<4x4xf8E4M3FN>
}

func.func private @codes(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>) -> tensor<4x4xf8E4M3FN> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x2xf32>, tensor<2x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %c0 = tensor.empty() : tensor<4x4xf8E4M3FN>
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x4xf32>) outs(%c0 : tensor<4x4xf8E4M3FN>) {
  ^bb0(%x: f32, %o: f8E4M3FN):
    %y = arith.truncf %x : f32 to f8E4M3FN
    linalg.yield %y : f8E4M3FN
  } -> tensor<4x4xf8E4M3FN>
  return %c : tensor<4x4xf8E4M3FN>
}

func.func @reference_0(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>) -> tensor<4x4xf8E4M3FN> {
  %r = call @codes(%a, %b) : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf8E4M3FN>
  return %r : tensor<4x4xf8E4M3FN>
}

func.func @reference_1(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>) -> tensor<4x4xf8E4M3FN> {
  %r = call @codes(%a, %b) : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf8E4M3FN>
  return %r : tensor<4x4xf8E4M3FN>
}
