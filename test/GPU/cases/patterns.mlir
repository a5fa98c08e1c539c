// The fused patterns of a Llama block and its loss, as --coda-fuse makes them
// (docs/Fusion.md), one function each, with every buffer an argument so that
// the runtime's launch_function runs them whole (GEMMs, then finishes).
// Used by the GPU suite (test_patterns.py) and the benchmarks.

// GEMM-RMSNorm-GEMM: the output projection adds the residual and emits the
// norm's partial sums of squares; the finish sums them; the next GEMM applies
// the deferred scale rsqrt(ss / H + eps) to rows (gamma folded into its weight).
func.func @rmsnorm_gemm(%x: memref<?x?xbf16>, %wo: memref<?x?xbf16>, %res: memref<?x?xbf16>,
                        %w: memref<?x?xbf16>, %inv_h: f32,
                        %h: memref<?x?xbf16>, %ss_part: memref<?x?xf32>, %ss: memref<?xf32>,
                        %y: memref<?x?xbf16>) {
  coda.gemm %x, %wo transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %r = %res : memref<?x?xbf16>) outs(%h, %ss_part : memref<?x?xbf16>, memref<?x?xf32>) {
    %rf = arith.extf %r : bf16 to f32
    %s = arith.addf %acc, %rf : f32
    %sq = arith.mulf %s, %s : f32
    %p = coda.row_reduce sum %sq tile 128 : f32
    %sb = arith.truncf %s : f32 to bf16
    coda.yield %sb, %p : bf16, !coda.partial<f32>
  }
  coda.reduce_partials sum row %ss_part : memref<?x?xf32> outs(%ss : memref<?xf32>)
  coda.gemm %h, %w transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %sv = %ss : memref<?xf32>, scalar %k = %inv_h : f32) outs(%y : memref<?x?xbf16>) {
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.mulf %sv, %k : f32
    %var = arith.addf %mean, %eps : f32
    %rstd = math.rsqrt %var : f32
    %o = arith.mulf %acc, %rstd : f32
    %ob = arith.truncf %o : f32 to bf16
    coda.yield %ob : bf16
  }
  return
}

// Gate/up over interleaved weights with SwiGLU: silu(g) * u per column pair.
// The exponential and division are approximate (fastmath), as in
// torch.compile's kernels; primitives.mlir's SwiGLU keeps the exact ones.
func.func @gate_up_swiglu(%x: memref<?x?xbf16>, %wgu: memref<?x?xbf16>, %out: memref<?x?xbf16>) {
  coda.gemm %x, %wgu transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%out : memref<?x?xbf16>) {
    %a = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng fastmath<afn> : f32
      %d = arith.addf %one, %e : f32
      %sg = arith.divf %g, %d fastmath<arcp,afn> : f32
      %v = arith.mulf %sg, %u : f32
      %vb = arith.truncf %v : f32 to bf16
      coda.yield %vb : bf16
    }
    coda.yield %a : !coda.pair<bf16>
  }
  return
}

// Down projection + residual + the next norm's partial sums of squares, and
// their finish.
func.func @down_residual_norm(%a: memref<?x?xbf16>, %wd: memref<?x?xbf16>, %res: memref<?x?xbf16>,
                              %h: memref<?x?xbf16>, %ss_part: memref<?x?xf32>, %ss: memref<?xf32>) {
  coda.gemm %a, %wd transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %r = %res : memref<?x?xbf16>) outs(%h, %ss_part : memref<?x?xbf16>, memref<?x?xf32>) {
    %rf = arith.extf %r : bf16 to f32
    %s = arith.addf %acc, %rf : f32
    %sq = arith.mulf %s, %s : f32
    %p = coda.row_reduce sum %sq tile 128 : f32
    %sb = arith.truncf %s : f32 to bf16
    coda.yield %sb, %p : bf16, !coda.partial<f32>
  }
  coda.reduce_partials sum row %ss_part : memref<?x?xf32> outs(%ss : memref<?xf32>)
  return
}

// Q, K and V in one GEMM over concatenated weights; RoPE (rotate_half, head
// dim 128) with bf16 cos / sin tables (the dtype Hugging Face's rotary
// embedding hands a bf16 model) on the first %rotated_heads heads (q and k); v
// passes through.
func.func @qkv_rope(%x: memref<?x?xbf16>, %wqkv: memref<?x?xbf16>, %cos: memref<?x128xbf16>,
                    %sin: memref<?x128xbf16>, %rotated_heads: i64, %qkv: memref<?x?xbf16>) {
  coda.gemm %x, %wqkv transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xbf16>, periodic %s = %sin : memref<?x128xbf16>,
               scalar %nr = %rotated_heads : i64) outs(%qkv : memref<?x?xbf16>) {
    %y = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %s
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
    %n = coda.col_index
    // Compared per head, not per column: the head index is the same for
    // all of a thread's columns in a 128-column half of the tile, so the
    // comparison is made once for them.
    %c128 = arith.constant 128 : index
    %head = arith.divui %n, %c128 : index
    %head64 = arith.index_cast %head : index to i64
    %on = arith.cmpi ult, %head64, %nr : i64
    %z = arith.select %on, %y, %acc : f32
    %yb = arith.truncf %z : f32 to bf16
    coda.yield %yb : bf16
  }
  return
}

// LM head + cross-entropy: online log-sum-exp partials and the target logit;
// the finish combines the partials. loss = lse - target logit. The logits are
// never written.
func.func @lm_head_ce(%x: memref<?x?xbf16>, %w: memref<?x?xbf16>, %t: memref<?xi64>,
                      %lse_part: memref<?x?xf32>, %logit: memref<?xf32>, %lse: memref<?xf32>) {
  coda.gemm %x, %w transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %tv = %t : memref<?xi64>) outs(%lse_part, %logit : memref<?x?xf32>, memref<?xf32>) {
    %l = coda.row_reduce logsumexp %acc tile 128 : f32
    %p = coda.row_select %acc at %tv : f32, i64
    coda.yield %l, %p : !coda.partial<f32>, !coda.row<f32>
  }
  coda.reduce_partials logsumexp row %lse_part : memref<?x?xf32> outs(%lse : memref<?xf32>)
  return
}
