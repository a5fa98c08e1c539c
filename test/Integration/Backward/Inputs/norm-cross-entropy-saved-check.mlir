// The training step of norm-cross-entropy.mlir derived with save=1
// (appended to its derived functions): @forward also returns the
// log-sum-exp partials, the target logits and the product its GEMM saved
// (coda.save_accumulator, before the row scale); @backward reads them, and
// its adjoint computes dAcc and the row scale's gradient partials from the
// saved product instead of recomputing it.

func.func @fused(%x: tensor<23x16xf32>, %rs: tensor<23xf32>, %w: tensor<90x16xf32>,
                 %t: tensor<23xi64>, %dloss: tensor<23xf32>)
    -> (tensor<23x16xf32>, tensor<23xf32>, tensor<90x16xf32>) {
  %loss, %lp, %picked, %product = func.call @forward(%x, %rs, %w, %t)
      : (tensor<23x16xf32>, tensor<23xf32>, tensor<90x16xf32>, tensor<23xi64>)
     -> (tensor<23xf32>, tensor<23x3xf32>, tensor<23xf32>, tensor<23x90xf32>)
  %dx, %drs, %dw = func.call @backward(%x, %rs, %w, %t, %lp, %picked, %product, %dloss)
      : (tensor<23x16xf32>, tensor<23xf32>, tensor<90x16xf32>, tensor<23xi64>, tensor<23x3xf32>,
         tensor<23xf32>, tensor<23x90xf32>, tensor<23xf32>)
     -> (tensor<23x16xf32>, tensor<23xf32>, tensor<90x16xf32>)
  return %dx, %drs, %dw : tensor<23x16xf32>, tensor<23xf32>, tensor<90x16xf32>
}
