// Q (or K) projection with Qwen3's / OLMo-2's per-head RMSNorm and RoPE in
// one GEMM: each head's 128 columns normalized by their own root mean
// square (a group statistic), scaled by the norm's weight (one per head
// dimension, repeated per head: a column input), then rotated (rotate_half
// with cos / sin tables per position). qk_norm_rope.py times it against
// torch.compile's projection + norm + rotation.
func.func @qk_norm_rope(%x: memref<?x?xbf16>, %w: memref<?x?xbf16>, %gamma: memref<?xf32>,
                        %cos: memref<?x128xbf16>, %sin: memref<?x128xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %x, %w transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %g = %gamma : memref<?xf32>, periodic %c = %cos : memref<?x128xbf16>,
               periodic %s = %sin : memref<?x128xbf16>) outs(%y : memref<?x?xbf16>) {
    %sq = arith.mulf %acc, %acc : f32
    %ss = coda.group_reduce sum %sq row group 128 : f32 -> f32
    %inv = arith.constant 0.0078125 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.mulf %ss, %inv : f32
    %t = arith.addf %ms, %eps : f32
    %r = math.rsqrt %t : f32
    %n = arith.mulf %acc, %r : f32
    %v = arith.mulf %n, %g : f32
    %o = coda.pair_map stride 64 (%lo, %hi) = %v, (%c0, %c1) = %c, (%s0, %s1) = %s
        : f32, bf16, bf16 -> f32 {
      %cf0 = arith.extf %c0 : bf16 to f32
      %cf1 = arith.extf %c1 : bf16 to f32
      %sf0 = arith.extf %s0 : bf16 to f32
      %sf1 = arith.extf %s1 : bf16 to f32
      %a0 = arith.mulf %lo, %cf0 : f32
      %b0 = arith.mulf %hi, %sf0 : f32
      %r0 = arith.subf %a0, %b0 : f32
      %a1 = arith.mulf %hi, %cf1 : f32
      %b1 = arith.mulf %lo, %sf1 : f32
      %r1 = arith.addf %a1, %b1 : f32
      coda.yield %r0, %r1 : f32, f32
    }
    %ob = arith.truncf %o : f32 to bf16
    coda.yield %ob : bf16
  }
  return
}
