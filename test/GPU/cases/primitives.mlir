// Kernels for the GPU correctness suite (test/GPU/test_kernels.py): every
// epilogue primitive, on dynamic shapes so that ragged M, N and K are tested.
// The suite compiles this file with coda-compile and checks every output
// against an fp32 PyTorch reference.

// Plain GEMM, rhs N x K (nn.Linear's weight), bf16 out.
func.func @plain_nt(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Plain GEMM, rhs K x N, f16 operands, f32 out.
func.func @plain_nn(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %y: memref<?x?xf32>) {
  coda.gemm %a, %b : memref<?x?xf16>, memref<?x?xf16>
      epilogue(%acc) outs(%y : memref<?x?xf32>) {
    coda.yield %acc : f32
  }
  return
}

// lhs stored K x M (transpose_a: a weight gradient X^T dY reads X as
// stored), rhs K x N, bf16 out.
func.func @plain_tn(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_a : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Both operands stored transposed, f16, f32 out.
func.func @plain_tt(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %y: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_a transpose_b : memref<?x?xf16>, memref<?x?xf16>
      epilogue(%acc) outs(%y : memref<?x?xf32>) {
    coda.yield %acc : f32
  }
  return
}

// Row, column, scalar and tile inputs; two tile outputs; row partial sums of
// squares (the next RMSNorm's statistic).
func.func @residual_norm(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %res: memref<?x?xbf16>,
                         %scale: memref<?xf32>, %bias: memref<?xf32>, %s: f32,
                         %h: memref<?x?xbf16>, %hf: memref<?x?xf32>, %ss: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %res : memref<?x?xbf16>, row %sv = %scale : memref<?xf32>,
               col %bv = %bias : memref<?xf32>, scalar %k = %s : f32)
      outs(%h, %hf, %ss : memref<?x?xbf16>, memref<?x?xf32>, memref<?x?xf32>) {
    %0 = arith.mulf %acc, %sv : f32
    %1 = arith.addf %0, %bv : f32
    %2 = arith.mulf %1, %k : f32
    %r = arith.extf %rv : bf16 to f32
    %x = arith.addf %2, %r : f32
    %sq = arith.mulf %x, %x : f32
    %p = coda.row_reduce sum %sq tile 128 : f32
    %xb = arith.truncf %x : f32 to bf16
    coda.yield %xb, %x, %p : bf16, f32, !coda.partial<f32>
  }
  return
}

// SwiGLU over interleaved gate/up columns with the deferred norm scale:
// silu(r g) * (r u) into an M x N/2 output.
func.func @swiglu(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %scale: memref<?xf32>,
                  %out: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %r = %scale : memref<?xf32>) outs(%out : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %r : f32
    %h = coda.pair_contract (%g, %u) = %x : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %d = arith.addf %one, %e : f32
      %sg = arith.divf %g, %d : f32
      %y = arith.mulf %sg, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %h : !coda.pair<bf16>
  }
  return
}

