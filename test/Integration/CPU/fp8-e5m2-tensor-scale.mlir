// RUN: coda-opt %s --coda-test-differential-main="rtol=0 atol=0" | %cpu-runner | FileCheck %s

// f8E5M2 operands (the gradients' format in FP8 training recipes) with one
// per-tensor scale, the scalar input, and an f32 output: the reference
// widens the same 8-bit values and scales at the same point, so the two
// agree exactly.

// CHECK: coda-check ok: 1035 elements, max abs error 0

func.func @fused(%a: tensor<45x64xf8E5M2>, %w: tensor<23x64xf8E5M2>, %s: f32,
                 %o: tensor<45x23xf32>) -> tensor<45x23xf32> {
  %y = coda.gemm %a, %w transpose_b : tensor<45x64xf8E5M2>, tensor<23x64xf8E5M2>
      epilogue(%acc, scalar %sv = %s : f32) outs(%o : tensor<45x23xf32>) {
    %x = arith.mulf %acc, %sv : f32
    coda.yield %x : f32
  }
  return %y : tensor<45x23xf32>
}

#id = affine_map<(m, n) -> (m, n)>

func.func @reference(%a: tensor<45x64xf8E5M2>, %w: tensor<23x64xf8E5M2>, %s: f32) -> tensor<45x23xf32> {
  %zero = arith.constant 0.0 : f32
  %af0 = tensor.empty() : tensor<45x64xf32>
  %af = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<45x64xf8E5M2>) outs(%af0 : tensor<45x64xf32>) {
  ^bb0(%v: f8E5M2, %out: f32):
    %f = arith.extf %v : f8E5M2 to f32
    linalg.yield %f : f32
  } -> tensor<45x64xf32>
  %wt0 = tensor.empty() : tensor<64x23xf32>
  %wt = linalg.generic {indexing_maps = [affine_map<(k, n) -> (n, k)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<23x64xf8E5M2>) outs(%wt0 : tensor<64x23xf32>) {
  ^bb0(%v: f8E5M2, %out: f32):
    %f = arith.extf %v : f8E5M2 to f32
    linalg.yield %f : f32
  } -> tensor<64x23xf32>
  %e = tensor.empty() : tensor<45x23xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<45x23xf32>) -> tensor<45x23xf32>
  %mm = linalg.matmul ins(%af, %wt : tensor<45x64xf32>, tensor<64x23xf32>) outs(%z : tensor<45x23xf32>) -> tensor<45x23xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<45x23xf32>) outs(%e : tensor<45x23xf32>) {
  ^bb0(%m: f32, %out: f32):
    %x = arith.mulf %m, %s : f32
    linalg.yield %x : f32
  } -> tensor<45x23xf32>
  return %y : tensor<45x23xf32>
}
