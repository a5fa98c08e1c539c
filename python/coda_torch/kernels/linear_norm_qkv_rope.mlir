// The fused Q/K/V projection of a decoder layer whose input RMSNorm is
// deferred into it: x is the un-normalized residual stream, rs its rows'
// norm scale rsqrt(mean(x^2) + eps) (from the sums of squares the previous
// GEMM emitted), and gamma is folded into w. y = rs * (x W^T), rotated
// (rotate_half, heads of 128) on the first `rotated_heads` heads (Q and K,
// stacked before V); cos / sin are tokens x 128 bf16 tables read per head.
//
// The backward is written here: rs's gradient is reduced from the input
// side, so that the forward keeps nothing but its output. With
// g = R^T dY (R the rotation), dAcc = rs g and
//   drs[m] = sum_n g[m, n] (x W^T)[m, n] = sum_k x[m, k] (g W)[m, k]
//          = (1 / rs[m]) sum_k x[m, k] dx[m, k],   dx = dAcc W,
// so the dX GEMM reads x as a tile input and reduces x * dx as row
// partials (the caller divides their sums by rs). The derivation would
// reduce sum_n g acc beside the adjoint instead, from the accumulator
// saved by the forward (a second T x N output) or recomputed (a third
// GEMM). The weight gradient with gamma's is norm_weight_grad.mlir.
// The variant head64 is the same program for heads of 64 (tables of 64
// columns, pairs 32 apart; scripts/program-variant).
// coda-derive-backward: no
// coda-variant: head64 s/x128xbf16/x64xbf16/g; s/stride 64/stride 32/g; s/%head_dim = arith.constant 128/%head_dim = arith.constant 64/
func.func @linear_norm_qkv_rope(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>, %w: tensor<?x?xbf16>,
                                %cos: tensor<?x128xbf16>, %sin: tensor<?x128xbf16>,
                                %rotated_heads: i64) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %out = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %qkv = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %rs : tensor<?xf32>, periodic %c = %cos : tensor<?x128xbf16>,
               periodic %s = %sin : tensor<?x128xbf16>, scalar %nr = %rotated_heads : i64)
      outs(%out : tensor<?x?xbf16>) attributes {coda.role = "forward:gemm0"} {
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
    // Compared per head, not per column (see linear_qkv_rope.mlir).
    %head_dim = arith.constant 128 : index
    %head = arith.divui %j, %head_dim : index
    %head64 = arith.index_cast %head : index to i64
    %on = arith.cmpi ult, %head64, %nr : i64
    %z = arith.select %on, %y, %acc : f32
    %zs = arith.mulf %z, %r : f32
    %yb = arith.truncf %zs : f32 to bf16
    coda.yield %yb : bf16
  }
  return %qkv : tensor<?x?xbf16>
}

// The backward from dY: dAcc = rs R^T(dY) (an epilogue reading no product:
// a memory-bound pass), then dx = dAcc W with the row partials of x * dx.
// Returns dAcc (for the weight gradient), dx and the row sums whose
// quotient by rs is drs. The dX GEMM runs cooperative without a cluster:
// in clusters of two (the selector's choice for a tile input and row
// partials) its epilogue spills 8 bytes (ptxas -v), with none.
func.func @linear_norm_qkv_rope_backward(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>,
                                         %w: tensor<?x?xbf16>, %cos: tensor<?x128xbf16>,
                                         %sin: tensor<?x128xbf16>, %rotated_heads: i64,
                                         %dy: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %x, %c1 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %daccE = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %dacc = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %rs : tensor<?xf32>, periodic %c = %cos : tensor<?x128xbf16>,
               periodic %s = %sin : tensor<?x128xbf16>, scalar %nr = %rotated_heads : i64,
               tile %g = %dy : tensor<?x?xbf16>)
      outs(%daccE : tensor<?x?xbf16>) attributes {coda.role = "adjoint:gemm0"} {
    %gf = arith.extf %g : bf16 to f32
    // R^T on a pair: (d0 c0 + d1 s1, d1 c1 - d0 s0).
    %t = coda.pair_map stride 64 (%d0, %d1) = %gf, (%c0_, %c1_) = %c, (%s0, %s1) = %s
        : f32, bf16, bf16 -> f32 {
      %cf0 = arith.extf %c0_ : bf16 to f32
      %cf1 = arith.extf %c1_ : bf16 to f32
      %sf0 = arith.extf %s0 : bf16 to f32
      %sf1 = arith.extf %s1 : bf16 to f32
      %a0 = arith.mulf %d0, %cf0 : f32
      %b0 = arith.mulf %d1, %sf1 : f32
      %r0 = arith.addf %a0, %b0 : f32
      %a1 = arith.mulf %d1, %cf1 : f32
      %b1 = arith.mulf %d0, %sf0 : f32
      %r1 = arith.subf %a1, %b1 : f32
      coda.yield %r0, %r1 : f32, f32
    }
    %j = coda.col_index
    %head_dim = arith.constant 128 : index
    %head = arith.divui %j, %head_dim : index
    %head64 = arith.index_cast %head : index to i64
    %on = arith.cmpi ult, %head64, %nr : i64
    %u = arith.select %on, %t, %gf : f32
    %us = arith.mulf %u, %r : f32
    %ub = arith.truncf %us : f32 to bf16
    coda.yield %ub : bf16
  }
  %parts = arith.ceildivui %hidden, %c128 : index
  %dxE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %pE = tensor.empty(%tokens, %parts) : tensor<?x?xf32>
  %dx, %pd = coda.gemm %dacc, %w : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %xv = %x : tensor<?x?xbf16>)
      outs(%dxE, %pE : tensor<?x?xbf16>, tensor<?x?xf32>)
      attributes {coda.role = "grad:gemm0.lhs", coda.gemm_config = #coda.gemm_config<
                  schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %xf = arith.extf %xv : bf16 to f32
    %p = arith.mulf %acc, %xf : f32
    %part = coda.row_reduce sum %p tile 128 : f32
    %dxb = arith.truncf %acc : f32 to bf16
    coda.yield %dxb, %part : bf16, !coda.partial<f32>
  }
  %sE = tensor.empty(%tokens) : tensor<?xf32>
  %sums = coda.reduce_partials sum row %pd : tensor<?x?xf32> outs(%sE : tensor<?xf32>)
      {coda.role = "grad:gemm0.input0"}
  return %dacc, %dx, %sums : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xf32>
}