// RoPE in the rotate_half convention (head dim 128: pairs 64 apart) with
// per-position cos/sin tables (periodic along N).
func.func @rope(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x?xf32>,
                %sin: memref<?x?xf32>, %q: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x?xf32>, periodic %s = %sin : memref<?x?xf32>)
      outs(%q : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %s
        : f32, f32, f32 -> f32 {
      %a0 = arith.mulf %lo, %c0 : f32
      %b0 = arith.mulf %hi, %s0 : f32
      %y0 = arith.subf %a0, %b0 : f32
      %a1 = arith.mulf %hi, %c1 : f32
      %b1 = arith.mulf %lo, %s1 : f32
      %y1 = arith.addf %a1, %b1 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// RoPE's transposed rotation of a tile input, as a derived adjoint computes
// dAcc: the epilogue never reads the accumulator, so the kernel is the
// epilogue alone (no operand is loaded).
func.func @rope_adjoint(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x?xf32>,
                        %sin: memref<?x?xf32>, %dy: memref<?x?xbf16>, %dx: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x?xf32>, periodic %s = %sin : memref<?x?xf32>,
               tile %d = %dy : memref<?x?xbf16>)
      outs(%dx : memref<?x?xbf16>) {
    %dv = arith.extf %d : bf16 to f32
    %r = coda.pair_map stride 64 (%d0, %d1) = %dv, (%c0, %c1) = %c, (%s0, %s1) = %s
        : f32, f32, f32 -> f32 {
      %p = arith.mulf %d0, %c0 : f32
      %q = arith.mulf %d1, %s1 : f32
      %g0 = arith.addf %p, %q : f32
      %u = arith.mulf %d0, %s0 : f32
      %v = arith.mulf %d1, %c1 : f32
      %g1 = arith.subf %v, %u : f32
      coda.yield %g0, %g1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// The same with tables of static period 128: the rows' congruent columns
// share one read (cooperative under --select-config).
func.func @rope_static_period(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                               %cos: memref<?x128xf32>, %sin: memref<?x128xf32>,
                               %q: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xf32>, periodic %s = %sin : memref<?x128xf32>)
      outs(%q : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %s
        : f32, f32, f32 -> f32 {
      %a0 = arith.mulf %lo, %c0 : f32
      %b0 = arith.mulf %hi, %s0 : f32
      %y0 = arith.subf %a0, %b0 : f32
      %a1 = arith.mulf %hi, %c1 : f32
      %b1 = arith.mulf %lo, %s1 : f32
      %y1 = arith.addf %a1, %b1 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// Cross-entropy pieces: online log-sum-exp and max row partials, and the
// target logit picked by row_select (targets outside [0, N) keep the
// destination's value).
func.func @cross_entropy(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %tg: memref<?xi64>,
                         %lse: memref<?x?xf32>, %mx: memref<?x?xf32>, %pick: memref<?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %t = %tg : memref<?xi64>) outs(%lse, %mx, %pick : memref<?x?xf32>, memref<?x?xf32>, memref<?xf32>) {
    %l = coda.row_reduce logsumexp %acc tile 128 : f32
    %m = coda.row_reduce max %acc tile 128 : f32
    %p = coda.row_select %acc at %t : f32, i64
    coda.yield %l, %m, %p : !coda.partial<f32>, !coda.partial<f32>, !coda.row<f32>
  }
  return
}

// Positions (a causal mask), column partial sums (dgamma-like), interleaved
// pair_map (stride 1) and a bf16 column partial.
func.func @positions_colsum(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?x?xf32>,
                            %cs: memref<?x?xf32>, %cm: memref<?x?xbf16>) {
  coda.gemm %a, %b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%g, %cs, %cm : memref<?x?xf32>, memref<?x?xf32>, memref<?x?xbf16>) {
    %m = coda.row_index
    %n = coda.col_index
    %keep = arith.cmpi ule, %n, %m : index
    %zero = arith.constant 0.0 : f32
    %x = arith.select %keep, %acc, %zero : f32
    %sw = coda.pair_map (%e, %o) = %x : f32 -> f32 {
      %d = arith.subf %e, %o : f32
      coda.yield %o, %d : f32, f32
    }
    %c = coda.col_reduce sum %sw tile 128 : f32
    %xb = arith.truncf %sw : f32 to bf16
    %cmx = coda.col_reduce max %xb tile 128 : bf16
    coda.yield %sw, %c, %cmx : f32, !coda.partial<f32>, !coda.partial<bf16>
  }
  return
}

// A row reduction over 256 columns sets a 64 x 256 tile.
func.func @wide_tile(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>,
                     %rs: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y, %rs : memref<?x?xbf16>, memref<?x?xf32>) {
    %s = coda.row_reduce sum %acc tile 256 : f32
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t, %s : bf16, !coda.partial<f32>
  }
  return
}

// A column reduction over 64 rows sets a 64 x 128 tile.
func.func @short_tile(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cs: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%cs : memref<?x?xf32>) {
    %c = coda.col_reduce sum %acc tile 64 : f32
    coda.yield %c : !coda.partial<f32>
  }
  return
}

// The adjoint GEMM that --coda-derive-backward derives for @swiglu (with a
// bf16 upstream gradient): dy read at each column pair (access form `pair`),
// the activation recomputed, dgate / dup written interleaved as dAcc, and the
// row scale's gradient as row partials.
func.func @swiglu_backward_adjoint(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %scale: memref<?xf32>,
                                   %dy: memref<?x?xbf16>, %dacc: memref<?x?xbf16>, %dscale: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %r = %scale : memref<?xf32>, pair %g = %dy : memref<?x?xbf16>)
      outs(%dacc, %dscale : memref<?x?xbf16>, memref<?x?xf32>) {
    %x = arith.mulf %acc, %r : f32
    %d = coda.pair_map (%x0, %x1) = %x, (%g0, %g1) = %g : f32, bf16 -> f32 {
      %one = arith.constant 1.000000e+00 : f32
      %n = arith.negf %x0 : f32
      %e = math.exp %n : f32
      %den = arith.addf %e, %one : f32
      %silu = arith.divf %x0, %den : f32
      %gf = arith.extf %g0 : bf16 to f32
      %gu = arith.mulf %gf, %x1 : f32
      %dup = arith.mulf %gf, %silu : f32
      // silu's closed derivative s (1 + x (1 - s)), s = 1 / den.
      %s = arith.divf %one, %den : f32
      %c = arith.subf %one, %s : f32
      %t = math.fma %x0, %c, %one : f32
      %slope = arith.mulf %t, %s : f32
      %dgate = arith.mulf %gu, %slope : f32
      coda.yield %dgate, %dup : f32, f32
    }
    %da = arith.mulf %d, %r : f32
    %dr = arith.mulf %d, %acc : f32
    %dab = arith.truncf %da : f32 to bf16
    %p = coda.row_reduce sum %dr tile 128 : f32
    coda.yield %dab, %p : bf16, !coda.partial<f32>
  }
  return
}

// Group statistics: a 1 x 128 FP8 (e4m3) quantization with one scale per
// group (amax / 448, floored at 1e-12 / 448), the f32 values it quantized,
// a per-head RMSNorm over 64-column groups, and each 64-column group's
// first maximum of the values rounded down (ties), as an i64 per group.
func.func @group_statistics(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
                            %s: memref<?x?xf32>, %y: memref<?x?xf32>, %nrm: memref<?x?xbf16>,
                            %am: memref<?x?xi64>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s, %y, %nrm, %am : memref<?x?xf8E4M3FN>, memref<?x?xf32>, memref<?x?xf32>,
                                                  memref<?x?xbf16>, memref<?x?xi64>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %eps = arith.constant 1.0e-12 : f32
    %floor = arith.maximumf %amax, %eps : f32
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %scale = arith.divf %floor, %fmax : f32
    %x = arith.divf %acc, %scale : f32
    %lo = arith.maximumf %x, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %sv = coda.group_value %scale row group 128 : f32
    %sq = arith.mulf %acc, %acc : f32
    %ss = coda.group_reduce sum %sq row group 64 : f32 -> f32
    %width = arith.constant 64.0 : f32
    %neps = arith.constant 1.0e-6 : f32
    %ms = arith.divf %ss, %width : f32
    %mse = arith.addf %ms, %neps : f32
    %r = math.rsqrt %mse : f32
    %n = arith.mulf %acc, %r : f32
    %nb = arith.truncf %n : f32 to bf16
    %fl = math.floor %acc : f32
    %first = coda.group_reduce argmax %fl row group 64 : f32 -> index
    %fi = arith.index_cast %first : index to i64
    %fv = coda.group_value %fi row group 64 : i64
    coda.yield %code, %sv, %acc, %nb, %fv : f8E4M3FN, !coda.grouped<f32>, f32, bf16, !coda.grouped<i64>
  }
  return
}

// The 1 x 128 FP8 quantization alone, as the GEMM that hands the next GEMM
// its operand writes it (one statistic: the selection's ping-pong kernel,
// codes leaving through TMA stores).
func.func @group_quantize(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
                          %s: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s : memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %eps = arith.constant 1.0e-12 : f32
    %floor = arith.maximumf %amax, %eps : f32
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %scale = arith.divf %floor, %fmax : f32
    %x = arith.divf %acc, %scale : f32
    %lo = arith.maximumf %x, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %sv = coda.group_value %scale row group 128 : f32
    coda.yield %code, %sv : f8E4M3FN, !coda.grouped<f32>
  }
  return
}
