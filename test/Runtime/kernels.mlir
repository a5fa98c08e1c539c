// Kernels whose manifest the runtime tests validate against (not a test).
func.func @norm(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %res: memref<?x?xbf16>,
                %scale: memref<?xf32>, %s: f32, %h: memref<?x?xbf16>, %ss: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %res : memref<?x?xbf16>, row %sv = %scale : memref<?xf32>, scalar %k = %s : f32)
      outs(%h, %ss : memref<?x?xbf16>, memref<?x?xf32>) {
    %0 = arith.mulf %acc, %sv : f32
    %1 = arith.mulf %0, %k : f32
    %r = arith.extf %rv : bf16 to f32
    %x = arith.addf %1, %r : f32
    %sq = arith.mulf %x, %x : f32
    %p = coda.row_reduce sum %sq tile 128 : f32
    %xb = arith.truncf %x : f32 to bf16
    coda.yield %xb, %p : bf16, !coda.partial<f32>
  }
  return
}

func.func @swiglu(%a: memref<?x4096xbf16>, %b: memref<4096x?xbf16>, %out: memref<?x?xbf16>) {
  coda.gemm %a, %b : memref<?x4096xbf16>, memref<4096x?xbf16>
      epilogue(%acc) outs(%out : memref<?x?xbf16>) {
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %y = arith.mulf %g, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %h : !coda.pair<bf16>
  }
  return
}

func.func @finish(%p: memref<?x?xf32>, %s: memref<?xf32>) {
  coda.reduce_partials sum row %p : memref<?x?xf32> outs(%s : memref<?xf32>)
  return
}

func.func @interleaved(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %out: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%out : memref<?x?xbf16>) {
    %e = arith.truncf %acc : f32 to bf16
    %both = coda.interleave %e, %e : bf16
    coda.yield %both : !coda.interleaved<bf16>
  }
  return
}
