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

// Epilogues that produce FP8: the next GEMM's 8-bit operand comes out of
// this GEMM's epilogue, with no quantization kernel between them.

// The product scaled and rounded to e4m3 with no clamp: beyond e4m3's
// range (448, rounding to nearest even up to 464) the element becomes NaN,
// as arith.truncf defines it. The row maxima of |acc| (what the next
// step's scale is made from) leave as partials and are finished.
func.func @quantize_e4m3(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %s: f32,
                         %q: memref<?x?xf8E4M3FN>, %amax_part: memref<?x?xf32>,
                         %amax: memref<?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, scalar %sv = %s : f32) outs(%q, %amax_part : memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %x = arith.mulf %acc, %sv : f32
    %t = arith.truncf %x : f32 to f8E4M3FN
    %m = math.absf %acc : f32
    %p = coda.row_reduce max %m tile 128 : f32
    coda.yield %t, %p : f8E4M3FN, !coda.partial<f32>
  }
  coda.reduce_partials max row %amax_part : memref<?x?xf32> outs(%amax : memref<?xf32>)
  return
}

// f16 operands rounded to e5m2: beyond its range (57344, up to 61440) the
// element becomes the infinity of its sign.
func.func @quantize_e5m2(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %s: f32,
                         %q: memref<?x?xf8E5M2>) {
  coda.gemm %a, %b transpose_b : memref<?x?xf16>, memref<?x?xf16>
      epilogue(%acc, scalar %sv = %s : f32) outs(%q : memref<?x?xf8E5M2>) {
    %x = arith.mulf %acc, %sv : f32
    %t = arith.truncf %x : f32 to f8E5M2
    coda.yield %t : f8E5M2
  }
  return
}

// An FP8 GEMM whose output is the next FP8 GEMM's operand (delayed
// per-tensor scaling): dequantized with the row-wise scales, multiplied by
// the next GEMM's quantization scale, clamped to e4m3's range and rounded;
// the row maxima of the dequantized |y| leave as partials.
func.func @fp8_rowwise_quantize(%a: memref<?x?xf8E4M3FN>, %b: memref<?x?xf8E4M3FN>,
                                %sa: memref<?xf32>, %sb: memref<?xf32>, %qs: f32,
                                %q: memref<?x?xf8E4M3FN>, %amax_part: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xf8E4M3FN>, memref<?x?xf8E4M3FN>
      epilogue(%acc, row %ra = %sa : memref<?xf32>, col %cb = %sb : memref<?xf32>,
               scalar %qv = %qs : f32)
      outs(%q, %amax_part : memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %lo = arith.constant -448.0 : f32
    %hi = arith.constant 448.0 : f32
    %x = arith.mulf %acc, %ra : f32
    %y = arith.mulf %x, %cb : f32
    %z = arith.mulf %y, %qv : f32
    %c0 = arith.maximumf %z, %lo : f32
    %c1 = arith.minimumf %c0, %hi : f32
    %t = arith.truncf %c1 : f32 to f8E4M3FN
    %m = math.absf %y : f32
    %p = coda.row_reduce max %m tile 128 : f32
    coda.yield %t, %p : f8E4M3FN, !coda.partial<f32>
  }
  return
}

// A down projection adding the residual and writing it twice: in bf16 and
// as the next GEMM's e4m3 operand (a per-row scale known before the GEMM,
// clamped), with the row maxima of |h| as partials. Beyond K = 4096 the
// selection runs it cooperative without a cluster (with one it spills).
func.func @fp8_copy_rowmax(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %res: memref<?x?xbf16>,
                           %rs: memref<?xf32>, %y: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
                           %parts: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %r = %res : memref<?x?xbf16>, row %s = %rs : memref<?xf32>)
      outs(%y, %q, %parts : memref<?x?xbf16>, memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %rf = arith.extf %r : bf16 to f32
    %v = arith.addf %acc, %rf : f32
    %vb = arith.truncf %v : f32 to bf16
    %x = arith.mulf %v, %s : f32
    %lo = arith.constant -448.0 : f32
    %hi = arith.constant 448.0 : f32
    %c0 = arith.maximumf %x, %lo : f32
    %c1 = arith.minimumf %c0, %hi : f32
    %f = arith.truncf %c1 : f32 to f8E4M3FN
    %m = math.absf %v : f32
    %p = coda.row_reduce max %m tile 128 : f32
    coda.yield %vb, %f, %p : bf16, f8E4M3FN, !coda.partial<f32>
  }
  return
}