// With a bias on the projection (Qwen2's Q/K/V): y = R(rs (x W^T) + b). Its
// backward is the one above with b's gradient, db = sum_m g (g = R^T dY, the
// gradient before the row scale), reduced as column partials in the adjoint.
func.func @linear_norm_qkv_rope_bias(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>,
                                     %w: tensor<?x?xbf16>, %b: tensor<?xbf16>,
                                     %cos: tensor<?x128xbf16>, %sin: tensor<?x128xbf16>,
                                     %rotated_heads: i64) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %out = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %qkv = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %rs : tensor<?xf32>, col %bv = %b : tensor<?xbf16>,
               periodic %c = %cos : tensor<?x128xbf16>, periodic %s = %sin : tensor<?x128xbf16>,
               scalar %nr = %rotated_heads : i64)
      outs(%out : tensor<?x?xbf16>) attributes {coda.role = "forward:gemm0"} {
    %scaled = arith.mulf %acc, %r : f32
    %bf = arith.extf %bv : bf16 to f32
    %a = arith.addf %scaled, %bf : f32
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

// Returns dAcc, dx, the row sums whose quotient by rs is drs (as
// linear_norm_qkv_rope_backward) and db.
func.func @linear_norm_qkv_rope_bias_backward(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>,
                                              %w: tensor<?x?xbf16>, %cos: tensor<?x128xbf16>,
                                              %sin: tensor<?x128xbf16>, %rotated_heads: i64,
                                              %dy: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %x, %c1 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %blocks = arith.ceildivui %tokens, %c128 : index
  %daccE = tensor.empty(%tokens, %n) : tensor<?x?xbf16>
  %cpE = tensor.empty(%blocks, %n) : tensor<?x?xf32>
  %dacc, %cp = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %rs : tensor<?xf32>, periodic %c = %cos : tensor<?x128xbf16>,
               periodic %s = %sin : tensor<?x128xbf16>, scalar %nr = %rotated_heads : i64,
               tile %g = %dy : tensor<?x?xbf16>)
      outs(%daccE, %cpE : tensor<?x?xbf16>, tensor<?x?xf32>)
      attributes {coda.role = "adjoint:gemm0"} {
    %gf = arith.extf %g : bf16 to f32
    %t = coda.pair_map stride 64 (%d0, %d1) = %gf, (%c0_, %c1_) = %c, (%s0, %s1) = %s
        : f32, bf16, bf16 -> f32 {
      %cf0 = arith.extf %c0_ : bf16 to f32
      %cf1 = arith.extf %c1_ : bf16 to f32
      %sf0 = arith.extf %s0 : bf16 to f32
      %sf1 = arith.extf %s1 : bf16 to f32
      %a0 = arith.mulf %d0, %cf0 : f32
      %b0 = arith.mulf %d1, %sf1 : f32
      %r0 = arith.addf %a0, %b0 : f32
      %a1 = arith.mulf %d1, %cf1 : f32
      %b1 = arith.mulf %d0, %sf0 : f32
      %r1 = arith.subf %a1, %b1 : f32
      coda.yield %r0, %r1 : f32, f32
    }
    %j = coda.col_index
    %head_dim = arith.constant 128 : index
    %head = arith.divui %j, %head_dim : index
    %head64 = arith.index_cast %head : index to i64
    %on = arith.cmpi ult, %head64, %nr : i64
    %u = arith.select %on, %t, %gf : f32
    %part = coda.col_reduce sum %u tile 128 : f32
    %us = arith.mulf %u, %r : f32
    %ub = arith.truncf %us : f32 to bf16
    coda.yield %ub, %part : bf16, !coda.partial<f32>
  }
  %dbE = tensor.empty(%n) : tensor<?xf32>
  %db = coda.reduce_partials sum col %cp : tensor<?x?xf32> outs(%dbE : tensor<?xf32>)
      {coda.role = "grad:gemm0.input1"}
  %parts = arith.ceildivui %hidden, %c128 : index
  %dxE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %pE = tensor.empty(%tokens, %parts) : tensor<?x?xf32>
  %dx, %pd = coda.gemm %dacc, %w : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %xv = %x : tensor<?x?xbf16>)
      outs(%dxE, %pE : tensor<?x?xbf16>, tensor<?x?xf32>)
      attributes {coda.role = "grad:gemm0.lhs", coda.gemm_config = #coda.gemm_config<
                  schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %xf = arith.extf %xv : bf16 to f32
    %p = arith.mulf %acc, %xf : f32
    %part = coda.row_reduce sum %p tile 128 : f32
    %dxb = arith.truncf %acc : f32 to bf16
    coda.yield %dxb, %part : bf16, !coda.partial<f32>
  }
  %sE = tensor.empty(%tokens) : tensor<?xf32>
  %sums = coda.reduce_partials sum row %pd : tensor<?x?xf32> outs(%sE : tensor<?xf32>)
      {coda.role = "grad:gemm0.input0"}
  return %dacc, %dx, %sums, %db : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>
}
