// A Llama MLP: gate/up + SwiGLU over interleaved weight rows (row 2j: gate
// j, row 2j + 1: up j), then the down projection, x: T x H, w_gate_up: 2F x H,
// w_down: H x F. Compiled with --save-for-backward: the forward also returns
// h and the gate and up columns of the first GEMM's accumulator, and the
// derived backward is four GEMMs: dz Wd with the SwiGLU derivative in its
// epilogue (dgate / dup interleaved), dx, dWgu, dWd.
// The forward's exponential and division are marked approximate (fastmath
// afn, arcp), as torch.compile's generated kernels compute silu.
// coda-compile-flags: --save-for-backward
func.func @swiglu_mlp(%x: tensor<?x?xbf16>, %wgu: tensor<?x?xbf16>, %wd: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %rows = tensor.dim %wgu, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %wd, %c0 : tensor<?x?xbf16>
  %features = arith.divui %rows, %c2 : index
  %out = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %h = coda.gemm %x, %wgu transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%out : tensor<?x?xbf16>) {
    %p = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng fastmath<afn> : f32
      %d = arith.addf %one, %e : f32
      %silu = arith.divf %g, %d fastmath<arcp,afn> : f32
      %y = arith.mulf %silu, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %p : !coda.pair<bf16>
  }
  %zE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %z = coda.gemm %h, %wd transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%zE : tensor<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return %z : tensor<?x?xbf16>
}
