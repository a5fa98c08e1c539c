// @fused: linear_norm_qkv_rope_bias's hand-written backward (the program,
// prepended) with drs = (its row sums) / rs, dW = dAcc^T x from its dAcc
// and db rounded to the bias's type; @reference is the backward
// --coda-derive-backward derives from the same forward. One head of two
// rotated.

#m = affine_map<(m) -> (m)>
#tn = affine_map<(n, k, t) -> (t, n)>
#tk = affine_map<(n, k, t) -> (t, k)>
#nk = affine_map<(n, k, t) -> (n, k)>

func.func @fused(%x: tensor<?x?xbf16>, %rs: tensor<?xf32>, %w: tensor<?x?xbf16>,
                 %b: tensor<?xbf16>, %cos: tensor<?x128xbf16>, %sin: tensor<?x128xbf16>,
                 %nr: i64 {coda_test.range = array<i64: 1, 2>}, %dy: tensor<?x?xbf16>)
    -> (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %dacc, %dx, %sums, %dbf = func.call @linear_norm_qkv_rope_bias_backward(%x, %rs, %w, %cos, %sin, %nr, %dy)
      : (tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?x128xbf16>,
         tensor<?x128xbf16>, i64, tensor<?x?xbf16>)
        -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>)
  %t = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %e = tensor.empty(%t) : tensor<?xf32>
  %drs = linalg.generic {indexing_maps = [#m, #m, #m], iterator_types = ["parallel"]}
      ins(%sums, %rs : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%s: f32, %v: f32, %o: f32):
    %q = arith.divf %s, %v : f32
    linalg.yield %q : f32
  } -> tensor<?xf32>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %h = tensor.dim %w, %c1 : tensor<?x?xbf16>
  %zero = arith.constant 0.0 : f32
  %ew = tensor.empty(%n, %h) : tensor<?x?xf32>
  %fw = linalg.fill ins(%zero : f32) outs(%ew : tensor<?x?xf32>) -> tensor<?x?xf32>
  %dwf = linalg.generic {indexing_maps = [#tn, #tk, #nk], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %x : tensor<?x?xbf16>, tensor<?x?xbf16>) outs(%fw : tensor<?x?xf32>) {
  ^bb0(%a: bf16, %xe: bf16, %s: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %xe : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %r = arith.addf %s, %p : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %eb = tensor.empty(%n, %h) : tensor<?x?xbf16>
  %dw = linalg.generic {indexing_maps = [affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n, k)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%dwf : tensor<?x?xf32>) outs(%eb : tensor<?x?xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %r = arith.truncf %v : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<?x?xbf16>
  %nb = tensor.dim %b, %c0 : tensor<?xbf16>
  %ebb = tensor.empty(%nb) : tensor<?xbf16>
  %db = linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel"]}
      ins(%dbf : tensor<?xf32>) outs(%ebb : tensor<?xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %vb = arith.truncf %v : f32 to bf16
    linalg.yield %vb : bf16
  } -> tensor<?xbf16>
  return %dx, %drs, %dw, %db : tensor<?x?xbf16>, tensor<?xf32>, tensor<?x?xbf16>, tensor<?xbf16>
}
