// RUN: coda-opt %s --coda-test-differential-main="fuse rtol=0 atol=0" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=FUSED

// An FP8 chain as frontends write it (delayed per-tensor scaling, as
// Transformer Engine trains): a bf16 linear layer whose output is scaled,
// clamped to e4m3's range and rounded for the next GEMM, with the row
// maxima of |y| that the next step's scale is made from; then the FP8 GEMM
// (f8 operands widened in its body) dequantized by the per-tensor scale of
// its lhs and the per-channel scale of its weights. --coda-fuse makes the
// quantization the first GEMM's epilogue (the 8-bit tensor is the only one
// written between the GEMMs) and the dequantization the second's; the fused
// program equals the unfused one exactly (fp8 rounding through the same
// APFloat semantics on both sides). 13 rows: no tile divides them.

// CHECK: coda-check ok: 260 elements, max abs error 0
// CHECK: coda-check ok: 13 elements, max abs error 0

// FUSED-LABEL: func.func @reference
// FUSED: %[[Q:.+]]:2 = coda.gemm %arg0, %arg1 transpose_b : tensor<13x32xbf16>, tensor<24x32xbf16>
// FUSED: arith.truncf %{{.+}} : f32 to f8E4M3FN
// FUSED: coda.row_reduce max
// FUSED: coda.yield %{{.+}}, %{{.+}} : f8E4M3FN, !coda.partial<f32>
// FUSED: coda.reduce_partials max row %[[Q]]#1
// FUSED: coda.gemm %[[Q]]#0, %arg2 transpose_b : tensor<13x24xf8E4M3FN>, tensor<20x24xf8E4M3FN>
// FUSED-NEXT: epilogue(%{{.+}}, col %{{.+}} = %arg3 : tensor<20xf32>, scalar %{{.+}} = %arg5 : f32)
// FUSED-NOT: linalg.generic

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhsT = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>

func.func @reference(%x: tensor<13x32xbf16>, %w1: tensor<24x32xbf16>, %w2: tensor<20x24xf8E4M3FN>,
                     %sw: tensor<20xf32>, %qs: f32, %dq: f32)
    -> (tensor<13x20xbf16>, tensor<13xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<13x24xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x24xf32>) -> tensor<13x24xf32>
  %y = linalg.generic {indexing_maps = [#lhs, #rhsT, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w1 : tensor<13x32xbf16>, tensor<24x32xbf16>) outs(%z : tensor<13x24xf32>) {
  ^bb0(%a: bf16, %b: bf16, %o: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<13x24xf32>
  // Quantize for the next GEMM: scale, clamp to e4m3's range, round.
  %e8 = tensor.empty() : tensor<13x24xf8E4M3FN>
  %q = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<13x24xf32>) outs(%e8 : tensor<13x24xf8E4M3FN>) {
  ^bb0(%v: f32, %o: f8E4M3FN):
    %lo = arith.constant -448.0 : f32
    %hi = arith.constant 448.0 : f32
    %s = arith.mulf %v, %qs : f32
    %c0 = arith.maximumf %s, %lo : f32
    %c1 = arith.minimumf %c0, %hi : f32
    %t = arith.truncf %c1 : f32 to f8E4M3FN
    linalg.yield %t : f8E4M3FN
  } -> tensor<13x24xf8E4M3FN>
  // The amax of each row, for the next step's scale.
  %er = tensor.empty() : tensor<13xf32>
  %fr = linalg.fill ins(%ninf : f32) outs(%er : tensor<13xf32>) -> tensor<13xf32>
  %amax = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<13x24xf32>) outs(%fr : tensor<13xf32>) {
  ^bb0(%v: f32, %m: f32):
    %a = math.absf %v : f32
    %n = arith.maximumf %m, %a : f32
    linalg.yield %n : f32
  } -> tensor<13xf32>
  // The FP8 GEMM and its dequantization (per-tensor scale of q, per-channel of w2).
  %e2 = tensor.empty() : tensor<13x20xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<13x20xf32>) -> tensor<13x20xf32>
  %acc = linalg.generic {indexing_maps = [#lhs, #rhsT, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%q, %w2 : tensor<13x24xf8E4M3FN>, tensor<20x24xf8E4M3FN>) outs(%z2 : tensor<13x20xf32>) {
  ^bb0(%a: f8E4M3FN, %b: f8E4M3FN, %o: f32):
    %af = arith.extf %a : f8E4M3FN to f32
    %bf = arith.extf %b : f8E4M3FN to f32
    %p = arith.mulf %af, %bf : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<13x20xf32>
  %eb = tensor.empty() : tensor<13x20xbf16>
  %out = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %sw : tensor<13x20xf32>, tensor<20xf32>) outs(%eb : tensor<13x20xbf16>) {
  ^bb0(%v: f32, %c: f32, %o: bf16):
    %a = arith.mulf %v, %dq : f32
    %b = arith.mulf %a, %c : f32
    %t = arith.truncf %b : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<13x20xbf16>
  return %out, %amax : tensor<13x20xbf16>, tensor<13xf32>
}
