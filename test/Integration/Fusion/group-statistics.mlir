// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=FUSED

// Statistics over groups of a GEMM output's row as frontends write them,
// on the output viewed as [M, N / w, w]: a blockwise FP8 quantization
// (torchao's blockwise prototype, DeepSeek-V3's act_quant: the group's
// absolute maximum, floored, over 448, the division, the clamp, the cast)
// with its scales returned keepdim and squeezed; the same with the scales
// reduced to [M, N / w] directly; and a per-head RMSNorm (Qwen3's q_norm:
// the head's mean square, rsqrt, times a per-head-dimension weight).
// --coda-fuse makes each one GEMM whose epilogue computes the statistic;
// the fused programs equal the unfused ones (the quantizations exactly).
// And each head's arg-max as torch-mlir lowers torch.max(v, -1) on the
// [M, heads, 16] view (the position within the head of its first maximum,
// of values rounded down so that heads hold ties): group_reduce argmax gives
// the column, its remainder by 16 the position.
// 13 rows: no tile divides them.

// CHECK: coda-check ok: 624 elements, max abs error 0
// CHECK: coda-check ok: 39 elements, max abs error 0
// CHECK: coda-check ok: 624 elements, max abs error 0
// CHECK: coda-check ok: 39 elements, max abs error 0
// CHECK: coda-check ok: 832 elements
// CHECK: coda-check ok: 39 elements, max abs error 0

// FUSED-LABEL: func.func @reference
// FUSED: coda.gemm %arg0, %arg1 transpose_b : tensor<13x32xbf16>, tensor<48x32xbf16>
// FUSED: %[[ABS:.+]] = math.absf
// FUSED: coda.group_reduce max %[[ABS]] row group 16 : f32 -> f32
// FUSED: coda.group_value %{{.+}} row group 16 : f32
// FUSED: arith.truncf %{{.+}} : f32 to f8E4M3FN
// FUSED: coda.yield %{{.+}}, %{{.+}} : !coda.grouped<f32>, f8E4M3FN
// FUSED: coda.gemm %arg0, %arg2 transpose_b
// FUSED: coda.group_reduce max
// FUSED: coda.yield %{{.+}}, %{{.+}} : !coda.grouped<f32>, f8E4M3FN
// FUSED: coda.gemm %arg0, %arg3 transpose_b : tensor<13x32xbf16>, tensor<64x32xbf16>
// FUSED-NEXT: epilogue(%{{.+}}, col %{{.+}} = %{{.+}} : tensor<64xf32>)
// FUSED: coda.group_reduce sum %{{.+}} row group 16 : f32 -> f32
// FUSED: math.rsqrt
// FUSED: coda.yield %{{.+}} : bf16
// FUSED: coda.gemm %arg0, %arg5 transpose_b
// FUSED: %[[AT:.+]] = coda.group_reduce argmax %{{.+}} row group 16 : f32 -> index
// FUSED: arith.remui %[[AT]], %{{.+}} : index
// FUSED: coda.yield %{{.+}} : !coda.grouped<f32>
// FUSED-NOT: coda.gemm
// FUSED-NOT: tensor.expand_shape

#lhs = affine_map<(m, n, k) -> (m, k)>
#rhsT = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
#id3 = affine_map<(m, g, e) -> (m, g, e)>
#group3 = affine_map<(m, g, e) -> (m, g, 0)>
#group2 = affine_map<(m, g, e) -> (m, g)>
#elem = affine_map<(m, g, e) -> (e)>

