// LM head + cross-entropy behind a deferred RMSNorm: the logits are
// rs * (x W^T), x the un-normalized residual stream (times the norm's
// gamma) and rs its rows' norm scale rsqrt(mean(x^2) + eps), from the sums
// of squares the last layer's GEMM emitted; never materialized. The
// epilogue scales the accumulator by rs and emits per-tile log-sum-exp
// partials and the target's logit; loss = log-sum-exp - target logit. With
// --derive-backward: the adjoint GEMM recomputes the logits, writes
// rs dloss (softmax - onehot) as dAcc and reduces rs's gradient as row
// partials; then dX and dW. The variant `saved` keeps the accumulator: the
// forward also returns it rounded to bf16 (tokens x vocabulary), and the
// adjoint reads it instead of recomputing the product (an epilogue-only
// pass in place of a GEMM; coda_torch writes dAcc over it).
// coda-compile-flags: --save-for-backward
// coda-variant: saved s/outs(%pE, %picked0 : tensor<?x?xf32>, tensor<?xf32>)/& attributes {coda.save_accumulator}/
func.func @linear_norm_cross_entropy(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>,
                                     %w: tensor<?x?xbf16>, %t: tensor<?xi64>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %vocab = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %c128 = arith.constant 128 : index
  %parts = arith.ceildivui %vocab, %c128 : index
  %pE = tensor.empty(%tokens, %parts) : tensor<?x?xf32>
  %vE = tensor.empty(%tokens) : tensor<?xf32>
  %picked0 = linalg.fill ins(%zero : f32) outs(%vE : tensor<?xf32>) -> tensor<?xf32>
  %lp, %picked = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %rs : tensor<?xf32>, row %target = %t : tensor<?xi64>)
      outs(%pE, %picked0 : tensor<?x?xf32>, tensor<?xf32>) {
    %z = arith.mulf %acc, %r : f32
    %l = coda.row_reduce logsumexp %z tile 128 : f32
    %s = coda.row_select %z at %target : f32, i64
    coda.yield %l, %s : !coda.partial<f32>, !coda.row<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<?x?xf32> outs(%vE : tensor<?xf32>)
  %loss = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>, affine_map<(m) -> (m)>],
                          iterator_types = ["parallel"]}
      ins(%lse, %picked : tensor<?xf32>, tensor<?xf32>) outs(%vE : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<?xf32>
  return %loss : tensor<?xf32>
}
