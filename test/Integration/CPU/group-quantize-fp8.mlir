// RUN: coda-opt %s --coda-test-differential-main="rtol=0 atol=0" | %cpu-runner | FileCheck %s

// A GEMM writing its output as FP8 (e4m3) codes with one scale per 1 x 128
// group, as DeepSeek-V3's and torchao's blockwise recipes quantize
// activations: the group's absolute maximum, scale = amax / 448, codes =
// v / scale clamped to +-448. N = 200 leaves a ragged second group of 72
// columns; row 5 is zero (its scale is the floor 1e-12 / 448, its codes 0).
// The reference computes the same values with a linalg reduction over
// n floordiv 128; both decode the codes to f32 for the comparison.

// CHECK: coda-check ok: 6600 elements, max abs error 0,
// CHECK: coda-check ok: 66 elements, max abs error 0,

func.func @fused(%a: tensor<33x16xf32>, %w: tensor<200x16xf32>)
    -> (tensor<33x200xf32>, tensor<33x2xf32>) {
  %e = tensor.empty() : tensor<33x200xf8E4M3FN>
  %se = tensor.empty() : tensor<33x2xf32>
  %codes, %scales = coda.gemm %a, %w transpose_b : tensor<33x16xf32>, tensor<200x16xf32>
      epilogue(%acc) outs(%e, %se : tensor<33x200xf8E4M3FN>, tensor<33x2xf32>) {
    %zero = arith.constant 0.0 : f32
    %five = arith.constant 5 : index
    %m = coda.row_index
    %is5 = arith.cmpi eq, %m, %five : index
    %v = arith.select %is5, %zero, %acc : f32
    %abs = math.absf %v : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %eps = arith.constant 1.0e-12 : f32
    %floor = arith.maximumf %amax, %eps : f32
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %scale = arith.divf %floor, %fmax : f32
    %q = arith.divf %v, %scale : f32
    %lo = arith.maximumf %q, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %s = coda.group_value %scale row group 128 : f32
    coda.yield %code, %s : f8E4M3FN, !coda.grouped<f32>
  }
  %d0 = tensor.empty() : tensor<33x200xf32>
  %decoded = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m, n)>],
                             iterator_types = ["parallel", "parallel"]}
      ins(%codes : tensor<33x200xf8E4M3FN>) outs(%d0 : tensor<33x200xf32>) {
  ^bb0(%x: f8E4M3FN, %o: f32):
    %y = arith.extf %x : f8E4M3FN to f32
    linalg.yield %y : f32
  } -> tensor<33x200xf32>
  return %decoded, %scales : tensor<33x200xf32>, tensor<33x2xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#group = affine_map<(m, n) -> (m, n floordiv 128)>

func.func @reference(%a: tensor<33x16xf32>, %w: tensor<200x16xf32>)
    -> (tensor<33x200xf32>, tensor<33x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<33x200xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<33x200xf32>) -> tensor<33x200xf32>
  %wt0 = tensor.empty() : tensor<16x200xf32>
  %wt = linalg.transpose ins(%w : tensor<200x16xf32>) outs(%wt0 : tensor<16x200xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%a, %wt : tensor<33x16xf32>, tensor<16x200xf32>) outs(%z : tensor<33x200xf32>) -> tensor<33x200xf32>
  // Row 5 zeroed.
  %v = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<33x200xf32>) outs(%e : tensor<33x200xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = linalg.index 0 : index
    %five = arith.constant 5 : index
    %is5 = arith.cmpi eq, %m, %five : index
    %r = arith.select %is5, %zero, %x : f32
    linalg.yield %r : f32
  } -> tensor<33x200xf32>
  // amax over n floordiv 128.
  %ninf = arith.constant 0xFF800000 : f32
  %ge = tensor.empty() : tensor<33x2xf32>
  %g0 = linalg.fill ins(%ninf : f32) outs(%ge : tensor<33x2xf32>) -> tensor<33x2xf32>
  %amax = linalg.generic {indexing_maps = [#id, #group], iterator_types = ["parallel", "reduction"]}
      ins(%v : tensor<33x200xf32>) outs(%g0 : tensor<33x2xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %abs = math.absf %x : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  } -> tensor<33x2xf32>
  %scales = linalg.generic {indexing_maps = [affine_map<(m, g) -> (m, g)>, affine_map<(m, g) -> (m, g)>],
                            iterator_types = ["parallel", "parallel"]}
      ins(%amax : tensor<33x2xf32>) outs(%ge : tensor<33x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %f = arith.maximumf %x, %eps : f32
    %s = arith.divf %f, %fmax : f32
    linalg.yield %s : f32
  } -> tensor<33x2xf32>
  %decoded = linalg.generic {indexing_maps = [#id, #group, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %scales : tensor<33x200xf32>, tensor<33x2xf32>) outs(%e : tensor<33x200xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %q = arith.divf %x, %s : f32
    %lo = arith.maximumf %q, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %d = arith.extf %code : f8E4M3FN to f32
    linalg.yield %d : f32
  } -> tensor<33x200xf32>
  return %decoded, %scales : tensor<33x200xf32>, tensor<33x2xf32>
}
