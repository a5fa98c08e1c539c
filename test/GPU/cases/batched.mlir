// Batched GEMMs (a leading batch dimension B on lhs, the outputs and every
// input but column and scalar ones): their kernels run the tiles of every
// batch, loading batched operands through 3-D TMA descriptors. Run by
// test_kernels.py against float64 PyTorch.

// Both operands batched (torch.bmm with rhs as nn.Linear stores weights);
// tile, row, column and scalar inputs; bf16 and f32 tile outputs; row
// partial sums of squares, reduced by the batched finish.
func.func @bmm_residual_norm(%a: memref<?x?x?xbf16>, %b: memref<?x?x?xbf16>,
                             %res: memref<?x?x?xbf16>, %scale: memref<?x?xf32>,
                             %bias: memref<?xf32>, %s: f32,
                             %h: memref<?x?x?xbf16>, %hf: memref<?x?x?xf32>,
                             %ss_part: memref<?x?x?xf32>, %ss: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?x?xbf16>, memref<?x?x?xbf16>
      epilogue(%acc, tile %rv = %res : memref<?x?x?xbf16>, row %sv = %scale : memref<?x?xf32>,
               col %bv = %bias : memref<?xf32>, scalar %k = %s : f32)
      outs(%h, %hf, %ss_part : memref<?x?x?xbf16>, memref<?x?x?xf32>, memref<?x?x?xf32>) {
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
  coda.reduce_partials sum row %ss_part : memref<?x?x?xf32> outs(%ss : memref<?x?xf32>)
  return
}

// A shared rhs stored K x N (MN-major) and a batched lhs, f16 in, f32 out;
// column partial sums reduced by the batched column finish.
func.func @bmm_shared_nn(%a: memref<?x?x?xf16>, %b: memref<?x?xf16>, %y: memref<?x?x?xf32>,
                         %cs_part: memref<?x?x?xf32>, %cs: memref<?x?xf32>) {
  coda.gemm %a, %b : memref<?x?x?xf16>, memref<?x?xf16>
      epilogue(%acc) outs(%y, %cs_part : memref<?x?x?xf32>, memref<?x?x?xf32>) {
    %c = coda.col_reduce sum %acc tile 128 : f32
    coda.yield %acc, %c : f32, !coda.partial<f32>
  }
  coda.reduce_partials sum col %cs_part : memref<?x?x?xf32> outs(%cs : memref<?x?xf32>)
  return
}

// lhs stored K x M per batch (transpose_a), rhs batched K x N.
func.func @bmm_tn(%a: memref<?x?x?xbf16>, %b: memref<?x?x?xbf16>, %y: memref<?x?x?xbf16>) {
  coda.gemm %a, %b transpose_a : memref<?x?x?xbf16>, memref<?x?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?x?xbf16>) {
    %yb = arith.truncf %acc : f32 to bf16
    coda.yield %yb : bf16
  }
  return
}
