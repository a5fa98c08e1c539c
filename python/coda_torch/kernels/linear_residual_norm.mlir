// A projection plus the residual, and the row sums of squares of the result
// that the next RMSNorm needs (per-tile partials, finished): h = x W^T + r,
// sum_sq[m] = sum_n h[m, n]^2 (of h before its bf16 rounding). With
// --derive-backward --save-for-backward: the adjoint forms dAcc = dh +
// 2 h dsum_sq (also r's gradient) from the saved h (the forward returns it
// a second time), an epilogue-only kernel that reads no product; then dX
// and dW.
// coda-compile-flags: --save-for-backward
func.func @linear_residual_norm(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>,
                                %r: tensor<?x?xbf16>) -> (tensor<?x?xbf16>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %parts = arith.ceildivui %n, %c128 : index
  %hE = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %pE = tensor.empty(%tokens, %parts) : tensor<?x?xf32>
  %sE = tensor.empty(%tokens) : tensor<?xf32>
  %h, %p = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %rv = %r : tensor<?x?xbf16>) outs(%hE, %pE : tensor<?x?xbf16>, tensor<?x?xf32>) {
    %rf = arith.extf %rv : bf16 to f32
    %v = arith.addf %acc, %rf : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 128 : f32
    %vb = arith.truncf %v : f32 to bf16
    coda.yield %vb, %part : bf16, !coda.partial<f32>
  }
  %ss = coda.reduce_partials sum row %p : tensor<?x?xf32> outs(%sE : tensor<?xf32>)
  return %h, %ss : tensor<?x?xbf16>, tensor<?xf32>
}
