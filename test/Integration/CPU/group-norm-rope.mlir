// RUN: %differential %s | %cpu-runner | FileCheck %s

// A per-head RMSNorm (Qwen3's QK-norm) followed by the rotation in one
// epilogue: each head's 16 columns normalized by their own sum of squares
// (a group statistic), scaled by the norm's weight (a column input), then
// rotated (rotate_half, pairs 8 apart) with cos / sin tables per token
// (periodic inputs). Three tokens, three heads; the reference takes the
// statistic with a linalg reduction over n floordiv 16 and each element's
// partner with tensor.extract at n xor 8.

// CHECK: coda-check ok: 144 elements, max abs error 0,

func.func @fused(%a: tensor<3x5xf32>, %w: tensor<48x5xf32>, %gamma: tensor<48xf32>,
                 %cos: tensor<3x16xf32>, %sin: tensor<3x16xf32>) -> tensor<3x48xf32> {
  %e = tensor.empty() : tensor<3x48xf32>
  %y = coda.gemm %a, %w transpose_b : tensor<3x5xf32>, tensor<48x5xf32>
      epilogue(%acc, col %g = %gamma : tensor<48xf32>, periodic %c = %cos : tensor<3x16xf32>,
               periodic %s = %sin : tensor<3x16xf32>) outs(%e : tensor<3x48xf32>) {
    %sq = arith.mulf %acc, %acc : f32
    %ss = coda.group_reduce sum %sq row group 16 : f32 -> f32
    %inv = arith.constant 0.0625 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.mulf %ss, %inv : f32
    %t = arith.addf %ms, %eps : f32
    %r = math.rsqrt %t : f32
    %n = arith.mulf %acc, %r : f32
    %v = arith.mulf %n, %g : f32
    %o = coda.pair_map stride 8 (%lo, %hi) = %v, (%c0, %c1) = %c, (%s0, %s1) = %s
        : f32, f32, f32 -> f32 {
      %a0 = arith.mulf %lo, %c0 : f32
      %b0 = arith.mulf %hi, %s0 : f32
      %r0 = arith.subf %a0, %b0 : f32
      %a1 = arith.mulf %hi, %c1 : f32
      %b1 = arith.mulf %lo, %s1 : f32
      %r1 = arith.addf %a1, %b1 : f32
      coda.yield %r0, %r1 : f32, f32
    }
    coda.yield %o : f32
  }
  return %y : tensor<3x48xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#head = affine_map<(m, n) -> (m, n floordiv 16)>
#col = affine_map<(m, n) -> (n)>
#period = affine_map<(m, n) -> (m, n mod 16)>

func.func @reference(%a: tensor<3x5xf32>, %w: tensor<48x5xf32>, %gamma: tensor<48xf32>,
                     %cos: tensor<3x16xf32>, %sin: tensor<3x16xf32>) -> tensor<3x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<3x48xf32>) -> tensor<3x48xf32>
  %wt0 = tensor.empty() : tensor<5x48xf32>
  %wt = linalg.transpose ins(%w : tensor<48x5xf32>) outs(%wt0 : tensor<5x48xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%a, %wt : tensor<3x5xf32>, tensor<5x48xf32>) outs(%z : tensor<3x48xf32>) -> tensor<3x48xf32>
  %he = tensor.empty() : tensor<3x3xf32>
  %hz = linalg.fill ins(%zero : f32) outs(%he : tensor<3x3xf32>) -> tensor<3x3xf32>
  %ss = linalg.generic {indexing_maps = [#id, #head], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<3x48xf32>) outs(%hz : tensor<3x3xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<3x3xf32>
  %v = linalg.generic {indexing_maps = [#id, #head, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %ss, %gamma : tensor<3x48xf32>, tensor<3x3xf32>, tensor<48xf32>) outs(%e : tensor<3x48xf32>) {
  ^bb0(%x: f32, %s: f32, %g: f32, %o: f32):
    %inv = arith.constant 0.0625 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.mulf %s, %inv : f32
    %t = arith.addf %ms, %eps : f32
    %r = math.rsqrt %t : f32
    %n = arith.mulf %x, %r : f32
    %gn = arith.mulf %n, %g : f32
    linalg.yield %gn : f32
  } -> tensor<3x48xf32>
  // out = v cos - partner(v) sin in a head's first half, v cos + partner(v)
  // sin in its second, the partner being the column 8 away within the head.
  %out = linalg.generic {indexing_maps = [#id, #period, #period, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v, %cos, %sin : tensor<3x48xf32>, tensor<3x16xf32>, tensor<3x16xf32>) outs(%e : tensor<3x48xf32>) {
  ^bb0(%x: f32, %c: f32, %s: f32, %o: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c8 = arith.constant 8 : index
    %p = arith.xori %n, %c8 : index
    %partner = tensor.extract %v[%m, %p] : tensor<3x48xf32>
    %c16 = arith.constant 16 : index
    %in = arith.remui %n, %c16 : index
    %first = arith.cmpi ult, %in, %c8 : index
    %xc = arith.mulf %x, %c : f32
    %ps = arith.mulf %partner, %s : f32
    %lo = arith.subf %xc, %ps : f32
    %hi = arith.addf %xc, %ps : f32
    %r = arith.select %first, %lo, %hi : f32
    linalg.yield %r : f32
  } -> tensor<3x48xf32>
  return %out : tensor<3x48xf32>
}
