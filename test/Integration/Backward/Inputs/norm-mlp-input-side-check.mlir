// @fused: norm_swiglu_mlp's forward and hand-written backward (the program,
// prepended) at 16 tokens, hidden 32 and 48 features, with drs = (its row
// sums) / rs and dW_gate_up = dAcc^T x from its dAcc. @reference is the
// backward --coda-derive-backward derives (recomputing) from
// @mlp_forward, the same MLP block written as the textbook composition.

#tn = affine_map<(n, k, t) -> (t, n)>
#tk = affine_map<(n, k, t) -> (t, k)>
#nk = affine_map<(n, k, t) -> (n, k)>
#m = affine_map<(m) -> (m)>
#id = affine_map<(n, k) -> (n, k)>

func.func @mlp_forward(%x: tensor<16x32xbf16>, %rs: tensor<16xf32>, %wgu: tensor<96x32xbf16>,
                       %wd: tensor<32x48xbf16>) -> (tensor<16x32xbf16>, tensor<16xf32>) {
  %hE = tensor.empty() : tensor<16x48xbf16>
  %h = coda.gemm %x, %wgu transpose_b : tensor<16x32xbf16>, tensor<96x32xbf16>
      epilogue(%acc, row %r = %rs : tensor<16xf32>) outs(%hE : tensor<16x48xbf16>) {
    %p = coda.pair_contract (%ga, %ua) = %acc, (%r0, %r1) = %r : f32, f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %g = arith.mulf %ga, %r0 : f32
      %u = arith.mulf %ua, %r1 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %d = arith.addf %one, %e : f32
      %silu = arith.divf %g, %d : f32
      %y = arith.mulf %silu, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %p : !coda.pair<bf16>
  }
  %zE = tensor.empty() : tensor<16x32xbf16>
  %pE = tensor.empty() : tensor<16x1xf32>
  %sE = tensor.empty() : tensor<16xf32>
  %z, %pz = coda.gemm %h, %wd transpose_b : tensor<16x48xbf16>, tensor<32x48xbf16>
      epilogue(%acc, tile %xv = %x : tensor<16x32xbf16>) outs(%zE, %pE : tensor<16x32xbf16>, tensor<16x1xf32>) {
    %xf = arith.extf %xv : bf16 to f32
    %v = arith.addf %acc, %xf : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 128 : f32
    %vb = arith.truncf %v : f32 to bf16
    coda.yield %vb, %part : bf16, !coda.partial<f32>
  }
  %ss = coda.reduce_partials sum row %pz : tensor<16x1xf32> outs(%sE : tensor<16xf32>)
  return %z, %ss : tensor<16x32xbf16>, tensor<16xf32>
}

func.func @fused(%x: tensor<16x32xbf16>, %rs: tensor<16xf32>, %wgu: tensor<96x32xbf16>,
                 %wd: tensor<32x48xbf16>, %dz: tensor<16x32xbf16>, %dss: tensor<16xf32>)
    -> (tensor<16x32xbf16>, tensor<16xf32>, tensor<96x32xbf16>, tensor<32x48xbf16>) {
  %xd = tensor.cast %x : tensor<16x32xbf16> to tensor<?x?xbf16>
  %rd = tensor.cast %rs : tensor<16xf32> to tensor<?xf32>
  %wgud = tensor.cast %wgu : tensor<96x32xbf16> to tensor<?x?xbf16>
  %wdd = tensor.cast %wd : tensor<32x48xbf16> to tensor<?x?xbf16>
  %dzd = tensor.cast %dz : tensor<16x32xbf16> to tensor<?x?xbf16>
  %dssd = tensor.cast %dss : tensor<16xf32> to tensor<?xf32>
  %z, %ss, %h, %g, %u = func.call @norm_swiglu_mlp(%xd, %rd, %wgud, %wdd)
      : (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>)
        -> (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>)
  %dx, %sums, %dacc, %dwd = func.call @norm_swiglu_mlp_backward(%xd, %rd, %wgud, %wdd, %h, %g, %u, %z, %dzd, %dssd)
      : (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>,
         tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xf32>)
        -> (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x?xbf16>)
  %dxs = tensor.cast %dx : tensor<?x?xbf16> to tensor<16x32xbf16>
  %sumss = tensor.cast %sums : tensor<?xf32> to tensor<16xf32>
  %daccs = tensor.cast %dacc : tensor<?x?xbf16> to tensor<16x96xbf16>
  %dwds = tensor.cast %dwd : tensor<?x?xbf16> to tensor<32x48xbf16>
  %e = tensor.empty() : tensor<16xf32>
  %drs = linalg.generic {indexing_maps = [#m, #m, #m], iterator_types = ["parallel"]}
      ins(%sumss, %rs : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%s: f32, %v: f32, %o: f32):
    %q = arith.divf %s, %v : f32
    linalg.yield %q : f32
  } -> tensor<16xf32>
  %zero = arith.constant 0.0 : f32
  %ew = tensor.empty() : tensor<96x32xf32>
  %fw = linalg.fill ins(%zero : f32) outs(%ew : tensor<96x32xf32>) -> tensor<96x32xf32>
  %dwf = linalg.generic {indexing_maps = [#tn, #tk, #nk], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%daccs, %x : tensor<16x96xbf16>, tensor<16x32xbf16>) outs(%fw : tensor<96x32xf32>) {
  ^bb0(%a: bf16, %b: bf16, %s: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %r = arith.addf %s, %p : f32
    linalg.yield %r : f32
  } -> tensor<96x32xf32>
  %eb = tensor.empty() : tensor<96x32xbf16>
  %dwgu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dwf : tensor<96x32xf32>) outs(%eb : tensor<96x32xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %b = arith.truncf %v : f32 to bf16
    linalg.yield %b : bf16
  } -> tensor<96x32xbf16>
  return %dxs, %drs, %dwgu, %dwds : tensor<16x32xbf16>, tensor<16xf32>, tensor<96x32xbf16>, tensor<32x48xbf16>
}
