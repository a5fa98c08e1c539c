// Gemma-2's soft-capped LM head + cross-entropy (logit = 30 tanh(x / 30),
// written as a model writes it: arith.divf and math.tanh, no fast-math
// flags), per-token loss with ignore index -100, hidden 2048, vocabulary
// 32768, 16384 tokens. Beside it: the cap's division as a product by 1/30
// (what the division costs), the cap under afn, and the head without the cap;
// last, the loss as a frontend lowers it (the cap in its own elementwise op,
// the row max, the sum of exponentials, the target's logit gathered from the
// capped logits), fused by coda-compile.
#row = affine_map<(m) -> (m)>

func.func @softcap_lm_head(%x: tensor<16384x2048xbf16>, %w: tensor<32768x2048xbf16>,
                %t: tensor<16384xi64>) -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  %pE = tensor.empty() : tensor<16384x256xf32>
  %vE = tensor.empty() : tensor<16384xf32>
  %picked0 = linalg.fill ins(%zero : f32) outs(%vE : tensor<16384xf32>) -> tensor<16384xf32>
  %lp, %picked = coda.gemm %x, %w transpose_b : tensor<16384x2048xbf16>, tensor<32768x2048xbf16>
      epilogue(%acc, row %target = %t : tensor<16384xi64>)
      outs(%pE, %picked0 : tensor<16384x256xf32>, tensor<16384xf32>) {
    %cap = arith.constant 30.0 : f32
    %s = arith.divf %acc, %cap : f32
    %th = math.tanh %s : f32
    %logit = arith.mulf %th, %cap : f32
    %l = coda.row_reduce logsumexp %logit tile 128 : f32
    %p = coda.row_select %logit at %target : f32, i64
    coda.yield %l, %p : !coda.partial<f32>, !coda.row<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<16384x256xf32> outs(%vE : tensor<16384xf32>)
  %loss = linalg.generic {indexing_maps = [#row, #row, #row, #row], iterator_types = ["parallel"]}
      ins(%lse, %picked, %t : tensor<16384xf32>, tensor<16384xf32>, tensor<16384xi64>)
      outs(%vE : tensor<16384xf32>) {
  ^bb0(%a: f32, %b: f32, %i: i64, %o: f32):
    %ignore = arith.constant -100 : i64
    %valid = arith.cmpi ne, %i, %ignore : i64
    %d = arith.subf %a, %b : f32
    %z = arith.constant 0.0 : f32
    %r = arith.select %valid, %d, %z : f32
    linalg.yield %r : f32
  } -> tensor<16384xf32>
  return %loss : tensor<16384xf32>
}

func.func @softcap_by_product(%x: tensor<16384x2048xbf16>, %w: tensor<32768x2048xbf16>,
                %t: tensor<16384xi64>) -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  %pE = tensor.empty() : tensor<16384x256xf32>
  %vE = tensor.empty() : tensor<16384xf32>
  %picked0 = linalg.fill ins(%zero : f32) outs(%vE : tensor<16384xf32>) -> tensor<16384xf32>
  %lp, %picked = coda.gemm %x, %w transpose_b : tensor<16384x2048xbf16>, tensor<32768x2048xbf16>
      epilogue(%acc, row %target = %t : tensor<16384xi64>)
      outs(%pE, %picked0 : tensor<16384x256xf32>, tensor<16384xf32>) {
    %cap = arith.constant 30.0 : f32
    %inv = arith.constant 0.0333333351 : f32
    %s = arith.mulf %acc, %inv : f32
    %th = math.tanh %s : f32
    %logit = arith.mulf %th, %cap : f32
    %l = coda.row_reduce logsumexp %logit tile 128 : f32
    %p = coda.row_select %logit at %target : f32, i64
    coda.yield %l, %p : !coda.partial<f32>, !coda.row<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<16384x256xf32> outs(%vE : tensor<16384xf32>)
  %loss = linalg.generic {indexing_maps = [#row, #row, #row, #row], iterator_types = ["parallel"]}
      ins(%lse, %picked, %t : tensor<16384xf32>, tensor<16384xf32>, tensor<16384xi64>)
      outs(%vE : tensor<16384xf32>) {
  ^bb0(%a: f32, %b: f32, %i: i64, %o: f32):
    %ignore = arith.constant -100 : i64
    %valid = arith.cmpi ne, %i, %ignore : i64
    %d = arith.subf %a, %b : f32
    %z = arith.constant 0.0 : f32
    %r = arith.select %valid, %d, %z : f32
    linalg.yield %r : f32
  } -> tensor<16384xf32>
  return %loss : tensor<16384xf32>
}

func.func @softcap_afn(%x: tensor<16384x2048xbf16>, %w: tensor<32768x2048xbf16>,
                %t: tensor<16384xi64>) -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  %pE = tensor.empty() : tensor<16384x256xf32>
  %vE = tensor.empty() : tensor<16384xf32>
  %picked0 = linalg.fill ins(%zero : f32) outs(%vE : tensor<16384xf32>) -> tensor<16384xf32>
  %lp, %picked = coda.gemm %x, %w transpose_b : tensor<16384x2048xbf16>, tensor<32768x2048xbf16>
      epilogue(%acc, row %target = %t : tensor<16384xi64>)
      outs(%pE, %picked0 : tensor<16384x256xf32>, tensor<16384xf32>) {
    %cap = arith.constant 30.0 : f32
    %s = arith.divf %acc, %cap fastmath<afn> : f32
    %th = math.tanh %s fastmath<afn> : f32
    %logit = arith.mulf %th, %cap : f32
    %l = coda.row_reduce logsumexp %logit tile 128 : f32
    %p = coda.row_select %logit at %target : f32, i64
    coda.yield %l, %p : !coda.partial<f32>, !coda.row<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<16384x256xf32> outs(%vE : tensor<16384xf32>)
  %loss = linalg.generic {indexing_maps = [#row, #row, #row, #row], iterator_types = ["parallel"]}
      ins(%lse, %picked, %t : tensor<16384xf32>, tensor<16384xf32>, tensor<16384xi64>)
      outs(%vE : tensor<16384xf32>) {
  ^bb0(%a: f32, %b: f32, %i: i64, %o: f32):
    %ignore = arith.constant -100 : i64
    %valid = arith.cmpi ne, %i, %ignore : i64
    %d = arith.subf %a, %b : f32
    %z = arith.constant 0.0 : f32
    %r = arith.select %valid, %d, %z : f32
    linalg.yield %r : f32
  } -> tensor<16384xf32>
  return %loss : tensor<16384xf32>
}

func.func @lm_head(%x: tensor<16384x2048xbf16>, %w: tensor<32768x2048xbf16>,
                %t: tensor<16384xi64>) -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  %pE = tensor.empty() : tensor<16384x256xf32>
  %vE = tensor.empty() : tensor<16384xf32>
  %picked0 = linalg.fill ins(%zero : f32) outs(%vE : tensor<16384xf32>) -> tensor<16384xf32>
  %lp, %picked = coda.gemm %x, %w transpose_b : tensor<16384x2048xbf16>, tensor<32768x2048xbf16>
      epilogue(%acc, row %target = %t : tensor<16384xi64>)
      outs(%pE, %picked0 : tensor<16384x256xf32>, tensor<16384xf32>) {
    %nz = arith.constant -0.0 : f32
    %logit = arith.addf %acc, %nz : f32
    %l = coda.row_reduce logsumexp %logit tile 128 : f32
    %p = coda.row_select %logit at %target : f32, i64
    coda.yield %l, %p : !coda.partial<f32>, !coda.row<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<16384x256xf32> outs(%vE : tensor<16384xf32>)
  %loss = linalg.generic {indexing_maps = [#row, #row, #row, #row], iterator_types = ["parallel"]}
      ins(%lse, %picked, %t : tensor<16384xf32>, tensor<16384xf32>, tensor<16384xi64>)
      outs(%vE : tensor<16384xf32>) {
  ^bb0(%a: f32, %b: f32, %i: i64, %o: f32):
    %ignore = arith.constant -100 : i64
    %valid = arith.cmpi ne, %i, %ignore : i64
    %d = arith.subf %a, %b : f32
    %z = arith.constant 0.0 : f32
    %r = arith.select %valid, %d, %z : f32
    linalg.yield %r : f32
  } -> tensor<16384xf32>
  return %loss : tensor<16384xf32>
}

#frows = affine_map<(m, n) -> (m)>
#fid = affine_map<(m, n) -> (m, n)>
#frow = affine_map<(m) -> (m)>

func.func @softcap_frontend(%h: tensor<16384x2048xbf16>, %w: tensor<32768x2048xbf16>,
                     %drawn: tensor<16384xi64>)
    -> tensor<16384xf32> {
  %zero = arith.constant 0.0 : f32
  // Targets: a class, or the ignore index -100 (drawn negative).
  %te = tensor.empty() : tensor<16384xi64>
  %t = linalg.generic {indexing_maps = [#frow, #frow], iterator_types = ["parallel"]}
      ins(%drawn : tensor<16384xi64>) outs(%te : tensor<16384xi64>) {
  ^bb0(%d: i64, %o: i64):
    %c0 = arith.constant 0 : i64
    %ignore = arith.constant -100 : i64
    %neg = arith.cmpi slt, %d, %c0 : i64
    %v = arith.select %neg, %ignore, %d : i64
    linalg.yield %v : i64
  } -> tensor<16384xi64>
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<16384x32768xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<16384x32768xf32>) -> tensor<16384x32768xf32>
  %wt0 = tensor.empty() : tensor<2048x32768xbf16>
  %wt = linalg.transpose ins(%w : tensor<32768x2048xbf16>) outs(%wt0 : tensor<2048x32768xbf16>) permutation = [1, 0]
  %raw = linalg.matmul ins(%h, %wt : tensor<16384x2048xbf16>, tensor<2048x32768xbf16>) outs(%z : tensor<16384x32768xf32>) -> tensor<16384x32768xf32>
  %ce = tensor.empty() : tensor<16384x32768xf32>
  %capped = linalg.generic {indexing_maps = [#fid, #fid], iterator_types = ["parallel", "parallel"]}
      ins(%raw : tensor<16384x32768xf32>) outs(%ce : tensor<16384x32768xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c30 = arith.constant 30.0 : f32
    %q = arith.divf %x, %c30 : f32
    %th = math.tanh %q : f32
    %y = arith.mulf %th, %c30 : f32
    linalg.yield %y : f32
  } -> tensor<16384x32768xf32>
  %re = tensor.empty() : tensor<16384xf32>
  %mx0 = linalg.fill ins(%ninf : f32) outs(%re : tensor<16384xf32>) -> tensor<16384xf32>
  %mx = linalg.generic {indexing_maps = [#fid, #frows], iterator_types = ["parallel", "reduction"]}
      ins(%capped : tensor<16384x32768xf32>) outs(%mx0 : tensor<16384xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.maximumf %acc, %x : f32
    linalg.yield %m : f32
  } -> tensor<16384xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%re : tensor<16384xf32>) -> tensor<16384xf32>
  %se = linalg.generic {indexing_maps = [#fid, #frows, #frows], iterator_types = ["parallel", "reduction"]}
      ins(%capped, %mx : tensor<16384x32768xf32>, tensor<16384xf32>) outs(%s0 : tensor<16384xf32>) {
  ^bb0(%x: f32, %m: f32, %acc: f32):
    %d = arith.subf %x, %m : f32
    %ex = math.exp %d : f32
    %s = arith.addf %acc, %ex : f32
    linalg.yield %s : f32
  } -> tensor<16384xf32>
  // Per token: lse - logit[target] where the target is not -100.
  %loss = linalg.generic {indexing_maps = [#frow, #frow, #frow, #frow], iterator_types = ["parallel"]}
      ins(%t, %mx, %se : tensor<16384xi64>, tensor<16384xf32>, tensor<16384xf32>) outs(%re : tensor<16384xf32>) {
  ^bb0(%target: i64, %m: f32, %s: f32, %o: f32):
    %row = linalg.index 0 : index
    %ignore = arith.constant -100 : i64
    %c0 = arith.constant 0 : i64
    %valid = arith.cmpi ne, %target, %ignore : i64
    %safe = arith.select %valid, %target, %c0 : i64
    %col = arith.index_cast %safe : i64 to index
    %x = tensor.extract %capped[%row, %col] : tensor<16384x32768xf32>
    %lg = math.log %s : f32
    %lse = arith.addf %lg, %m : f32
    %l = arith.subf %lse, %x : f32
    %r = arith.select %valid, %l, %zero : f32
    linalg.yield %r : f32
  } -> tensor<16384xf32>
  return %loss : tensor<16384xf32>
}
