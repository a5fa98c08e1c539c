// RUN: coda-opt %s --coda-select-gemm-config | FileCheck %s

// The configuration each kind of GEMM gets: plain and sum-partial epilogues
// run cooperative in clusters of two at every shape, a column input too;
// the log-sum-exp and adjacent pairs ping-pong up to K = 4096 and
// cooperative beyond (an array dispatched at launch where K is dynamic, one
// configuration where it is static); f32 tile outputs beside
// inputs or partials, a pair input alone and more than two row inputs
// ping-pong; RoPE's strided pairs cooperative where its tables' period is
// static and no column input is read (ping-pong beside one), else the
// warp-specialized kernel, as are two tile inputs and a
// pair input beside others; two tile inputs beside an interleaved output
// (SwiGLU's saved backward) ping-pong up to K = 4096 and warp-specialized
// beyond; row and column inputs together cooperative without a cluster;
// 8-bit operands ping-pong up to K = 4096; a pair stride the fragment
// layout cannot serve warp-specialized; an epilogue reading no product
// cooperative without a cluster, or ping-pong where that spills; a weight
// gradient (lhs stored K x M) with a plain epilogue or column partials is
// dispatched by waves between 128 x 256 tiles (cooperative in clusters of
// two, or warp-specialized beside column partials) and cooperative 128 x 128
// tiles where M or N is dynamic, and takes the one whose waves weigh less
// where both are static; one group statistic whose groups fit 128 columns
// ping-pong, others warp-specialized; an FP8 tile output beside max
// partials cooperative without a cluster beyond K = 4096; other column
// partials and pinned GEMMs keep theirs.

