// The fused Q/K/V projection with rotary embeddings (rotate_half, head dim
// 128) on its first `rotated_heads` heads (Q and K, stacked before V);
// cos / sin are tokens x 128 bf16 tables read per head. With --derive-backward: the
// adjoint GEMM applies the transposed rotation to dY in its epilogue (dAcc),
// then dX and dW. The variant head64 is the same program for heads of 64
// (tables of 64 columns, pairs 32 apart; scripts/program-variant).
// coda-variant: head64 s/x128xbf16/x64xbf16/g; s/stride 64/stride 32/g; s/%head_dim = arith.constant 128/%head_dim = arith.constant 64/
func.func @linear_qkv_rope(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>, %cos: tensor<?x128xbf16>,
                           %sin: tensor<?x128xbf16>, %rotated_heads: i64) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %out = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %qkv = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : tensor<?x128xbf16>, periodic %s = %sin : tensor<?x128xbf16>,
               scalar %nr = %rotated_heads : i64) outs(%out : tensor<?x?xbf16>) {
    %y = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0_, %c1) = %c, (%s0, %s1) = %s
        : f32, bf16, bf16 -> f32 {
      %cf0 = arith.extf %c0_ : bf16 to f32
      %cf1 = arith.extf %c1 : bf16 to f32
      %sf0 = arith.extf %s0 : bf16 to f32
      %sf1 = arith.extf %s1 : bf16 to f32
      %a0 = arith.mulf %lo, %cf0 : f32
      %b0 = arith.mulf %hi, %sf0 : f32
      %r0 = arith.subf %a0, %b0 : f32
      %a1 = arith.mulf %hi, %cf1 : f32
      %b1 = arith.mulf %lo, %sf1 : f32
      %r1 = arith.addf %a1, %b1 : f32
      coda.yield %r0, %r1 : f32, f32
    }
    %j = coda.col_index
    // Compared per head, not per column: the head index is the same for
    // all of a thread's columns in a 128-column half of the tile, so the
    // comparison is made once for them.
    %head_dim = arith.constant 128 : index
    %head = arith.divui %j, %head_dim : index
    %head64 = arith.index_cast %head : index to i64
    %on = arith.cmpi ult, %head64, %nr : i64
    %z = arith.select %on, %y, %acc : f32
    %yb = arith.truncf %z : f32 to bf16
    coda.yield %yb : bf16
  }
  return %qkv : tensor<?x?xbf16>
}

// With a bias on the projection (Qwen2's Q/K/V): y = R(x W^T + b); the
// derivation reduces b's gradient as column partials in the adjoint.
func.func @linear_qkv_rope_bias(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>, %b: tensor<?xbf16>,
                                %cos: tensor<?x128xbf16>, %sin: tensor<?x128xbf16>,
                                %rotated_heads: i64) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %out = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %qkv = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, col %bv = %b : tensor<?xbf16>, periodic %c = %cos : tensor<?x128xbf16>,
               periodic %s = %sin : tensor<?x128xbf16>,
               scalar %nr = %rotated_heads : i64) outs(%out : tensor<?x?xbf16>) {
    %bf = arith.extf %bv : bf16 to f32
    %a = arith.addf %acc, %bf : f32
    %y = coda.pair_map stride 64 (%lo, %hi) = %a, (%c0_, %c1) = %c, (%s0, %s1) = %s
        : f32, bf16, bf16 -> f32 {
      %cf0 = arith.extf %c0_ : bf16 to f32
      %cf1 = arith.extf %c1 : bf16 to f32
      %sf0 = arith.extf %s0 : bf16 to f32
      %sf1 = arith.extf %s1 : bf16 to f32
      %a0 = arith.mulf %lo, %cf0 : f32
      %b0 = arith.mulf %hi, %sf0 : f32
      %r0 = arith.subf %a0, %b0 : f32
      %a1 = arith.mulf %hi, %cf1 : f32
      %b1 = arith.mulf %lo, %sf1 : f32
      %r1 = arith.addf %a1, %b1 : f32
      coda.yield %r0, %r1 : f32, f32
    }
    %j = coda.col_index
    %head_dim = arith.constant 128 : index
    %head = arith.divui %j, %head_dim : index
    %head64 = arith.index_cast %head : index to i64
    %on = arith.cmpi ult, %head64, %nr : i64
    %z = arith.select %on, %y, %a : f32
    %yb = arith.truncf %z : f32 to bf16
    coda.yield %yb : bf16
  }
  return %qkv : tensor<?x?xbf16>
}
