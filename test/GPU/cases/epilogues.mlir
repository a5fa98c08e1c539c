// One epilogue primitive per kernel (and the three compound epilogues the
// Transformer block needs most), for benchmarks/epilogues.py: each against
// coda's plain GEMM of the same shape (primitives.mlir's plain_nt), so that
// what a primitive adds to the GEMM is measured alone. Dynamic shapes, bf16
// operands, rhs N x K.

// A row input: the deferred RMSNorm scale.
func.func @row_scale(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %r: memref<?xf32>,
                     %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %rv = %r : memref<?xf32>) outs(%y : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %rv : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// A column input: a bias.
func.func @col_bias(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %bias: memref<?xf32>,
                    %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %bv = %bias : memref<?xf32>) outs(%y : memref<?x?xbf16>) {
    %x = arith.addf %acc, %bv : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// A scalar input.
func.func @scalar_scale(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %s: f32,
                        %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, scalar %sv = %s : f32) outs(%y : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %sv : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// A tile input: the residual add.
func.func @residual(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %res: memref<?x?xbf16>,
                    %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %res : memref<?x?xbf16>) outs(%y : memref<?x?xbf16>) {
    %r = arith.extf %rv : bf16 to f32
    %x = arith.addf %acc, %r : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Row partials: sums of squares over 128 columns beside the tile output.
func.func @row_sumsq(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>,
                     %part: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y, %part : memref<?x?xbf16>, memref<?x?xf32>) {
    %sq = arith.mulf %acc, %acc : f32
    %p = coda.row_reduce sum %sq tile 128 : f32
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t, %p : bf16, !coda.partial<f32>
  }
  return
}

// Strided pairs (rotate_half without tables: heads of 128).
func.func @rotate_half(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%lo, %hi) = %acc : f32 -> f32 {
      %n = arith.negf %hi : f32
      coda.yield %n, %lo : f32, f32
    }
    %t = arith.truncf %r : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Residual + RMSNorm partials: the residual stream and its row statistic.
func.func @residual_norm(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %res: memref<?x?xbf16>,
                         %y: memref<?x?xbf16>, %part: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %res : memref<?x?xbf16>) outs(%y, %part : memref<?x?xbf16>, memref<?x?xf32>) {
    %r = arith.extf %rv : bf16 to f32
    %x = arith.addf %acc, %r : f32
    %sq = arith.mulf %x, %x : f32
    %p = coda.row_reduce sum %sq tile 128 : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t, %p : bf16, !coda.partial<f32>
  }
  return
}

// SwiGLU over interleaved gate/up columns into an M x N/2 output.
// The exponential and division are approximate (fastmath), as in
// torch.compile's kernels.
func.func @swiglu(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %out: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%out : memref<?x?xbf16>) {
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng fastmath<afn> : f32
      %d = arith.addf %one, %e : f32
      %sg = arith.divf %g, %d fastmath<arcp,afn> : f32
      %y = arith.mulf %sg, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %h : !coda.pair<bf16>
  }
  return
}

// Log-sum-exp partials over 128 columns and the target logit: the
// cross-entropy head, logits never written.
func.func @logsumexp(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %t: memref<?xi64>,
                     %lse: memref<?x?xf32>, %logit: memref<?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %tv = %t : memref<?xi64>) outs(%lse, %logit : memref<?x?xf32>, memref<?xf32>) {
    %l = coda.row_reduce logsumexp %acc tile 128 : f32
    %p = coda.row_select %acc at %tv : f32, i64
    coda.yield %l, %p : !coda.partial<f32>, !coda.row<f32>
  }
  return
}