// CHECK-LABEL: func.func @plain
//       CHECK:   coda.gemm
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>}
func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// CHECK-LABEL: func.func @short_k
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>}
func.func @short_k(%a: memref<16384x2048xbf16>, %b: memref<2048x2048xbf16>, %y: memref<16384x2048xbf16>) {
  coda.gemm %a, %b transpose_b : memref<16384x2048xbf16>, memref<2048x2048xbf16>
      epilogue(%acc) outs(%y : memref<16384x2048xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// CHECK-LABEL: func.func @residual_norm
//       CHECK:   schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2
func.func @residual_norm(%a: memref<16384x2048xbf16>, %b: memref<2048x2048xbf16>,
                         %r: memref<16384x2048xbf16>, %h: memref<16384x2048xbf16>,
                         %p: memref<16384x16xf32>) {
  coda.gemm %a, %b transpose_b : memref<16384x2048xbf16>, memref<2048x2048xbf16>
      epilogue(%acc, tile %res = %r : memref<16384x2048xbf16>)
      outs(%h, %p : memref<16384x2048xbf16>, memref<16384x16xf32>) {
    %rf = arith.extf %res : bf16 to f32
    %x = arith.addf %acc, %rf : f32
    %sq = arith.mulf %x, %x : f32
    %s = coda.row_reduce sum %sq tile 128 : f32
    %xb = arith.truncf %x : f32 to bf16
    coda.yield %xb, %s : bf16, !coda.partial<f32>
  }
  return
}

// CHECK-LABEL: func.func @logsumexp
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>, #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>]}
func.func @logsumexp(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %l: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%l : memref<?x?xf32>) {
    %s = coda.row_reduce logsumexp %acc tile 128 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}

// CHECK-LABEL: func.func @logsumexp_long_k
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>}
func.func @logsumexp_long_k(%a: memref<?x8192xbf16>, %b: memref<?x8192xbf16>, %l: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x8192xbf16>, memref<?x8192xbf16>
      epilogue(%acc) outs(%l : memref<?x?xf32>) {
    %s = coda.row_reduce logsumexp %acc tile 128 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}

// Log-sum-exp partials beside the accumulator kept as a tile output (an
// LM head saving its logits for the backward): ping-pong up to K = 4096,
// beyond it 128 x 128 cooperative tiles without a cluster, whose registers
// hold both (in 128 x 256 tiles the cooperative kernel spills).
// CHECK-LABEL: func.func @logsumexp_saving_logits
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>, #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4>]}
func.func @logsumexp_saving_logits(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %l: memref<?x?xf32>,
                                   %z: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%l, %z : memref<?x?xf32>, memref<?x?xbf16>) {
    %s = coda.row_reduce logsumexp %acc tile 128 : f32
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %s, %t : !coda.partial<f32>, bf16
  }
  return
}

// CHECK-LABEL: func.func @bias
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>}
func.func @bias(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %c: memref<?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %cv = %c : memref<?xf32>) outs(%y : memref<?x?xbf16>) {
    %x = arith.addf %acc, %cv : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// CHECK-LABEL: func.func @rope
//       CHECK:   schedule = warp_specialized, tile_m = 128, tile_n = 256
func.func @rope(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x?xf32>,
                %q: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x?xf32>)
      outs(%q : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0, %c1) = %c
        : f32, f32 -> f32 {
      %y0 = arith.mulf %lo, %c0 : f32
      %y1 = arith.mulf %hi, %c1 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// Tables of a static period (head dim 128): cooperative, whose rows share
// the reads of congruent columns.
// CHECK-LABEL: func.func @rope_static_period
//       CHECK:   schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2
func.func @rope_static_period(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                              %cos: memref<?x128xf32>, %q: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xf32>)
      outs(%q : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0, %c1) = %c
        : f32, f32 -> f32 {
      %y0 = arith.mulf %lo, %c0 : f32
      %y1 = arith.mulf %hi, %c1 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// An f32 tile output beside an input or partials, or a pair input alone:
// ping-pong (the cooperative kernel spills with them). An f32 output alone:
// cooperative.
// CHECK-LABEL: func.func @f32_output_with_input
//       CHECK:   schedule = ping_pong, tile_m = 128, tile_n = 128
func.func @f32_output_with_input(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                                 %r: memref<?x?xbf16>, %y: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %r : memref<?x?xbf16>) outs(%y : memref<?x?xf32>) {
    %rf = arith.extf %rv : bf16 to f32
    %x = arith.addf %acc, %rf : f32
    coda.yield %x : f32
  }
  return
}

// CHECK-LABEL: func.func @f32_output
//       CHECK:   schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2
func.func @f32_output(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xf32>) {
    coda.yield %acc : f32
  }
  return
}

// CHECK-LABEL: func.func @pair_input
//       CHECK:   schedule = ping_pong, tile_m = 128, tile_n = 128
func.func @pair_input(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?x?xbf16>,
                      %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, pair %gv = %g : memref<?x?xbf16>) outs(%y : memref<?x?xbf16>) {
    %x = coda.pair_map (%x0, %x1) = %acc, (%g0, %g1) = %gv : f32, bf16 -> f32 {
      %gf = arith.extf %g0 : bf16 to f32
      %y0 = arith.mulf %x0, %gf : f32
      %y1 = arith.mulf %x1, %gf : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %xb = arith.truncf %x : f32 to bf16
    coda.yield %xb : bf16
  }
  return
}

// A pair input beside another input, or two tile inputs: the
// warp-specialized kernel (both register schedules spill with them).
// CHECK-LABEL: func.func @pair_and_row_inputs
//       CHECK:   schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>
func.func @pair_and_row_inputs(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?x?xbf16>,
                               %s: memref<?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, pair %gv = %g : memref<?x?xbf16>, row %sv = %s : memref<?xf32>)
      outs(%y : memref<?x?xbf16>) {
    %x = coda.pair_map (%x0, %x1) = %acc, (%g0, %g1) = %gv : f32, bf16 -> f32 {
      %gf = arith.extf %g0 : bf16 to f32
      %y0 = arith.mulf %x0, %gf : f32
      %y1 = arith.mulf %x1, %gf : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %xs = arith.mulf %x, %sv : f32
    %xb = arith.truncf %xs : f32 to bf16
    coda.yield %xb : bf16
  }
  return
}

// CHECK-LABEL: func.func @two_tile_inputs
//       CHECK:   schedule = warp_specialized, tile_m = 128, tile_n = 256
func.func @two_tile_inputs(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %r: memref<?x?xbf16>,
                           %t: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %r : memref<?x?xbf16>, tile %tv = %t : memref<?x?xbf16>)
      outs(%y : memref<?x?xbf16>) {
    %rf = arith.extf %rv : bf16 to f32
    %tf = arith.extf %tv : bf16 to f32
    %x = arith.addf %acc, %rf : f32
    %z = arith.mulf %x, %tf : f32
    %zb = arith.truncf %z : f32 to bf16
    coda.yield %zb : bf16
  }
  return
}

