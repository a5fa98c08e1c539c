// RUN: coda-opt %s --coda-test-differential-main="rtol=0 atol=0" | %cpu-runner | FileCheck %s

// FP8 operands (e4m3 lhs, e4m3 weights stored N x K) with row-wise scales,
// as torchao's float8 row-wise recipe and torch._scaled_mm compute: the
// per-token scale of the lhs as a row input, the per-channel scale of the
// weight as a column input, applied to the f32 accumulator before the bf16
// rounding. The reference widens the same fp8 values to f32, multiplies and
// scales at the same points, so the two agree exactly.

// CHECK: coda-check ok: 2208 elements, max abs error 0

func.func @fused(%a: tensor<48x40xf8E4M3FN>, %w: tensor<46x40xf8E4M3FN>, %sa: tensor<48xf32>,
                 %sw: tensor<46xf32>, %o: tensor<48x46xbf16>) -> tensor<48x46xbf16> {
  %y = coda.gemm %a, %w transpose_b : tensor<48x40xf8E4M3FN>, tensor<46x40xf8E4M3FN>
      epilogue(%acc, row %r = %sa : tensor<48xf32>, col %c = %sw : tensor<46xf32>)
      outs(%o : tensor<48x46xbf16>) {
    %x = arith.mulf %acc, %r : f32
    %z = arith.mulf %x, %c : f32
    %t = arith.truncf %z : f32 to bf16
    coda.yield %t : bf16
  }
  return %y : tensor<48x46xbf16>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%a: tensor<48x40xf8E4M3FN>, %w: tensor<46x40xf8E4M3FN>, %sa: tensor<48xf32>,
                     %sw: tensor<46xf32>) -> tensor<48x46xbf16> {
  %zero = arith.constant 0.0 : f32
  %af0 = tensor.empty() : tensor<48x40xf32>
  %af = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<48x40xf8E4M3FN>) outs(%af0 : tensor<48x40xf32>) {
  ^bb0(%v: f8E4M3FN, %out: f32):
    %f = arith.extf %v : f8E4M3FN to f32
    linalg.yield %f : f32
  } -> tensor<48x40xf32>
  %wt0 = tensor.empty() : tensor<40x46xf32>
  %wt = linalg.generic {indexing_maps = [affine_map<(k, n) -> (n, k)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<46x40xf8E4M3FN>) outs(%wt0 : tensor<40x46xf32>) {
  ^bb0(%v: f8E4M3FN, %out: f32):
    %f = arith.extf %v : f8E4M3FN to f32
    linalg.yield %f : f32
  } -> tensor<40x46xf32>
  %e = tensor.empty() : tensor<48x46xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<48x46xf32>) -> tensor<48x46xf32>
  %mm = linalg.matmul ins(%af, %wt : tensor<48x40xf32>, tensor<40x46xf32>) outs(%z : tensor<48x46xf32>) -> tensor<48x46xf32>
  %eb = tensor.empty() : tensor<48x46xbf16>
  %y = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %sa, %sw : tensor<48x46xf32>, tensor<48xf32>, tensor<46xf32>) outs(%eb : tensor<48x46xbf16>) {
  ^bb0(%m: f32, %r: f32, %c: f32, %out: bf16):
    %x = arith.mulf %m, %r : f32
    %s = arith.mulf %x, %c : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<48x46xbf16>
  return %y : tensor<48x46xbf16>
}
