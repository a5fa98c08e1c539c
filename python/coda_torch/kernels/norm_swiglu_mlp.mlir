// A Llama MLP block with its RMSNorm deferred into gate/up:
// z = x + swiglu(rs (x W_gu^T)) W_d^T, and the row sums of squares of z for
// the next norm. x is the un-normalized residual stream, rs its rows' norm
// scale rsqrt(mean(x^2) + eps), gamma folded into W_gu (rows interleave
// gate and up). The forward keeps h and the gate and up accumulators
// (before the row scale) for the backward, which recomputes no GEMM.
//
// The backward is written here: rs's gradient is reduced from the input
// side, as in linear_norm_qkv_rope.mlir. With dAcc the gradient of the
// gate/up accumulator (rs times that of rs acc),
//   drs[m] = (1 / rs[m]) sum_n dAcc[m, n] acc[m, n]
//          = (1 / rs[m]) sum_k x[m, k] (dAcc W_gu)[m, k],
// row partials of x * (dAcc W_gu) in the dX GEMM's epilogue (the caller
// divides their sums by rs), so that the GEMM producing dAcc reduces
// nothing and runs ping-pong, its epilogue (the SwiGLU derivative, two
// tile inputs, the row scale, dAcc interleaved) under the other
// consumer's K loop: beside the row partials ping-pong spilled 360 bytes
// (ptxas -v) and the derivation's backward ran warp-specialized. The
// weight gradient with gamma's is norm_weight_grad.mlir.
// The exponential and division are approximate (fastmath afn, arcp), as in
// swiglu_mlp.mlir.
// coda-derive-backward: no
func.func @norm_swiglu_mlp(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>, %wgu: tensor<?x?xbf16>,
                           %wd: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %rows = tensor.dim %wgu, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %wd, %c0 : tensor<?x?xbf16>
  %features = arith.divui %rows, %c2 : index
  %hE = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %gE = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %uE = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %h:3 = coda.gemm %x, %wgu transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %rs : tensor<?xf32>) outs(%hE, %gE, %uE : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>)
      attributes {coda.role = "forward:gemm0"} {
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
    %gs = coda.pair_contract (%ga, %ua) = %acc : f32 -> !coda.pair<bf16> {
      %gb = arith.truncf %ga : f32 to bf16
      coda.yield %gb : bf16
    }
    %us = coda.pair_contract (%ga, %ua) = %acc : f32 -> !coda.pair<bf16> {
      %ub = arith.truncf %ua : f32 to bf16
      coda.yield %ub : bf16
    }
    coda.yield %p, %gs, %us : !coda.pair<bf16>, !coda.pair<bf16>, !coda.pair<bf16>
  }
  %parts = arith.ceildivui %hidden, %c128 : index
  %zE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %pE = tensor.empty(%tokens, %parts) : tensor<?x?xf32>
  %sE = tensor.empty(%tokens) : tensor<?xf32>
  %z, %pz = coda.gemm %h#0, %wd transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %xv = %x : tensor<?x?xbf16>) outs(%zE, %pE : tensor<?x?xbf16>, tensor<?x?xf32>)
      attributes {coda.role = "forward:gemm1"} {
    %xf = arith.extf %xv : bf16 to f32
    %v = arith.addf %acc, %xf : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 128 : f32
    %vb = arith.truncf %v : f32 to bf16
    coda.yield %vb, %part : bf16, !coda.partial<f32>
  }
  %ss = coda.reduce_partials sum row %pz : tensor<?x?xf32> outs(%sE : tensor<?xf32>)
      {coda.role = "forward:finish0"}
  return %z, %ss, %h#0, %h#1, %h#2 : tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>
}

