// FP8 GEMMs (f8E4M3FN and f8E5M2 operands, both K-major: lhs M x K, weights
// N x K), f32 accumulation, with the scales of the FP8 recipes applied in
// the epilogue: row-wise (a per-token scale of the lhs as a row input, a
// per-channel scale of the weight as a column input, as torch._scaled_mm
// and torchao's float8 row-wise recipe compute) and per-tensor (a scalar).

// Row-wise scales, e4m3, bf16 out.
func.func @fp8_rowwise(%a: memref<?x?xf8E4M3FN>, %b: memref<?x?xf8E4M3FN>, %sa: memref<?xf32>,
                       %sb: memref<?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xf8E4M3FN>, memref<?x?xf8E4M3FN>
      epilogue(%acc, row %ra = %sa : memref<?xf32>, col %cb = %sb : memref<?xf32>)
      outs(%y : memref<?x?xbf16>) {
    %x = arith.mulf %acc, %ra : f32
    %z = arith.mulf %x, %cb : f32
    %t = arith.truncf %z : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Per-tensor scale, e4m3, bf16 out.
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

// e5m2 operands (gradients), per-tensor scale, f32 out.
func.func @fp8_e5m2(%a: memref<?x?xf8E5M2>, %b: memref<?x?xf8E5M2>, %s: f32,
                    %y: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xf8E5M2>, memref<?x?xf8E5M2>
      epilogue(%acc, scalar %sv = %s : f32) outs(%y : memref<?x?xf32>) {
    %x = arith.mulf %acc, %sv : f32
    coda.yield %x : f32
  }
  return
}
