// RUN: coda-opt %s --split-input-file --coda-test-epilogue-plan --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s

// The epilogue plan: where each input and output of a GEMM's epilogue lives
// and how it moves, decided once per kernel (EpiloguePlan.h).

// A register epilogue stages its bf16 tile output and, in an interior tile
// under any register schedule, stores it with TMA; the shared-tile
// schedules store it directly.
// CHECK-LABEL: remark: epilogue plan of ping_pong 128x128: fragments, interior copy
//  CHECK-NEXT:   output 0 (tile): staged, TMA store
// CHECK-LABEL: remark: epilogue plan of warp_specialized 128x256: shared tile, interior copy
//  CHECK-NEXT:   output 0 (tile): direct
func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = warp_specialized, tile_m = 128, tile_n = 256, stages = 4>} {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// A bias (column input) beside the output: the cooperative tile, whose
// row buffers do not fit beside its ring, loads the lane's columns before
// the mainloop, and its output leaves through the threads' own stores, not
// TMA (the bias's registers beside the stmatrix path would spill);
// ping-pong's narrower tile keeps the bias's row in the warp's buffer,
// after the 8 staged rows of 136 bf16, and stores with TMA.
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments, interior copy
//  CHECK-NEXT:   input 0 (col): prefetch 32 fragment loads
//  CHECK-NEXT:   output 0 (tile): staged{{$}}
// CHECK-LABEL: remark: epilogue plan of ping_pong 128x128: fragments, interior copy
//  CHECK-NEXT:   input 0 (col): row buffer at 2176
//  CHECK-NEXT:   output 0 (tile): staged, TMA store
func.func @bias(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %bias: memref<?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %bv = %bias : memref<?xbf16>) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %e = arith.extf %bv : bf16 to f32
    %s = arith.addf %acc, %e : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %bv = %bias : memref<?xbf16>) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %e = arith.extf %bv : bf16 to f32
    %s = arith.addf %acc, %e : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// A residual (bf16 tile input) is staged; the cooperative interior tile
// prefetches it into registers before the mainloop, all of the thread's
// fragment rows at once. An epilogue-only kernel (no product read) has no
// mainloop to hide those loads under: its residual enters through
// pipelined slots instead.
// CHECK-LABEL: remark: epilogue plan of cooperative 128x128: fragments, interior copy
//  CHECK-NEXT:   input 0 (tile): staged, prefetch 32 fragment loads
//  CHECK-NEXT:   output 0 (tile): staged, TMA store
// CHECK-LABEL: remark: epilogue plan of cooperative 128x128 epilogue-only: fragments, interior copy
//  CHECK-NEXT:   input 0 (tile): staged, pipelined slot 0
//  CHECK-NEXT:   output 0 (tile): staged, TMA store
func.func @residual(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %r: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %r : memref<?x?xbf16>) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4>} {
    %e = arith.extf %rv : bf16 to f32
    %s = arith.addf %acc, %e : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %r : memref<?x?xbf16>) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 128, stages = 4>} {
    %e = arith.extf %rv : bf16 to f32
    %two = arith.constant 2.0 : f32
    %s = arith.mulf %e, %two : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// Row partials: a sum of squares beside a staged output is combined as
// each group run is computed (no output waits for the whole row); a
// log-sum-exp takes its block's values at once. Without a tile output
// there is no interior copy. (The accumulator the sum reads beside the
// output, read by two ops, goes through opaque moves in edge tiles.)
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments, interior copy, opaque edge accumulators
//  CHECK-NEXT:   output 0 (tile): staged, TMA store
//  CHECK-NEXT:   output 1 (row_partials): eager
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments{{$}}
//  CHECK-NEXT:   output 0 (row_partials): direct
func.func @partials(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>, %p: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y, %p : memref<?x?xbf16>, memref<?x?xf32>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %t = arith.truncf %acc : f32 to bf16
    %sq = arith.mulf %acc, %acc : f32
    %s = coda.row_reduce sum %sq tile 256 : f32
    coda.yield %t, %s : bf16, !coda.partial<f32>
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%p : memref<?x?xf32>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %l = coda.row_reduce logsumexp %acc tile 256 : f32
    coda.yield %l : !coda.partial<f32>
  }
  return
}

// -----

// An interleaved output is stored as each group run is computed; ping-pong
// gives it an interior copy, the cooperative schedule does not.
// CHECK-LABEL: remark: epilogue plan of ping_pong 128x128: fragments, interior copy
//  CHECK-NEXT:   output 0 (interleaved): eager
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments{{$}}
//  CHECK-NEXT:   output 0 (interleaved): eager
func.func @interleaved(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %e = arith.truncf %acc : f32 to bf16
    %both = coda.interleave %e, %e : bf16
    coda.yield %both : !coda.interleaved<bf16>
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %e = arith.truncf %acc : f32 to bf16
    %both = coda.interleave %e, %e : bf16
    coda.yield %both : !coda.interleaved<bf16>
  }
  return
}