// The same inputs in an epilogue that reads no product (an adjoint from
// saved values, the kernel its epilogue alone): cooperative without a
// cluster, whose register epilogue streams them faster.
// CHECK-LABEL: func.func @two_tile_inputs_no_product
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>}
func.func @two_tile_inputs_no_product(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                                      %r: memref<?x?xbf16>, %t: memref<?x?xbf16>,
                                      %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %r : memref<?x?xbf16>, tile %tv = %t : memref<?x?xbf16>)
      outs(%y : memref<?x?xbf16>) {
    %rf = arith.extf %rv : bf16 to f32
    %tf = arith.extf %tv : bf16 to f32
    %z = arith.mulf %rf, %tf : f32
    %zb = arith.truncf %z : f32 to bf16
    coda.yield %zb : bf16
  }
  return
}

// RoPE's strided pairs beside two tile inputs reading no product (the
// deferred norm's Q/K/V adjoint): ping-pong, where the cooperative
// epilogue spills.
// CHECK-LABEL: func.func @rope_two_tile_inputs_no_product
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>}
func.func @rope_two_tile_inputs_no_product(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                                           %cos: memref<?x128xbf16>, %r: memref<?x?xbf16>,
                                           %t: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xbf16>, tile %rv = %r : memref<?x?xbf16>,
               tile %tv = %t : memref<?x?xbf16>)
      outs(%y : memref<?x?xbf16>) {
    %rf = arith.extf %rv : bf16 to f32
    %tf = arith.extf %tv : bf16 to f32
    %p = coda.pair_map stride 64 (%x0, %x1) = %rf, (%c0, %c1) = %c : f32, bf16 -> f32 {
      %e0 = arith.extf %c0 : bf16 to f32
      %e1 = arith.extf %c1 : bf16 to f32
      %g0 = arith.mulf %x1, %e0 : f32
      %g1 = arith.mulf %x0, %e1 : f32
      coda.yield %g0, %g1 : f32, f32
    }
    %z = arith.mulf %p, %tf : f32
    %zb = arith.truncf %z : f32 to bf16
    coda.yield %zb : bf16
  }
  return
}

// More than two row inputs: ping-pong (the cooperative kernel spills).
// CHECK-LABEL: func.func @three_row_inputs
//       CHECK:   schedule = ping_pong, tile_m = 128, tile_n = 128
func.func @three_row_inputs(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %p: memref<?xf32>,
                            %q: memref<?xf32>, %u: memref<?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %pv = %p : memref<?xf32>, row %qv = %q : memref<?xf32>,
               row %uv = %u : memref<?xf32>)
      outs(%y : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %pv : f32
    %z = arith.addf %x, %qv : f32
    %w = arith.mulf %z, %uv : f32
    %wb = arith.truncf %w : f32 to bf16
    coda.yield %wb : bf16
  }
  return
}

// CHECK-LABEL: func.func @colsum
//   CHECK-NOT:   coda.gemm_config
//       CHECK:   return
func.func @colsum(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cs: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%cs : memref<?x?xf32>) {
    %c = coda.col_reduce sum %acc tile 128 : f32
    coda.yield %c : !coda.partial<f32>
  }
  return
}

// Column partials beside an epilogue that reads no product (a bias's
// gradient reduced beside RoPE's adjoint, Qwen2's Q/K/V): the cooperative
// kernel without a cluster, as the adjoint without the bias.
// CHECK-LABEL: func.func @colsum_no_product
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>}
func.func @colsum_no_product(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                             %cos: memref<?x128xbf16>, %dy: memref<?x?xbf16>,
                             %dacc: memref<?x?xbf16>, %db: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xbf16>, tile %d = %dy : memref<?x?xbf16>)
      outs(%dacc, %db : memref<?x?xbf16>, memref<?x?xf32>) {
    %dv = arith.extf %d : bf16 to f32
    %r = coda.pair_map stride 64 (%d0, %d1) = %dv, (%c0, %c1) = %c : f32, bf16 -> f32 {
      %e0 = arith.extf %c0 : bf16 to f32
      %e1 = arith.extf %c1 : bf16 to f32
      %g0 = arith.mulf %d1, %e0 : f32
      %g1 = arith.mulf %d0, %e1 : f32
      coda.yield %g0, %g1 : f32, f32
    }
    %t = arith.truncf %r : f32 to bf16
    %s = coda.col_reduce sum %r tile 128 : f32
    coda.yield %t, %s : bf16, !coda.partial<f32>
  }
  return
}