// FP8 training's two copies of a GEMM output: row-major codes with a scale
// per 1 x 128 group (the next GEMM's operand) and the token-major copy
// (N x M) with a scale per 128 x 1 group (the weight gradient's operand),
// both from one epilogue.
func.func @transposed_quantize(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                               %q: memref<?x?xf8E4M3FN>, %s: memref<?x?xf32>,
                               %qt: memref<?x?xf8E4M3FN>, %st: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s, %qt, %st : memref<?x?xf8E4M3FN>, memref<?x?xf32>, memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %floor = arith.maximumf %amax, %eps : f32
    %scale = arith.divf %floor, %fmax : f32
    %v = arith.divf %acc, %scale : f32
    %lo = arith.maximumf %v, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %sv = coda.group_value %scale row group 128 : f32
    %tamax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %tfloor = arith.maximumf %tamax, %eps : f32
    %tscale = arith.divf %tfloor, %fmax : f32
    %tv = arith.divf %acc, %tscale : f32
    %tlo = arith.maximumf %tv, %nfmax : f32
    %tc = arith.minimumf %tlo, %fmax : f32
    %tcode = arith.truncf %tc : f32 to f8E4M3FN
    %t = coda.transpose %tcode : f8E4M3FN
    %tsv = coda.group_value %tscale col group 128 : f32
    coda.yield %code, %sv, %t, %tsv : f8E4M3FN, !coda.grouped<f32>, !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  return
}

// The residual stream's update (h = x W^T + r, kept in bf16) with its
// token-major FP8 copy and 128 x 1 scales: a tile input read by the
// statistic's walk and by the rows.
func.func @residual_transposed_quantize(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                                        %r: memref<?x?xbf16>, %h: memref<?x?xbf16>,
                                        %qt: memref<?x?xf8E4M3FN>, %st: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %res = %r : memref<?x?xbf16>)
      outs(%h, %qt, %st : memref<?x?xbf16>, memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %rf = arith.extf %res : bf16 to f32
    %sum = arith.addf %acc, %rf : f32
    %hb = arith.truncf %sum : f32 to bf16
    %hf = arith.extf %hb : bf16 to f32
    %abs = math.absf %hf : f32
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %tamax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %tfloor = arith.maximumf %tamax, %eps : f32
    %tscale = arith.divf %tfloor, %fmax : f32
    %tv = arith.divf %hf, %tscale : f32
    %tlo = arith.maximumf %tv, %nfmax : f32
    %tc = arith.minimumf %tlo, %fmax : f32
    %tcode = arith.truncf %tc : f32 to f8E4M3FN
    %t = coda.transpose %tcode : f8E4M3FN
    %tsv = coda.group_value %tscale col group 128 : f32
    coda.yield %hb, %t, %tsv : bf16, !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  return
}

// A bf16 output written transposed (16-bit staging), and a softmax down
// each column of the tile (two statistics of the same groups, the second
// reading the first).
func.func @transposed_column_softmax(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>,
                                     %yt: memref<?x?xbf16>, %p: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%yt, %p : memref<?x?xbf16>, memref<?x?xf32>) {
    %yb = arith.truncf %acc : f32 to bf16
    %t = coda.transpose %yb : bf16
    %mx = coda.group_reduce max %acc col group 128 : f32 -> f32
    %d = arith.subf %acc, %mx : f32
    %e = math.exp %d : f32
    %sum = coda.group_reduce sum %e col group 128 : f32 -> f32
    %pr = arith.divf %e, %sum : f32
    coda.yield %t, %pr : !coda.transposed<bf16>, f32
  }
  return
}
