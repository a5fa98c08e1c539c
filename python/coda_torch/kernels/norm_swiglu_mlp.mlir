// coda-compile-flags: --save-for-backward
func.func @norm_swiglu_mlp(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>, %wgu: tensor<?x?xbf16>,
                           %wd: tensor<?x?xbf16>) -> (tensor<?x?xbf16>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %rows = tensor.dim %wgu, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %wd, %c0 : tensor<?x?xbf16>
  %features = arith.divui %rows, %c2 : index
  %out = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %h = coda.gemm %x, %wgu transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %rs : tensor<?xf32>) outs(%out : tensor<?x?xbf16>) {
    %p = coda.pair_contract (%ga, %ua) = %acc, (%r0, %r1) = %r : f32, f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %g = arith.mulf %ga, %r0 : f32
      %u = arith.mulf %ua, %r1 : f32
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
  %parts = arith.ceildivui %hidden, %c128 : index
  %zE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %pE = tensor.empty(%tokens, %parts) : tensor<?x?xf32>
  %sE = tensor.empty(%tokens) : tensor<?xf32>
  %z, %pz = coda.gemm %h, %wd transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %xv = %x : tensor<?x?xbf16>) outs(%zE, %pE : tensor<?x?xbf16>, tensor<?x?xf32>) {
    %xf = arith.extf %xv : bf16 to f32
    %v = arith.addf %acc, %xf : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 128 : f32
    %vb = arith.truncf %v : f32 to bf16
    coda.yield %vb, %part : bf16, !coda.partial<f32>
  }
  %ss = coda.reduce_partials sum row %pz : tensor<?x?xf32> outs(%sE : tensor<?xf32>)
  return %z, %ss : tensor<?x?xbf16>, tensor<?xf32>
}