// CHECK-LABEL: func.func @weight_grad
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2, wave_cost = 187>, #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4, wave_cost = 100>]}
func.func @weight_grad(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_a : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// 3072 x 2048 in 128 x 256 tiles: 96 clusters of two, 2 waves of 66 (374);
// in 128 x 128 tiles: 384, 3 waves of 132 (300).
// CHECK-LABEL: func.func @weight_grad_static_narrow
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4>}
func.func @weight_grad_static_narrow(%a: memref<16384x3072xbf16>, %b: memref<16384x2048xbf16>, %y: memref<3072x2048xbf16>) {
  coda.gemm %a, %b transpose_a : memref<16384x3072xbf16>, memref<16384x2048xbf16>
      epilogue(%acc) outs(%y : memref<3072x2048xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// 2048 x 2048: 64 clusters of two, 1 wave (187); 256 tiles of 128 x 128,
// 2 waves (200).
// CHECK-LABEL: func.func @weight_grad_static_wide
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>}
func.func @weight_grad_static_wide(%a: memref<16384x2048xbf16>, %b: memref<16384x2048xbf16>, %y: memref<2048x2048xbf16>) {
  coda.gemm %a, %b transpose_a : memref<16384x2048xbf16>, memref<16384x2048xbf16>
      epilogue(%acc) outs(%y : memref<2048x2048xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// A weight gradient reducing a column scale's gradient (norm_weight_grad).
// CHECK-LABEL: func.func @weight_grad_colsum
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4, wave_cost = 187>, #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4, wave_cost = 100>]}
func.func @weight_grad_colsum(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?xbf16>, %w: memref<?x?xbf16>, %y: memref<?x?xbf16>, %cs: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_a : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %gv = %g : memref<?xbf16>, tile %wv = %w : memref<?x?xbf16>)
      outs(%y, %cs : memref<?x?xbf16>, memref<?x?xf32>) {
    %wf = arith.extf %wv : bf16 to f32
    %p = arith.mulf %acc, %wf : f32
    %c = coda.col_reduce sum %p tile 128 : f32
    %gf = arith.extf %gv : bf16 to f32
    %d = arith.mulf %acc, %gf : f32
    %t = arith.truncf %d : f32 to bf16
    coda.yield %t, %c : bf16, !coda.partial<f32>
  }
  return
}

// CHECK-LABEL: func.func @pinned
//       CHECK:   schedule = staged, tile_m = 128, tile_n = 128, stages = 3
func.func @pinned(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = staged, tile_m = 128, tile_n = 128, stages = 3>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// SwiGLU's backward from saved pre-activations: two tile inputs (gate and
// up) and the interleaved gradient. Ping-pong up to K = 4096 (its epilogue
// under the other consumer's K loop; no spill there), the warp-specialized
// kernel beyond (the cooperative one spills with two tile inputs).
// CHECK-LABEL: func.func @swiglu_saved_backward
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>, #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>]}
func.func @swiglu_saved_backward(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?x?xbf16>,
                                 %u: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %gv = %g : memref<?x?xbf16>, tile %uv = %u : memref<?x?xbf16>)
      outs(%y : memref<?x?xbf16>) {
    %gf = arith.extf %gv : bf16 to f32
    %uf = arith.extf %uv : bf16 to f32
    %dg = arith.mulf %acc, %uf : f32
    %du = arith.mulf %acc, %gf : f32
    %e = arith.truncf %dg : f32 to bf16
    %o = arith.truncf %du : f32 to bf16
    %both = coda.interleave %e, %o : bf16
    coda.yield %both : !coda.interleaved<bf16>
  }
  return
}

// The same with K static: one configuration.
// CHECK-LABEL: func.func @swiglu_saved_backward_long_k
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>}
func.func @swiglu_saved_backward_long_k(%a: memref<?x8192xbf16>, %b: memref<8192x?xbf16>, %g: memref<?x?xbf16>,
                                        %u: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b : memref<?x8192xbf16>, memref<8192x?xbf16>
      epilogue(%acc, tile %gv = %g : memref<?x?xbf16>, tile %uv = %u : memref<?x?xbf16>)
      outs(%y : memref<?x?xbf16>) {
    %gf = arith.extf %gv : bf16 to f32
    %dg = arith.mulf %acc, %gf : f32
    %e = arith.truncf %dg : f32 to bf16
    %both = coda.interleave %e, %e : bf16
    coda.yield %both : !coda.interleaved<bf16>
  }
  return
}

// The same with a row input beside the two tile inputs (a deferred norm's
// row scale) and its gradient's row partials: ping-pong up to K = 4096 as
// well (the partials combined as each group run is evaluated, nothing
// spills), warp-specialized beyond.
// CHECK-LABEL: func.func @norm_swiglu_saved_backward
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>, #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>]}
func.func @norm_swiglu_saved_backward(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?x?xbf16>,
                                      %u: memref<?x?xbf16>, %rs: memref<?xf32>, %y: memref<?x?xbf16>,
                                      %p: memref<?x?xf32>) {
  coda.gemm %a, %b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %gv = %g : memref<?x?xbf16>, tile %uv = %u : memref<?x?xbf16>,
               row %r = %rs : memref<?xf32>)
      outs(%y, %p : memref<?x?xbf16>, memref<?x?xf32>) {
    %gf = arith.extf %gv : bf16 to f32
    %uf = arith.extf %uv : bf16 to f32
    %dg = arith.mulf %acc, %uf : f32
    %du = arith.mulf %acc, %gf : f32
    %dgr = arith.mulf %dg, %r : f32
    %e = arith.truncf %dgr : f32 to bf16
    %o = arith.truncf %du : f32 to bf16
    %both = coda.interleave %e, %o : bf16
    %part = coda.row_reduce sum %dg tile 128 : f32
    coda.yield %both, %part : !coda.interleaved<bf16>, !coda.partial<f32>
  }
  return
}

