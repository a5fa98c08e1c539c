// A per-head RMSNorm on a projection (QK-norm: 4 heads of 128, an f32
// weight per column, bf16 out), compiled with its derived backward
// (scripts/build-gpu-tests gives --derive-backward to cases named
// *-backward): the adjoint GEMM sums each head's adjoint of its statistic
// with a group_reduce over the same heads (test_frontend_groups.py checks
// it against PyTorch's autograd). 200 tokens: no tile divides them.
func.func @head_norm(%x: tensor<200x256xbf16>, %w: tensor<512x256xbf16>, %gamma: tensor<512xf32>) -> tensor<200x512xbf16> {
  %e = tensor.empty() : tensor<200x512xbf16>
  %y = coda.gemm %x, %w transpose_b : tensor<200x256xbf16>, tensor<512x256xbf16>
      epilogue(%acc, col %g = %gamma : tensor<512xf32>) outs(%e : tensor<200x512xbf16>) {
    %sq = arith.mulf %acc, %acc : f32
    %ss = coda.group_reduce sum %sq row group 128 : f32 -> f32
    %d = arith.constant 128.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %mean = arith.divf %ss, %d : f32
    %me = arith.addf %mean, %eps : f32
    %r = math.rsqrt %me : f32
    %n = arith.mulf %acc, %r : f32
    %o = arith.mulf %n, %g : f32
    %b = arith.truncf %o : f32 to bf16
    coda.yield %b : bf16
  }
  return %y : tensor<200x512xbf16>
}
