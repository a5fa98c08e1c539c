// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=FUSED
// RUN: coda-opt %s --coda-fuse --canonicalize | FileCheck %s --check-prefix=MERGED

// Qwen3's QK-norm as a PyTorch frontend lowers it on [B, T, hidden]
// activations: the projection a contraction over the batch, its result
// viewed per head as [B, T, H, D] (`q_proj(x).view(B, T, H, D)`), the
// head's mean square, rsqrt, the per-head-dimension weight; and a blockwise
// 1 x 16 quantization of the same projection's result with a per-token
// scale read as [B, T, 1, 1]. The batch folds into the GEMM's rows, the two
// reshapes become one [B * T, N] -> [B, T, H, D] view, and both statistics
// join the GEMM's epilogue. 2 x 7 tokens.

// CHECK: coda-check ok: 896 elements
// CHECK: coda-check ok: 896 elements, max abs error 0
// CHECK: coda-check ok: 56 elements, max abs error 0

// FUSED-LABEL: func.func @reference
// FUSED: coda.gemm %{{.+}}, %arg1 transpose_b : tensor<14x32xbf16>, tensor<64x32xbf16>
// FUSED-DAG: coda.group_reduce sum %{{.+}} row group 16 : f32 -> f32
// FUSED-DAG: coda.group_reduce max %{{.+}} row group 16 : f32 -> f32
// FUSED-DAG: row %{{.+}} = %{{.+}} : tensor<14xf32>
// FUSED: coda.yield %{{.+}} : !coda.grouped<f32>, f8E4M3FN, bf16
// FUSED-NOT: linalg.generic

// The two fused ops each add the per-token scale; the GEMM's canonicalizer
// reads it once.
// MERGED: epilogue(%{{[a-z0-9]+}}, row %{{[a-z0-9]+}} = %{{[a-z0-9_]+}} : tensor<14xf32>, col
// MERGED-NOT: row %
// MERGED: coda.yield

#x = affine_map<(b, m, n, k) -> (b, m, k)>
#w = affine_map<(b, m, n, k) -> (n, k)>
#y = affine_map<(b, m, n, k) -> (b, m, n)>
#id4 = affine_map<(b, t, h, d) -> (b, t, h, d)>
#head = affine_map<(b, t, h, d) -> (b, t, h, 0)>
#elem = affine_map<(b, t, h, d) -> (d)>
#tok = affine_map<(b, t, h, d) -> (b, t, 0, 0)>

func.func @reference(%x: tensor<2x7x32xbf16>, %w: tensor<64x32xbf16>, %gamma: tensor<16xf32>,
                     %tokscale: tensor<2x7x1x1xf32>)
    -> (tensor<2x7x4x16xbf16>, tensor<2x7x4x16xf8E4M3FN>, tensor<2x7x4x1xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x7x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x7x64xf32>) -> tensor<2x7x64xf32>
  %q = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x7x32xbf16>, tensor<64x32xbf16>) outs(%z : tensor<2x7x64xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x7x64xf32>
  %v = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 7, 4, 16] : tensor<2x7x64xf32> into tensor<2x7x4x16xf32>
  %es = tensor.empty() : tensor<2x7x4x1xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x7x4x1xf32>) -> tensor<2x7x4x1xf32>
  %ss = linalg.generic {indexing_maps = [#id4, #head], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%v : tensor<2x7x4x16xf32>) outs(%zs : tensor<2x7x4x1xf32>) {
  ^bb0(%a: f32, %s: f32):
    %sq = arith.mulf %a, %a : f32
    %acc = arith.addf %s, %sq : f32
    linalg.yield %acc : f32
  } -> tensor<2x7x4x1xf32>
  %eo = tensor.empty() : tensor<2x7x4x16xbf16>
  %n = linalg.generic {indexing_maps = [#id4, #head, #elem, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v, %ss, %gamma : tensor<2x7x4x16xf32>, tensor<2x7x4x1xf32>, tensor<16xf32>) outs(%eo : tensor<2x7x4x16xbf16>) {
  ^bb0(%a: f32, %s: f32, %g: f32, %o: bf16):
    %d = arith.constant 16.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %mean = arith.divf %s, %d : f32
    %me = arith.addf %mean, %eps : f32
    %r = math.rsqrt %me : f32
    %t = arith.mulf %a, %r : f32
    %u = arith.mulf %t, %g : f32
    %b = arith.truncf %u : f32 to bf16
    linalg.yield %b : bf16
  } -> tensor<2x7x4x16xbf16>
  // The quantization of q times a per-token scale, in groups of 16.
  %za = linalg.fill ins(%zero : f32) outs(%es : tensor<2x7x4x1xf32>) -> tensor<2x7x4x1xf32>
  %amax = linalg.generic {indexing_maps = [#id4, #tok, #head], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%v, %tokscale : tensor<2x7x4x16xf32>, tensor<2x7x1x1xf32>) outs(%za : tensor<2x7x4x1xf32>) {
  ^bb0(%a: f32, %k: f32, %m: f32):
    %sc = arith.mulf %a, %k : f32
    %abs = math.absf %sc : f32
    %mx = arith.maximumf %m, %abs : f32
    linalg.yield %mx : f32
  } -> tensor<2x7x4x1xf32>
  %scale = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%amax : tensor<2x7x4x1xf32>) outs(%es : tensor<2x7x4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %floor = arith.maximumf %a, %eps : f32
    %s = arith.divf %floor, %fmax : f32
    linalg.yield %s : f32
  } -> tensor<2x7x4x1xf32>
  %eq = tensor.empty() : tensor<2x7x4x16xf8E4M3FN>
  %codes = linalg.generic {indexing_maps = [#id4, #tok, #head, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v, %tokscale, %scale : tensor<2x7x4x16xf32>, tensor<2x7x1x1xf32>, tensor<2x7x4x1xf32>) outs(%eq : tensor<2x7x4x16xf8E4M3FN>) {
  ^bb0(%a: f32, %k: f32, %s: f32, %o: f8E4M3FN):
    %hi = arith.constant 448.0 : f32
    %lo = arith.constant -448.0 : f32
    %sc = arith.mulf %a, %k : f32
    %d = arith.divf %sc, %s : f32
    %c0 = arith.maximumf %d, %lo : f32
    %c1 = arith.minimumf %c0, %hi : f32
    %t = arith.truncf %c1 : f32 to f8E4M3FN
    linalg.yield %t : f8E4M3FN
  } -> tensor<2x7x4x16xf8E4M3FN>
  return %n, %codes, %scale : tensor<2x7x4x16xbf16>, tensor<2x7x4x16xf8E4M3FN>, tensor<2x7x4x1xf32>
}
