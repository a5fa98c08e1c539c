// RUN: coda-opt %s --coda-test-differential-main="rtol=0 atol=0" | %cpu-runner | FileCheck %s

// FP8 training's two copies of one GEMM output from its epilogue: the
// row-major codes with one scale per 1 x 128 group (the next GEMM's
// operand) and the token-major copy (coda.transpose) with one scale per
// 128 x 1 group (the weight gradient's operand, K = tokens contiguous).
// M = 200 leaves a ragged second column group of 72 rows; column 5 is
// zero (its column scale the floor 1e-12 / 448, its codes 0). The
// reference quantizes with linalg reductions over m floordiv 128 and
// n floordiv 128 and transposes with linalg.transpose; both decode the
// codes to f32 for the comparison.

// CHECK: coda-check ok: 6600 elements, max abs error 0,
// CHECK: coda-check ok: 200 elements, max abs error 0,
// CHECK: coda-check ok: 6600 elements, max abs error 0,
// CHECK: coda-check ok: 66 elements, max abs error 0,

func.func @fused(%a: tensor<200x16xf32>, %w: tensor<33x16xf32>)
    -> (tensor<200x33xf32>, tensor<200x1xf32>, tensor<33x200xf32>, tensor<2x33xf32>) {
  %e = tensor.empty() : tensor<200x33xf8E4M3FN>
  %se = tensor.empty() : tensor<200x1xf32>
  %te = tensor.empty() : tensor<33x200xf8E4M3FN>
  %tse = tensor.empty() : tensor<2x33xf32>
  %codes, %scales, %tcodes, %tscales = coda.gemm %a, %w transpose_b : tensor<200x16xf32>, tensor<33x16xf32>
      epilogue(%acc) outs(%e, %se, %te, %tse : tensor<200x33xf8E4M3FN>, tensor<200x1xf32>, tensor<33x200xf8E4M3FN>, tensor<2x33xf32>) {
    %zero = arith.constant 0.0 : f32
    %five = arith.constant 5 : index
    %n = coda.col_index
    %is5 = arith.cmpi eq, %n, %five : index
    %v = arith.select %is5, %zero, %acc : f32
    %abs = math.absf %v : f32
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    // 1 x 128 along the row.
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %floor = arith.maximumf %amax, %eps : f32
    %scale = arith.divf %floor, %fmax : f32
    %q = arith.divf %v, %scale : f32
    %lo = arith.maximumf %q, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %s = coda.group_value %scale row group 128 : f32
    // 128 x 1 down the column, written transposed.
    %tamax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %tfloor = arith.maximumf %tamax, %eps : f32
    %tscale = arith.divf %tfloor, %fmax : f32
    %tq = arith.divf %v, %tscale : f32
    %tlo = arith.maximumf %tq, %nfmax : f32
    %tc = arith.minimumf %tlo, %fmax : f32
    %tcode = arith.truncf %tc : f32 to f8E4M3FN
    %t = coda.transpose %tcode : f8E4M3FN
    %ts = coda.group_value %tscale col group 128 : f32
    coda.yield %code, %s, %t, %ts : f8E4M3FN, !coda.grouped<f32>, !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  %d0 = tensor.empty() : tensor<200x33xf32>
  %decoded = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                             iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<200x33xf8E4M3FN>) outs(%d0 : tensor<200x33xf32>) {
  ^bb0(%x: f8E4M3FN, %o: f32):
    %y = arith.extf %x : f8E4M3FN to f32
    linalg.yield %y : f32
  } -> tensor<200x33xf32>
  %td0 = tensor.empty() : tensor<33x200xf32>
  %tdecoded = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                              iterator_types = ["parallel", "parallel"]}
      ins(%tcodes : tensor<33x200xf8E4M3FN>) outs(%td0 : tensor<33x200xf32>) {
  ^bb0(%x: f8E4M3FN, %o: f32):
    %y = arith.extf %x : f8E4M3FN to f32
    linalg.yield %y : f32
  } -> tensor<33x200xf32>
  return %decoded, %scales, %tdecoded, %tscales : tensor<200x33xf32>, tensor<200x1xf32>, tensor<33x200xf32>, tensor<2x33xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#rowgroup = affine_map<(m, n) -> (m, n floordiv 128)>
#colgroup = affine_map<(m, n) -> (m floordiv 128, n)>