func.func @reference(%x: tensor<13x32xbf16>, %w: tensor<48x32xbf16>, %w2: tensor<48x32xbf16>, %w3: tensor<64x32xbf16>, %gamma: tensor<16xf32>,
                     %w4: tensor<48x32xbf16>)
    -> (tensor<13x48xf8E4M3FN>, tensor<13x3xf32>, tensor<13x48xf8E4M3FN>, tensor<13x3xf32>, tensor<13x64xbf16>,
        tensor<13x3xf32>) {
  // quantize_keepdim
  %zero0 = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<13x48xf32>
  %z0 = linalg.fill ins(%zero0 : f32) outs(%e0 : tensor<13x48xf32>) -> tensor<13x48xf32>
  %y0 = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %w : tensor<13x32xbf16>, tensor<48x32xbf16>) outs(%z0 : tensor<13x48xf32>) -> tensor<13x48xf32>
  %v0 = tensor.expand_shape %y0 [[0], [1, 2]] output_shape [13, 3, 16] : tensor<13x48xf32> into tensor<13x3x16xf32>
  %ea0 = tensor.empty() : tensor<13x3x1xf32>
  %za0 = linalg.fill ins(%zero0 : f32) outs(%ea0 : tensor<13x3x1xf32>) -> tensor<13x3x1xf32>
  %amax0 = linalg.generic {indexing_maps = [#id3, #group3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v0 : tensor<13x3x16xf32>) outs(%za0 : tensor<13x3x1xf32>) {
  ^bb0(%a0: f32, %m0: f32):
    %abs0 = math.absf %a0 : f32
    %mx0 = arith.maximumf %m0, %abs0 : f32
    linalg.yield %mx0 : f32
  } -> tensor<13x3x1xf32>
  %scale0 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%amax0 : tensor<13x3x1xf32>) outs(%ea0 : tensor<13x3x1xf32>) {
  ^bb0(%a0: f32, %o0: f32):
    %eps0 = arith.constant 1.0e-4 : f32
    %fmax0 = arith.constant 448.0 : f32
    %floor0 = arith.maximumf %a0, %eps0 : f32
    %s0 = arith.divf %floor0, %fmax0 : f32
    linalg.yield %s0 : f32
  } -> tensor<13x3x1xf32>
  %eq0 = tensor.empty() : tensor<13x3x16xf8E4M3FN>
  %q0 = linalg.generic {indexing_maps = [#id3, #group3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v0, %scale0 : tensor<13x3x16xf32>, tensor<13x3x1xf32>) outs(%eq0 : tensor<13x3x16xf8E4M3FN>) {
  ^bb0(%a0: f32, %s0: f32, %o0: f8E4M3FN):
    %hi0 = arith.constant 448.0 : f32
    %lo0 = arith.constant -448.0 : f32
    %d0 = arith.divf %a0, %s0 : f32
    %c00 = arith.maximumf %d0, %lo0 : f32
    %c10 = arith.minimumf %c00, %hi0 : f32
    %t0 = arith.truncf %c10 : f32 to f8E4M3FN
    linalg.yield %t0 : f8E4M3FN
  } -> tensor<13x3x16xf8E4M3FN>
  %codes0 = tensor.collapse_shape %q0 [[0], [1, 2]] : tensor<13x3x16xf8E4M3FN> into tensor<13x48xf8E4M3FN>
  %scales0 = tensor.collapse_shape %scale0 [[0], [1, 2]] : tensor<13x3x1xf32> into tensor<13x3xf32>
  // quantize_squeezed
  %zero1 = arith.constant 0.0 : f32
  %ninf1 = arith.constant 0xFF800000 : f32
  %e1 = tensor.empty() : tensor<13x48xf32>
  %z1 = linalg.fill ins(%zero1 : f32) outs(%e1 : tensor<13x48xf32>) -> tensor<13x48xf32>
  %y1 = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %w2 : tensor<13x32xbf16>, tensor<48x32xbf16>) outs(%z1 : tensor<13x48xf32>) -> tensor<13x48xf32>
  %v1 = tensor.expand_shape %y1 [[0], [1, 2]] output_shape [13, 3, 16] : tensor<13x48xf32> into tensor<13x3x16xf32>
  %ea1 = tensor.empty() : tensor<13x3xf32>
  %za1 = linalg.fill ins(%ninf1 : f32) outs(%ea1 : tensor<13x3xf32>) -> tensor<13x3xf32>
  %amax1 = linalg.generic {indexing_maps = [#id3, #group2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v1 : tensor<13x3x16xf32>) outs(%za1 : tensor<13x3xf32>) {
  ^bb0(%a1: f32, %m1: f32):
    %abs1 = math.absf %a1 : f32
    %mx1 = arith.maximumf %m1, %abs1 : f32
    linalg.yield %mx1 : f32
  } -> tensor<13x3xf32>
  %scale1 = linalg.generic {indexing_maps = [affine_map<(m, g) -> (m, g)>, affine_map<(m, g) -> (m, g)>], iterator_types = ["parallel", "parallel"]}
      ins(%amax1 : tensor<13x3xf32>) outs(%ea1 : tensor<13x3xf32>) {
  ^bb0(%a1: f32, %o1: f32):
    %eps1 = arith.constant 1.0e-4 : f32
    %fmax1 = arith.constant 448.0 : f32
    %floor1 = arith.maximumf %a1, %eps1 : f32
    %s1 = arith.divf %floor1, %fmax1 : f32
    linalg.yield %s1 : f32
  } -> tensor<13x3xf32>
  %eq1 = tensor.empty() : tensor<13x3x16xf8E4M3FN>
  %q1 = linalg.generic {indexing_maps = [#id3, #group2, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v1, %scale1 : tensor<13x3x16xf32>, tensor<13x3xf32>) outs(%eq1 : tensor<13x3x16xf8E4M3FN>) {
  ^bb0(%a1: f32, %s1: f32, %o1: f8E4M3FN):
    %hi1 = arith.constant 448.0 : f32
    %lo1 = arith.constant -448.0 : f32
    %d1 = arith.divf %a1, %s1 : f32
    %c01 = arith.maximumf %d1, %lo1 : f32
    %c11 = arith.minimumf %c01, %hi1 : f32
    %t1 = arith.truncf %c11 : f32 to f8E4M3FN
    linalg.yield %t1 : f8E4M3FN
  } -> tensor<13x3x16xf8E4M3FN>
  %codes1 = tensor.collapse_shape %q1 [[0], [1, 2]] : tensor<13x3x16xf8E4M3FN> into tensor<13x48xf8E4M3FN>
  // head_rmsnorm
  %zero2 = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<13x64xf32>
  %z2 = linalg.fill ins(%zero2 : f32) outs(%e2 : tensor<13x64xf32>) -> tensor<13x64xf32>
  %y2 = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %w3 : tensor<13x32xbf16>, tensor<64x32xbf16>) outs(%z2 : tensor<13x64xf32>) -> tensor<13x64xf32>
  %v2 = tensor.expand_shape %y2 [[0], [1, 2]] output_shape [13, 4, 16] : tensor<13x64xf32> into tensor<13x4x16xf32>
  %es2 = tensor.empty() : tensor<13x4x1xf32>
  %zs2 = linalg.fill ins(%zero2 : f32) outs(%es2 : tensor<13x4x1xf32>) -> tensor<13x4x1xf32>
  %ss2 = linalg.generic {indexing_maps = [#id3, #group3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v2 : tensor<13x4x16xf32>) outs(%zs2 : tensor<13x4x1xf32>) {
  ^bb0(%a2: f32, %s2: f32):
    %sq2 = arith.mulf %a2, %a2 : f32
    %acc2 = arith.addf %s2, %sq2 : f32
    linalg.yield %acc2 : f32
  } -> tensor<13x4x1xf32>
  %rstd2 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ss2 : tensor<13x4x1xf32>) outs(%es2 : tensor<13x4x1xf32>) {
  ^bb0(%s2: f32, %o2: f32):
    %d2 = arith.constant 16.0 : f32
    %eps2 = arith.constant 1.0e-6 : f32
    %mean2 = arith.divf %s2, %d2 : f32
    %me2 = arith.addf %mean2, %eps2 : f32
    %r2 = math.rsqrt %me2 : f32
    linalg.yield %r2 : f32
  } -> tensor<13x4x1xf32>
  %eo2 = tensor.empty() : tensor<13x4x16xbf16>
  %n2 = linalg.generic {indexing_maps = [#id3, #group3, #elem, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v2, %rstd2, %gamma : tensor<13x4x16xf32>, tensor<13x4x1xf32>, tensor<16xf32>) outs(%eo2 : tensor<13x4x16xbf16>) {
  ^bb0(%a2: f32, %r2: f32, %g2: f32, %o2: bf16):
    %s2 = arith.mulf %a2, %r2 : f32
    %t2 = arith.mulf %s2, %g2 : f32
    %b2 = arith.truncf %t2 : f32 to bf16
    linalg.yield %b2 : bf16
  } -> tensor<13x4x16xbf16>
  %out2 = tensor.collapse_shape %n2 [[0], [1, 2]] : tensor<13x4x16xbf16> into tensor<13x64xbf16>
  // head_argmax: the position of each head's first (rounded) maximum
  %zero3 = arith.constant 0.0 : f32
  %ninf3 = arith.constant 0xFF800000 : f32
  %c03 = arith.constant 0 : i64
  %e3 = tensor.empty() : tensor<13x48xf32>
  %z3 = linalg.fill ins(%zero3 : f32) outs(%e3 : tensor<13x48xf32>) -> tensor<13x48xf32>
  %y3 = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %w4 : tensor<13x32xbf16>, tensor<48x32xbf16>) outs(%z3 : tensor<13x48xf32>) -> tensor<13x48xf32>
  %v3 = tensor.expand_shape %y3 [[0], [1, 2]] output_shape [13, 3, 16] : tensor<13x48xf32> into tensor<13x3x16xf32>
  %ev3 = tensor.empty() : tensor<13x3xf32>
  %fv3 = linalg.fill ins(%ninf3 : f32) outs(%ev3 : tensor<13x3xf32>) -> tensor<13x3xf32>
  %ei3 = tensor.empty() : tensor<13x3xi64>
  %fi3 = linalg.fill ins(%c03 : i64) outs(%ei3 : tensor<13x3xi64>) -> tensor<13x3xi64>
  %top3:2 = linalg.generic {indexing_maps = [#id3, #group2, #group2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v3 : tensor<13x3x16xf32>) outs(%fv3, %fi3 : tensor<13x3xf32>, tensor<13x3xi64>) {
  ^bb0(%a3: f32, %m3: f32, %i3: i64):
    %f3 = math.floor %a3 : f32
    %j3 = linalg.index 2 : index
    %ji3 = arith.index_cast %j3 : index to i64
    %mx3 = arith.maximumf %f3, %m3 : f32
    %gt3 = arith.cmpf ogt, %f3, %m3 : f32
    %s3 = arith.select %gt3, %ji3, %i3 : i64
    linalg.yield %mx3, %s3 : f32, i64
  } -> (tensor<13x3xf32>, tensor<13x3xi64>)
  // As f32: the differential check compares float tensors.
  %at3 = linalg.generic {indexing_maps = [affine_map<(m, g) -> (m, g)>, affine_map<(m, g) -> (m, g)>], iterator_types = ["parallel", "parallel"]}
      ins(%top3#1 : tensor<13x3xi64>) outs(%ev3 : tensor<13x3xf32>) {
  ^bb0(%i3: i64, %o3: f32):
    %p3 = arith.sitofp %i3 : i64 to f32
    linalg.yield %p3 : f32
  } -> tensor<13x3xf32>
  return %codes0, %scales0, %codes1, %scale1, %out2, %at3 : tensor<13x48xf8E4M3FN>, tensor<13x3xf32>, tensor<13x48xf8E4M3FN>, tensor<13x3xf32>, tensor<13x64xbf16>, tensor<13x3xf32>
}