// The backward from dz and d(sum of squares), with the forward's h, gate
// and up accumulators g, u, and z: dAcc_down = dz + 2 z dss (an epilogue
// reading no product); dAcc = the SwiGLU and row-scale derivatives of
// dAcc_down W_d, interleaved (dgate at 2j, dup at 2j + 1); dx = dAcc W_gu +
// dAcc_down with the row partials of x * (dAcc W_gu); dW_d = dAcc_down^T h.
// Returns dx, the row sums whose quotient by rs is drs, dAcc (for the
// weight gradient of W_gu) and dW_d.
func.func @norm_swiglu_mlp_backward(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>,
                                    %wgu: tensor<?x?xbf16>, %wd: tensor<?x?xbf16>,
                                    %h: tensor<?x?xbf16>, %g: tensor<?x?xbf16>,
                                    %u: tensor<?x?xbf16>, %z: tensor<?x?xbf16>,
                                    %dz: tensor<?x?xbf16>, %dss: tensor<?xf32>)
    -> (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %x, %c1 : tensor<?x?xbf16>
  %features = tensor.dim %wd, %c1 : tensor<?x?xbf16>
  %rows = arith.muli %features, %c2 : index
  %ddE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %ddown = coda.gemm %h, %wd transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %zv = %z : tensor<?x?xbf16>, row %s = %dss : tensor<?xf32>,
               tile %dv = %dz : tensor<?x?xbf16>)
      outs(%ddE : tensor<?x?xbf16>) attributes {coda.role = "adjoint:gemm1"} {
    %zf = arith.extf %zv : bf16 to f32
    %df = arith.extf %dv : bf16 to f32
    %t = arith.mulf %s, %zf : f32
    %a = arith.addf %df, %t : f32
    %b = arith.addf %a, %t : f32
    %bb = arith.truncf %b : f32 to bf16
    coda.yield %bb : bf16
  }
  %daE = tensor.empty(%tokens, %rows) : tensor<?x?xbf16>
  %dacc = coda.gemm %ddown, %wd : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %gv = %g : tensor<?x?xbf16>, tile %uv = %u : tensor<?x?xbf16>,
               row %r = %rs : tensor<?xf32>)
      outs(%daE : tensor<?x?xbf16>)
      attributes {coda.role = "adjoint:gemm0", coda.gemm_config = #coda.gemm_config<
                  schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %gf = arith.extf %gv : bf16 to f32
    %uf = arith.extf %uv : bf16 to f32
    %gs = arith.mulf %gf, %r : f32
    %us = arith.mulf %uf, %r : f32
    %ng = arith.negf %gs : f32
    %e = math.exp %ng fastmath<afn> : f32
    %den = arith.addf %e, %one : f32
    %silu = arith.divf %gs, %den fastmath<arcp,afn> : f32
    // dh u / (1 + e) + dh u g e / (1 + e)^2, the derivative of silu(g) u in
    // g (as the derivation writes it, the product with e dropped where it
    // vanishes, so that an overflowing e gives 0, not NaN), and dh silu(g)
    // in u.
    %dhu = arith.mulf %acc, %us : f32
    %dup = arith.mulf %acc, %silu : f32
    %a = arith.divf %dhu, %den fastmath<afn> : f32
    %b = arith.mulf %dhu, %silu fastmath<afn> : f32
    %c = arith.divf %b, %den fastmath<afn> : f32
    %nc = arith.negf %c fastmath<afn> : f32
    %vanishes = arith.cmpf oeq, %nc, %zero : f32
    %ce = arith.mulf %nc, %e fastmath<afn> : f32
    %cs = arith.select %vanishes, %zero, %ce : f32
    %ncs = arith.negf %cs : f32
    %dg = arith.addf %a, %ncs : f32
    %dgr = arith.mulf %dg, %r : f32
    %dur = arith.mulf %dup, %r : f32
    %dgb = arith.truncf %dgr : f32 to bf16
    %dub = arith.truncf %dur : f32 to bf16
    %i = coda.interleave %dgb, %dub : bf16
    coda.yield %i : !coda.interleaved<bf16>
  }
  %parts = arith.ceildivui %hidden, %c128 : index
  %dxE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %pE = tensor.empty(%tokens, %parts) : tensor<?x?xf32>
  %dx, %pd = coda.gemm %dacc, %wgu : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, tile %dd = %ddown : tensor<?x?xbf16>, tile %xv = %x : tensor<?x?xbf16>)
      outs(%dxE, %pE : tensor<?x?xbf16>, tensor<?x?xf32>) attributes {coda.role = "grad:gemm0.lhs"} {
    %xf = arith.extf %xv : bf16 to f32
    %p = arith.mulf %acc, %xf : f32
    %part = coda.row_reduce sum %p tile 128 : f32
    %ddf = arith.extf %dd : bf16 to f32
    %v = arith.addf %acc, %ddf : f32
    %vb = arith.truncf %v : f32 to bf16
    coda.yield %vb, %part : bf16, !coda.partial<f32>
  }
  %sE = tensor.empty(%tokens) : tensor<?xf32>
  %sums = coda.reduce_partials sum row %pd : tensor<?x?xf32> outs(%sE : tensor<?xf32>)
      {coda.role = "grad:gemm0.input0"}
  %dwdE = tensor.empty(%hidden, %features) : tensor<?x?xbf16>
  %dwd = coda.gemm %ddown, %h transpose_a : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%dwdE : tensor<?x?xbf16>) attributes {coda.role = "grad:gemm1.rhs"} {
    %ab = arith.truncf %acc : f32 to bf16
    coda.yield %ab : bf16
  }
  return %dx, %sums, %dacc, %dwd : tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>
}