// -----

// An FP8 output is staged and stored with TMA (128-column boxes) as a
// 16-bit one is; in the cooperative schedule only where it can leave with
// TMA stores (beside a column input its 128 x 256 tile's row copies
// would spill). An accumulator read by two ops makes the edge tile read
// it through opaque moves.
// CHECK-LABEL: remark: epilogue plan of ping_pong 128x128: fragments, interior copy, opaque edge accumulators
//  CHECK-NEXT:   output 0 (tile): staged, TMA store
//  CHECK-NEXT:   output 1 (tile): staged, TMA store
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments, interior copy
//  CHECK-NEXT:   output 0 (tile): staged, TMA store
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments, interior copy
//  CHECK-NEXT:   input 0 (col)
//  CHECK-NEXT:   output 0 (tile): direct
func.func @fp8(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>, %y: memref<?x?xbf16>,
               %s: memref<?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %y : memref<?x?xf8E4M3FN>, memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %f = arith.truncf %acc : f32 to f8E4M3FN
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %f, %t : f8E4M3FN, bf16
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q : memref<?x?xf8E4M3FN>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %f = arith.truncf %acc : f32 to f8E4M3FN
    coda.yield %f : f8E4M3FN
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %cs = %s : memref<?xf32>) outs(%q : memref<?x?xf8E4M3FN>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %x = arith.mulf %acc, %cs : f32
    %f = arith.truncf %x : f32 to f8E4M3FN
    coda.yield %f : f8E4M3FN
  }
  return
}

// -----

// A periodic input (RoPE's cos table) whose period divides the tile is
// read once per row per residue (static period); one whose period is
// known only at launch keeps the warp's 8 rows in its buffer where they
// fit (ping-pong's 128 columns), else is read from global memory.
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments, interior copy
//  CHECK-NEXT:   input 0 (periodic): period 128
// CHECK-LABEL: remark: epilogue plan of ping_pong 128x128: fragments, interior copy
//  CHECK-NEXT:   input 0 (periodic): row buffer at 2176
// CHECK-LABEL: remark: epilogue plan of cooperative 128x256: fragments, interior copy
//  CHECK-NEXT:   input 0 (periodic): direct
func.func @periodic(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x128xf32>, %cosd: memref<?x?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xf32>) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %s = arith.mulf %acc, %c : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cosd : memref<?x?xf32>) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %s = arith.mulf %acc, %c : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cosd : memref<?x?xf32>) outs(%y : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = cooperative, tile_m = 128, tile_n = 256, stages = 4>} {
    %s = arith.mulf %acc, %c : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// Statistics along columns: the token-major copy's scale (divided once per
// column from the column's maximum) and the row statistic's values: each
// column's rows hold its maximum's scale, which the rows read instead of
// dividing at every element; the transposed output and its 128 x 1 scales
// by role.
// CHECK-LABEL: remark: epilogue plan of ping_pong 128x128: fragments
//  CHECK-NEXT:   output 0 (transposed): direct
//  CHECK-NEXT:   output 1 (col_grouped): direct
//  CHECK-NEXT:   per column: arith.divf
// CHECK-LABEL: remark: epilogue plan of ping_pong 128x128: fragments
//  CHECK-NEXT:   output 0 (tile): staged
//  CHECK-NEXT:   per column: coda.group_reduce coda.group_reduce
func.func @column_statistics(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %qt: memref<?x?xf8E4M3FN>,
                             %st: memref<?x?xf32>, %p: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%qt, %st : memref<?x?xf8E4M3FN>, memref<?x?xf32>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %abs = math.absf %acc : f32
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %tamax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %tfloor = arith.maximumf %tamax, %eps : f32
    %tscale = arith.divf %tfloor, %fmax : f32
    %tv = arith.divf %acc, %tscale : f32
    %tcode = arith.truncf %tv : f32 to f8E4M3FN
    %t = coda.transpose %tcode : f8E4M3FN
    %tsv = coda.group_value %tscale col group 128 : f32
    coda.yield %t, %tsv : !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  // A softmax down the columns reads both statistics themselves.
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%p : memref<?x?xbf16>) attributes {coda.gemm_config = #coda.gemm_config<schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %mx = coda.group_reduce max %acc col group 128 : f32 -> f32
    %d = arith.subf %acc, %mx : f32
    %e = math.exp %d : f32
    %sum = coda.group_reduce sum %e col group 128 : f32 -> f32
    %pr = arith.divf %e, %sum : f32
    %pb = arith.truncf %pr : f32 to bf16
    coda.yield %pb : bf16
  }
  return
}
