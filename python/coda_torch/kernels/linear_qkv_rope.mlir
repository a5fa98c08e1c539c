// The fused Q/K/V projection with rotary embeddings (rotate_half, head dim
// 128) on the Q and K columns: `rotate` is 1 on a column to rotate, 0 on a V
// column; cos / sin are tokens x 128 tables read per head. With
// --derive-backward: the adjoint GEMM applies the transposed rotation to dY
// in its epilogue (dAcc), then dX and dW.
func.func @linear_qkv_rope(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>, %cos: tensor<?x128xf32>,
                           %sin: tensor<?x128xf32>, %rotate: tensor<?xf32>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %out = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %qkv = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : tensor<?x128xf32>, periodic %s = %sin : tensor<?x128xf32>,
               col %f = %rotate : tensor<?xf32>) outs(%out : tensor<?x?xbf16>) {
    %y = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0_, %c1) = %c, (%s0, %s1) = %s, (%f0, %f1) = %f
        : f32, f32, f32, f32 -> f32 {
      %a0 = arith.mulf %lo, %c0_ : f32
      %b0 = arith.mulf %hi, %s0 : f32
      %r0 = arith.subf %a0, %b0 : f32
      %a1 = arith.mulf %hi, %c1 : f32
      %b1 = arith.mulf %lo, %s1 : f32
      %r1 = arith.addf %a1, %b1 : f32
      %half = arith.constant 0.5 : f32
      %on = arith.cmpf ogt, %f0, %half : f32
      %y0 = arith.select %on, %r0, %lo : f32
      %y1 = arith.select %on, %r1, %hi : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %yb = arith.truncf %y : f32 to bf16
    coda.yield %yb : bf16
  }
  return %qkv : tensor<?x?xbf16>
}