// Codes of v against its group's scale, decoded: clamp(v / scale) rounded
// to e4m3 and back.
func.func private @quantize(%v: f32, %scale: f32) -> f32 {
  %fmax = arith.constant 448.0 : f32
  %nfmax = arith.constant -448.0 : f32
  %q = arith.divf %v, %scale : f32
  %lo = arith.maximumf %q, %nfmax : f32
  %c = arith.minimumf %lo, %fmax : f32
  %code = arith.truncf %c : f32 to f8E4M3FN
  %d = arith.extf %code : f8E4M3FN to f32
  return %d : f32
}

func.func @reference(%a: tensor<200x16xf32>, %w: tensor<33x16xf32>)
    -> (tensor<200x33xf32>, tensor<200x1xf32>, tensor<33x200xf32>, tensor<2x33xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %eps = arith.constant 1.0e-12 : f32
  %fmax = arith.constant 448.0 : f32
  %e = tensor.empty() : tensor<200x33xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<200x33xf32>) -> tensor<200x33xf32>
  %wt0 = tensor.empty() : tensor<16x33xf32>
  %wt = linalg.transpose ins(%w : tensor<33x16xf32>) outs(%wt0 : tensor<16x33xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%a, %wt : tensor<200x16xf32>, tensor<16x33xf32>) outs(%z : tensor<200x33xf32>) -> tensor<200x33xf32>
  // Column 5 zeroed.
  %v = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<200x33xf32>) outs(%e : tensor<200x33xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = linalg.index 1 : index
    %five = arith.constant 5 : index
    %is5 = arith.cmpi eq, %n, %five : index
    %r = arith.select %is5, %zero, %x : f32
    linalg.yield %r : f32
  } -> tensor<200x33xf32>
  // Scales: amax over n floordiv 128 (rows) and m floordiv 128 (columns).
  %re = tensor.empty() : tensor<200x1xf32>
  %r0 = linalg.fill ins(%ninf : f32) outs(%re : tensor<200x1xf32>) -> tensor<200x1xf32>
  %ramax = linalg.generic {indexing_maps = [#id, #rowgroup], iterator_types = ["parallel", "reduction"]}
      ins(%v : tensor<200x33xf32>) outs(%r0 : tensor<200x1xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %abs = math.absf %x : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  } -> tensor<200x1xf32>
  %ce = tensor.empty() : tensor<2x33xf32>
  %c0 = linalg.fill ins(%ninf : f32) outs(%ce : tensor<2x33xf32>) -> tensor<2x33xf32>
  %camax = linalg.generic {indexing_maps = [#id, #colgroup], iterator_types = ["reduction", "parallel"]}
      ins(%v : tensor<200x33xf32>) outs(%c0 : tensor<2x33xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %abs = math.absf %x : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  } -> tensor<2x33xf32>
  %rscale = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ramax : tensor<200x1xf32>) outs(%re : tensor<200x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %f = arith.maximumf %x, %eps : f32
    %s = arith.divf %f, %fmax : f32
    linalg.yield %s : f32
  } -> tensor<200x1xf32>
  %cscale = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%camax : tensor<2x33xf32>) outs(%ce : tensor<2x33xf32>) {
  ^bb0(%x: f32, %o: f32):
    %f = arith.maximumf %x, %eps : f32
    %s = arith.divf %f, %fmax : f32
    linalg.yield %s : f32
  } -> tensor<2x33xf32>
  %rq = linalg.generic {indexing_maps = [#id, #rowgroup, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %rscale : tensor<200x33xf32>, tensor<200x1xf32>) outs(%e : tensor<200x33xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %d = func.call @quantize(%x, %s) : (f32, f32) -> f32
    linalg.yield %d : f32
  } -> tensor<200x33xf32>
  %cq = linalg.generic {indexing_maps = [#id, #colgroup, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %cscale : tensor<200x33xf32>, tensor<2x33xf32>) outs(%e : tensor<200x33xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %d = func.call @quantize(%x, %s) : (f32, f32) -> f32
    linalg.yield %d : f32
  } -> tensor<200x33xf32>
  %t0 = tensor.empty() : tensor<33x200xf32>
  %cqt = linalg.transpose ins(%cq : tensor<200x33xf32>) outs(%t0 : tensor<33x200xf32>) permutation = [1, 0]
  return %rq, %rscale, %cqt, %cscale : tensor<200x33xf32>, tensor<200x1xf32>, tensor<33x200xf32>, tensor<2x33xf32>
}
