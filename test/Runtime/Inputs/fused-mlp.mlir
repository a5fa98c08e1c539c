// Functions whose programs (the manifest's "functions") the runtime tests
// read back (not a test).

// A small fused MLP: the gate/up GEMM with the row scale and SwiGLU, the
// down GEMM with the residual and per-row partial sums of squares, their
// finish, the next norm's row scale (leftover linalg: a loop kernel), and
// x returned as well (a copy into its out-parameter: a loop kernel made of
// linalg.copy). Results become out-parameters 4, 5 and 6; h and the
// partials are temporaries.
func.func @mlp(%x: tensor<8x64xbf16>, %r: tensor<8xf32>, %wgu: tensor<256x64xbf16>,
               %wd: tensor<64x128xbf16>)
    -> (tensor<8x64xbf16>, tensor<8xf32>, tensor<8x64xbf16>) {
  %hE = tensor.empty() : tensor<8x128xbf16>
  %h = coda.gemm %x, %wgu transpose_b : tensor<8x64xbf16>, tensor<256x64xbf16>
      epilogue(%acc, row %rs = %r : tensor<8xf32>) outs(%hE : tensor<8x128xbf16>) {
    %s = arith.mulf %acc, %rs : f32
    %act = coda.pair_contract (%g, %u) = %s : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %act : !coda.pair<bf16>
  }
  %oE = tensor.empty() : tensor<8x64xbf16>
  %pE = tensor.empty() : tensor<8x2xf32>
  %out, %ss = coda.gemm %h, %wd transpose_b : tensor<8x128xbf16>, tensor<64x128xbf16>
      epilogue(%acc, tile %res = %x : tensor<8x64xbf16>)
      outs(%oE, %pE : tensor<8x64xbf16>, tensor<8x2xf32>) {
    %rf = arith.extf %res : bf16 to f32
    %v = arith.addf %acc, %rf : f32
    %sq = arith.mulf %v, %v : f32
    %p = coda.row_reduce sum %sq tile 32 : f32
    %vb = arith.truncf %v : f32 to bf16
    coda.yield %vb, %p : bf16, !coda.partial<f32>
  }
  %sE = tensor.empty() : tensor<8xf32>
  %sum = coda.reduce_partials sum row %ss : tensor<8x2xf32> outs(%sE : tensor<8xf32>)
  %rstd = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                          iterator_types = ["parallel"]}
      ins(%sum : tensor<8xf32>) outs(%sE : tensor<8xf32>) {
  ^bb0(%s: f32, %o: f32):
    %n = arith.constant 64.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %s, %n : f32
    %t = arith.addf %mean, %eps : f32
    %rs = math.rsqrt %t : f32
    linalg.yield %rs : f32
  } -> tensor<8xf32>
  return %out, %rstd, %x : tensor<8x64xbf16>, tensor<8xf32>, tensor<8x64xbf16>
}

// A GEMM on the last 4 of x's 8 rows: its step passes a view of argument 0
// that starts 4 rows (256 elements) in.
func.func @rows(%x: tensor<8x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<4x64xbf16> {
  %lo = tensor.extract_slice %x[4, 0] [4, 64] [1, 1] : tensor<8x64xbf16> to tensor<4x64xbf16>
  %e = tensor.empty() : tensor<4x64xbf16>
  %y = coda.gemm %lo, %w transpose_b : tensor<4x64xbf16>, tensor<64x64xbf16>
      epilogue(%acc) outs(%e : tensor<4x64xbf16>) {
    %b = arith.truncf %acc : f32 to bf16
    coda.yield %b : bf16
  }
  return %y : tensor<4x64xbf16>
}

// A result of dynamic shape: no caller can allocate it in advance, so the
// function has no program (its kernels launch one by one).
func.func @dynamic(%x: tensor<?x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<?x64xbf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x64xbf16>
  %e = tensor.empty(%m) : tensor<?x64xbf16>
  %y = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<64x64xbf16>
      epilogue(%acc) outs(%e : tensor<?x64xbf16>) {
    %b = arith.truncf %acc : f32 to bf16
    coda.yield %b : bf16
  }
  return %y : tensor<?x64xbf16>
}
