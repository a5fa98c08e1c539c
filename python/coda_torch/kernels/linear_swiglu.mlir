// Linear + SwiGLU over interleaved gate/up weight rows (row 2j: gate j, row
// 2j + 1: up j): y = silu(x Wg^T) * (x Wu^T) in one GEMM's epilogue.
// scripts/build-torch-kernels compiles it with --derive-backward, which adds
// the backward program's kernels (adjoint GEMM, dX, dW).
// The exponential and the division are marked approximate (fastmath afn,
// arcp: ex2.approx of a product, div.approx), the arithmetic torch.compile's
// generated kernels use for silu.
func.func @linear_swiglu(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %rows = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %features = arith.divui %rows, %c2 : index
  %out = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %y = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%out : tensor<?x?xbf16>) {
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng fastmath<afn> : f32
      %d = arith.addf %one, %e : f32
      %silu = arith.divf %g, %d fastmath<arcp,afn> : f32
      %p = arith.mulf %silu, %u : f32
      %pb = arith.truncf %p : f32 to bf16
      coda.yield %pb : bf16
    }
    coda.yield %h : !coda.pair<bf16>
  }
  return %y : tensor<?x?xbf16>
}
