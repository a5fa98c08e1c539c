// Weight gradients (lhs stored K x M), whose configurations the selector
// dispatches by waves where M and N are dynamic: a plain one, and one
// reducing a column scale's gradient (as norm_weight_grad.mlir does).
func.func @dw(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_a : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

func.func @dw_colsum(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?xbf16>, %w: memref<?x?xbf16>, %y: memref<?x?xbf16>, %cs: memref<?x?xf32>) {
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
