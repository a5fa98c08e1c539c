// The GEMM that hands the next GEMM its FP8 operand: bf16 x bf16 -> e4m3
// codes with one f32 scale per 1 x 128 group (amax / 448), against the same
// GEMM writing bf16 (group_quantize.py times both).
func.func @quantize(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
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

func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// Both FP8 copies FP8 training needs of one output: the 1 x 128 codes above
// and the token-major (N x M) codes with one scale per 128 x 1 group, which
// the weight gradient reads.
func.func @quantize_both(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
                         %s: memref<?x?xf32>, %qt: memref<?x?xf8E4M3FN>, %st: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s, %qt, %st : memref<?x?xf8E4M3FN>, memref<?x?xf32>, memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %floor = arith.maximumf %amax, %eps : f32
    %scale = arith.divf %floor, %fmax : f32
    %x = arith.divf %acc, %scale : f32
    %lo = arith.maximumf %x, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %sv = coda.group_value %scale row group 128 : f32
    %tamax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %tfloor = arith.maximumf %tamax, %eps : f32
    %tscale = arith.divf %tfloor, %fmax : f32
    %tx = arith.divf %acc, %tscale : f32
    %tlo = arith.maximumf %tx, %nfmax : f32
    %tc = arith.minimumf %tlo, %fmax : f32
    %tcode = arith.truncf %tc : f32 to f8E4M3FN
    %t = coda.transpose %tcode : f8E4M3FN
    %tsv = coda.group_value %tscale col group 128 : f32
    coda.yield %code, %sv, %t, %tsv : f8E4M3FN, !coda.grouped<f32>, !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  return
}

// The same two copies as torchao's blockwise kernels write them: the
// inverse scale 448 / amax in f64 rounded to f32, codes = v * inverse, the
// scale written as 1 / inverse.
func.func @quantize_both_rcp(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>,
                             %s: memref<?x?xf32>, %qt: memref<?x?xf8E4M3FN>, %st: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s, %qt, %st : memref<?x?xf8E4M3FN>, memref<?x?xf32>, memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %eps = arith.constant 1.0e-12 : f32
    %fmax64 = arith.constant 448.0 : f64
    %fmax = arith.constant 448.0 : f32
    %nfmax = arith.constant -448.0 : f32
    %one = arith.constant 1.0 : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %floor = arith.maximumf %amax, %eps : f32
    %floor64 = arith.extf %floor : f32 to f64
    %inv64 = arith.divf %fmax64, %floor64 : f64
    %inv = arith.truncf %inv64 : f64 to f32
    %x = arith.mulf %acc, %inv : f32
    %lo = arith.maximumf %x, %nfmax : f32
    %c = arith.minimumf %lo, %fmax : f32
    %code = arith.truncf %c : f32 to f8E4M3FN
    %scale = arith.divf %one, %inv : f32
    %sv = coda.group_value %scale row group 128 : f32
    %tamax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %tfloor = arith.maximumf %tamax, %eps : f32
    %tfloor64 = arith.extf %tfloor : f32 to f64
    %tinv64 = arith.divf %fmax64, %tfloor64 : f64
    %tinv = arith.truncf %tinv64 : f64 to f32
    %tx = arith.mulf %acc, %tinv : f32
    %tlo = arith.maximumf %tx, %nfmax : f32
    %tc = arith.minimumf %tlo, %fmax : f32
    %tcode = arith.truncf %tc : f32 to f8E4M3FN
    %t = coda.transpose %tcode : f8E4M3FN
    %tscale = arith.divf %one, %tinv : f32
    %tsv = coda.group_value %tscale col group 128 : f32
    coda.yield %code, %sv, %t, %tsv : f8E4M3FN, !coda.grouped<f32>, !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  return
}
