// RUN: coda-opt %s --coda-to-gpu=tile-n=128 --split-input-file --verify-diagnostics
// RUN: not coda-opt %s --coda-to-gpu=chip=sm_80 --split-input-file 2>&1 | FileCheck %s --check-prefix=CHIP

// CHIP: error: coda-to-gpu: no GEMM lowering for chip 'sm_80' (supported: sm_90a)

func.func @f32_operands(%a: memref<?x64xf32>, %b: memref<64x64xf32>, %y: memref<?x64xf32>) {
  // expected-error @+1 {{sm_90a lowering supports bf16, f16, f8E4M3FN and f8E5M2 operands (f32 accumulation), got 'f32'}}
  coda.gemm %a, %b : memref<?x64xf32>, memref<64x64xf32>
      epilogue(%acc) outs(%y : memref<?x64xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

// WGMMA reads 8-bit operands only K-major: the weight stored K x N (no
// transpose_b) is refused, as is an lhs stored K x M.
func.func @fp8_rhs_n_major(%a: memref<?x64xf8E4M3FN>, %b: memref<64x64xf8E4M3FN>, %y: memref<?x64xbf16>) {
  // expected-error @+1 {{sm_90a lowering reads 'f8E4M3FN' operands only K-major: lhs M x K (no transpose_a) and rhs N x K (transpose_b)}}
  coda.gemm %a, %b : memref<?x64xf8E4M3FN>, memref<64x64xf8E4M3FN>
      epilogue(%acc) outs(%y : memref<?x64xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @fp8_lhs_m_major(%a: memref<64x?xf8E5M2>, %b: memref<64x64xf8E5M2>, %y: memref<?x64xbf16>) {
  // expected-error @+1 {{sm_90a lowering reads 'f8E5M2' operands only K-major}}
  coda.gemm %a, %b transpose_a transpose_b : memref<64x?xf8E5M2>, memref<64x64xf8E5M2>
      epilogue(%acc) outs(%y : memref<?x64xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @misaligned_rows(%a: memref<?x60xbf16>, %b: memref<64x60xbf16>, %y: memref<?x64xf32>) {
  // expected-error @+1 {{lhs row stride is 60 elements (120 bytes); TMA needs a multiple of 16 bytes (pad the rows to a multiple of 8 elements)}}
  coda.gemm %a, %b transpose_b : memref<?x60xbf16>, memref<64x60xbf16>
      epilogue(%acc) outs(%y : memref<?x64xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @strided_columns(%a: memref<?x64xbf16, strided<[128, 2]>>, %b: memref<64x64xbf16>, %y: memref<?x64xf32>) {
  // expected-error @+1 {{lhs must be contiguous along its last dimension for TMA (stride 1), got stride 2}}
  coda.gemm %a, %b transpose_b : memref<?x64xbf16, strided<[128, 2]>>, memref<64x64xbf16>
      epilogue(%acc) outs(%y : memref<?x64xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @misaligned_start(%a: memref<?x64xbf16>, %b: memref<64x72xbf16, strided<[72, 1], offset: 3>>, %y: memref<?x72xf32>) {
  // expected-error @+1 {{rhs starts 6 bytes into its buffer; TMA needs a 16-byte aligned start}}
  coda.gemm %a, %b : memref<?x64xbf16>, memref<64x72xbf16, strided<[72, 1], offset: 3>>
      epilogue(%acc) outs(%y : memref<?x72xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @batch_stride(%a: memref<2x?x64xbf16, strided<[1028, 64, 1]>>, %b: memref<64x64xbf16>, %y: memref<2x?x64xf32>) {
  // expected-error @+1 {{lhs batch stride is 1028 elements (2056 bytes); TMA needs a multiple of 16 bytes}}
  coda.gemm %a, %b : memref<2x?x64xbf16, strided<[1028, 64, 1]>>, memref<64x64xbf16>
      epilogue(%acc) outs(%y : memref<2x?x64xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @tensors(%a: tensor<?x64xbf16>, %b: tensor<64x64xbf16>, %y: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{GPU lowering takes coda.gemm on memrefs; bufferize first (one-shot-bufferize)}}
  %r = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x64xbf16>
      epilogue(%acc) outs(%y : tensor<?x64xf32>) {
    coda.yield %acc : f32
  }
  return %r : tensor<?x64xf32>
}

// -----

func.func @tile_conflict(%a: memref<?x64xbf16>, %b: memref<512x64xbf16>, %p: memref<?x4xf32>, %q: memref<?x2xf32>) {
  // expected-error @+1 {{block reductions along one axis must share a tile on the GPU, got 128 and 256}}
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<512x64xbf16>
      epilogue(%acc) outs(%p, %q : memref<?x4xf32>, memref<?x2xf32>) {
    %s = coda.row_reduce sum %acc tile 128 : f32
    %m = coda.row_reduce max %acc tile 256 : f32
    coda.yield %s, %m : !coda.partial<f32>, !coda.partial<f32>
  }
  return
}

// -----

func.func @odd_reduction_tile(%a: memref<?x64xbf16>, %b: memref<96x64xbf16>, %p: memref<?x1xf32>) {
  // expected-error @+1 {{tile N must be 64, 128 or 256, got 96}}
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<96x64xbf16>
      epilogue(%acc) outs(%p : memref<?x1xf32>) {
    // expected-note @+1 {{the tile N comes from this reduction's tile 96: its partials each cover one CTA tile (row reductions take tiles of 8, 16, 32, 64, 128 or 256 columns)}}
    %s = coda.row_reduce sum %acc tile 96 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}

// -----

func.func @odd_column_reduction_tile(%a: memref<?x64xbf16>, %b: memref<256x64xbf16>, %p: memref<?x256xf32>) {
  // expected-error @+1 {{tile M must be a multiple of 64}}
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<256x64xbf16>
      epilogue(%acc) outs(%p : memref<?x256xf32>) {
    // expected-note @+1 {{the tile M comes from this reduction's tile 96: its partials each cover one CTA tile (column reductions take tiles of 64 or 128 rows)}}
    %s = coda.col_reduce sum %acc tile 96 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}

// -----

func.func @pairs_wider_than_tile(%a: memref<?x64xbf16>, %b: memref<256x64xbf16>, %y: memref<?x256xf32>) {
  // expected-error @+1 {{pair stride 128 needs tile N to be a multiple of 256, got 128}}
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<256x64xbf16>
      epilogue(%acc) outs(%y : memref<?x256xf32>) {
    %r = coda.pair_map stride 128 (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %r : f32
  }
  return
}

// -----

func.func @fp8_epilogue_input(%a: memref<?x64xbf16>, %b: memref<256x64xbf16>, %r: memref<?x256xf8E4M3FN>,
                              %y: memref<?x256xbf16>) {
  // expected-error @+1 {{epilogue input #0 holds 'f8E4M3FN'; the sm_90a lowering reads 16- and 32-bit epilogue inputs (FP8 goes in as lhs and rhs)}}
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<256x64xbf16>
      epilogue(%acc, tile %rv = %r : memref<?x256xf8E4M3FN>) outs(%y : memref<?x256xbf16>) {
    %f = arith.extf %rv : f8E4M3FN to f32
    %x = arith.addf %acc, %f : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

func.func @fp8_pair_output(%a: memref<?x64xbf16>, %b: memref<256x64xbf16>, %y: memref<?x128xf8E4M3FN>) {
  // expected-error @+1 {{output #0 holds 'f8E4M3FN' per column pair; the sm_90a lowering writes FP8 tile outputs only}}
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<256x64xbf16>
      epilogue(%acc) outs(%y : memref<?x128xf8E4M3FN>) {
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<f8E4M3FN> {
      %p = arith.mulf %g, %u : f32
      %t = arith.truncf %p : f32 to f8E4M3FN
      coda.yield %t : f8E4M3FN
    }
    coda.yield %h : !coda.pair<f8E4M3FN>
  }
  return
}

// -----

// Groups along columns lower as whole columns of a 128-row tile; other
// heights have the CPU's reference lowering only, said on the op.
func.func @group_statistic(%a: memref<?x64xbf16>, %b: memref<256x64xbf16>, %y: memref<?x256xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<256x64xbf16>
      epilogue(%acc) outs(%y : memref<?x256xbf16>) {
    // expected-error @+1 {{'coda.group_reduce' op groups along columns lower on sm_90a as whole columns of a 128-row tile, got 32 rows; --coda-lower-to-linalg gives their meaning on the CPU}}
    %m = coda.group_reduce max %acc col group 32 : f32 -> f32
    %d = arith.divf %acc, %m : f32
    %t = arith.truncf %d : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// A column's first maximum has the CPU's reference lowering only.
func.func @column_argmax(%a: memref<?x64xbf16>, %b: memref<256x64xbf16>, %y: memref<?x256xindex>) {
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<256x64xbf16>
      epilogue(%acc) outs(%y : memref<?x256xindex>) {
    // expected-error @+1 {{'coda.group_reduce' op argmax along columns has no sm_90a lowering; --coda-lower-to-linalg gives its meaning on the CPU}}
    %i = coda.group_reduce argmax %acc col group 128 : f32 -> index
    coda.yield %i : index
  }
  return
}

// -----

// A batched GEMM's transposed output is refused on the GPU.
func.func @batched_transposed(%a: memref<2x?x64xbf16>, %b: memref<2x256x64xbf16>, %y: memref<2x256x?xbf16>) {
  // expected-error @+1 {{'coda.gemm' op a batched GEMM's transposed output has no sm_90a lowering}}
  coda.gemm %a, %b transpose_b : memref<2x?x64xbf16>, memref<2x256x64xbf16>
      epilogue(%acc) outs(%y : memref<2x256x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    %c = coda.transpose %t : bf16
    coda.yield %c : !coda.transposed<bf16>
  }
  return
}
