// The training step of cross-entropy.mlir derived with save=1 (appended to
// its derived functions): @forward also returns the log-sum-exp partials,
// the target logits and the logits its GEMM saved (coda.save_accumulator);
// @backward reads them, and its adjoint computes dAcc from the saved logits
// instead of recomputing them.

func.func @fused(%x: tensor<23x16xf32>, %w: tensor<90x16xf32>, %t: tensor<23xi64>, %dloss: tensor<23xf32>)
    -> (tensor<23x16xf32>, tensor<90x16xf32>) {
  %loss, %lp, %picked, %logits = func.call @forward(%x, %w, %t)
      : (tensor<23x16xf32>, tensor<90x16xf32>, tensor<23xi64>)
     -> (tensor<23xf32>, tensor<23x3xf32>, tensor<23xf32>, tensor<23x90xf32>)
  %dx, %dw = func.call @backward(%x, %w, %t, %lp, %picked, %logits, %dloss)
      : (tensor<23x16xf32>, tensor<90x16xf32>, tensor<23xi64>, tensor<23x3xf32>, tensor<23xf32>,
         tensor<23x90xf32>, tensor<23xf32>) -> (tensor<23x16xf32>, tensor<90x16xf32>)
  return %dx, %dw : tensor<23x16xf32>, tensor<90x16xf32>
}