// RoPE with a second tile output (a saved accumulator) or a second tile
// input: warp-specialized (the cooperative kernel spills beside them).
// CHECK-LABEL: func.func @rope_saving_accumulator
//       CHECK:   schedule = warp_specialized, tile_m = 128, tile_n = 256
func.func @rope_saving_accumulator(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                                   %cos: memref<?x128xf32>, %q: memref<?x?xbf16>,
                                   %saved: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xf32>)
      outs(%q, %saved : memref<?x?xbf16>, memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0, %c1) = %c
        : f32, f32 -> f32 {
      %y0 = arith.mulf %lo, %c0 : f32
      %y1 = arith.mulf %hi, %c1 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    %ab = arith.truncf %acc : f32 to bf16
    coda.yield %rb, %ab : bf16, bf16
  }
  return
}

// RoPE with a column input (a bias added before the rotation): ping-pong
// (the cooperative kernel spills beside it).
// CHECK-LABEL: func.func @rope_bias
//       CHECK:   schedule = ping_pong, tile_m = 128, tile_n = 128
func.func @rope_bias(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %bias: memref<?xbf16>,
                     %cos: memref<?x128xf32>, %q: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %bv = %bias : memref<?xbf16>, periodic %c = %cos : memref<?x128xf32>)
      outs(%q : memref<?x?xbf16>) {
    %bf = arith.extf %bv : bf16 to f32
    %s = arith.addf %acc, %bf : f32
    %r = coda.pair_map stride 64 (%lo, %hi) = %s, (%c0, %c1) = %c
        : f32, f32 -> f32 {
      %y0 = arith.mulf %lo, %c0 : f32
      %y1 = arith.mulf %hi, %c1 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// Row and column inputs together (row-wise scales): cooperative without a
// cluster, where the cooperative kernel does not spill.
// CHECK-LABEL: func.func @row_and_column_scales
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>}
func.func @row_and_column_scales(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %r: memref<?xf32>,
                                 %c: memref<?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %rv = %r : memref<?xf32>, col %cv = %c : memref<?xf32>)
      outs(%y : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %rv : f32
    %z = arith.mulf %x, %cv : f32
    %t = arith.truncf %z : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// 8-bit operands: ping-pong up to K = 4096, cooperative beyond (without a
// cluster for row-wise scales).
// CHECK-LABEL: func.func @fp8_tensorwise
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>, #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4, cluster_m = 2>]}
func.func @fp8_tensorwise(%a: memref<?x?xf8E4M3FN>, %b: memref<?x?xf8E4M3FN>, %s: f32,
                          %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xf8E4M3FN>, memref<?x?xf8E4M3FN>
      epilogue(%acc, scalar %sv = %s : f32) outs(%y : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %sv : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// CHECK-LABEL: func.func @fp8_rowwise_long_k
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>}
func.func @fp8_rowwise_long_k(%a: memref<?x8192xf8E4M3FN>, %b: memref<?x8192xf8E4M3FN>,
                              %r: memref<?xf32>, %c: memref<?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x8192xf8E4M3FN>, memref<?x8192xf8E4M3FN>
      epilogue(%acc, row %rv = %r : memref<?xf32>, col %cv = %c : memref<?xf32>)
      outs(%y : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %rv : f32
    %z = arith.mulf %x, %cv : f32
    %t = arith.truncf %z : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Pairs at a stride the register epilogues' fragment layout cannot serve
// (4: heads of 8 columns): warp-specialized.
// CHECK-LABEL: func.func @narrow_heads
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>}
func.func @narrow_heads(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %r = coda.pair_map stride 4 (%lo, %hi) = %acc : f32 -> f32 {
      %n = arith.negf %hi : f32
      coda.yield %n, %lo : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// One group statistic whose groups fit a 128-column tile (a 1 x 128
// quantization): ping-pong. A 256-column group, or more than one
// statistic: warp-specialized (the shared-tile epilogue).
// CHECK-LABEL: func.func @group_quantize
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>}
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>}
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>}
func.func @group_quantize(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
                          %s: memref<?x?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s : memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %x = arith.divf %acc, %amax : f32
    %code = arith.truncf %x : f32 to f8E4M3FN
    %sv = coda.group_value %amax row group 128 : f32
    coda.yield %code, %sv : f8E4M3FN, !coda.grouped<f32>
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s : memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 256 : f32 -> f32
    %x = arith.divf %acc, %amax : f32
    %code = arith.truncf %x : f32 to f8E4M3FN
    %sv = coda.group_value %amax row group 256 : f32
    coda.yield %code, %sv : f8E4M3FN, !coda.grouped<f32>
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 64 : f32 -> f32
    %sq = arith.mulf %acc, %acc : f32
    %ss = coda.group_reduce sum %sq row group 64 : f32 -> f32
    %x = arith.divf %acc, %amax : f32
    %z = arith.mulf %x, %ss : f32
    %t = arith.truncf %z : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Groups along columns or a transposed output (FP8 training's token-major
// copy), with or without a row statistic beside them: ping-pong.
// CHECK-LABEL: func.func @column_groups
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>}
//       CHECK:   attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>}
func.func @column_groups(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
                         %s: memref<?x?xf32>, %qt: memref<?x?xf8E4M3FN>, %st: memref<?x?xf32>,
                         %yt: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s, %qt, %st : memref<?x?xf8E4M3FN>, memref<?x?xf32>, memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %x = arith.divf %acc, %amax : f32
    %code = arith.truncf %x : f32 to f8E4M3FN
    %sv = coda.group_value %amax row group 128 : f32
    %tamax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %tx = arith.divf %acc, %tamax : f32
    %tcode = arith.truncf %tx : f32 to f8E4M3FN
    %t = coda.transpose %tcode : f8E4M3FN
    %tsv = coda.group_value %tamax col group 128 : f32
    coda.yield %code, %sv, %t, %tsv : f8E4M3FN, !coda.grouped<f32>, !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%yt : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    %c = coda.transpose %t : bf16
    coda.yield %c : !coda.transposed<bf16>
  }
  return
}

// An FP8 tile output beside row-max partials (a down projection's
// quantized copy): ping-pong up to K = 4096, cooperative beyond without a
// cluster (in clusters of two it spills).
// CHECK-LABEL: func.func @fp8_copy_max_partials
//       CHECK:   attributes {coda.gemm_config = [#coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4, max_k = 4096>, #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>]}
func.func @fp8_copy_max_partials(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %rs: memref<?xf32>,
                                 %y: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>, %mx: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, row %s = %rs : memref<?xf32>)
      outs(%y, %q, %mx : memref<?x?xbf16>, memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %vb = arith.truncf %acc : f32 to bf16
    %x = arith.mulf %acc, %s : f32
    %f = arith.truncf %x : f32 to f8E4M3FN
    %m = math.absf %acc : f32
    %p = coda.row_reduce max %m tile 128 : f32
    coda.yield %vb, %f, %p : bf16, f8E4M3FN, !coda.partial<f32>
  }
  return
}
