// The weight gradient of a GEMM x W'^T whose weight is W' = W diag(gamma),
// an RMSNorm's gamma folded into the next GEMM's weight (the norm deferred
// into it): from that GEMM's dAcc (T x N) and input x (T x H),
// dW = (dAcc^T x) diag(gamma) and dgamma = sum_n (dAcc^T x)[n, :] W[n, :],
// in one GEMM whose epilogue scales the columns and reduces gamma's
// gradient as column partials (finished over the row tiles), so that
// neither the fold's backward nor gamma's reduction is a pass of its own.
// coda-derive-backward: no
func.func @norm_weight_grad(%dacc: tensor<?x?xbf16>, %x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>,
                            %gamma: tensor<?xbf16>) -> (tensor<?x?xbf16>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %w, %c1 : tensor<?x?xbf16>
  %parts = arith.ceildivui %n, %c128 : index
  %dwE = tensor.empty(%n, %hidden) : tensor<?x?xbf16>
  %pE = tensor.empty(%parts, %hidden) : tensor<?x?xf32>
  %gE = tensor.empty(%hidden) : tensor<?xf32>
  %dw, %pg = coda.gemm %dacc, %x transpose_a : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, col %g = %gamma : tensor<?xbf16>, tile %wv = %w : tensor<?x?xbf16>)
      outs(%dwE, %pE : tensor<?x?xbf16>, tensor<?x?xf32>)
      attributes {coda.role = "forward:gemm0"} {
    %wf = arith.extf %wv : bf16 to f32
    %p = arith.mulf %acc, %wf : f32
    %part = coda.col_reduce sum %p tile 128 : f32
    %gf = arith.extf %g : bf16 to f32
    %d = arith.mulf %acc, %gf : f32
    %db = arith.truncf %d : f32 to bf16
    coda.yield %db, %part : bf16, !coda.partial<f32>
  }
  %dgamma = coda.reduce_partials sum col %pg : tensor<?x?xf32> outs(%gE : tensor<?xf32>)
      {coda.role = "forward:finish0"}
  return %dw, %dgamma : tensor<?x?xbf16>, tensor<?xf32>
}
