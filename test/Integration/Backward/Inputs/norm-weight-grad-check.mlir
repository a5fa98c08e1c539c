// norm_weight_grad (coda_torch's program, prepended) at 16 tokens, 160
// weight rows (two row tiles of gamma's column partials, the second
// partial) and hidden 24, against the fold's textbook derivative:
// dW = (dAcc^T x) diag(gamma), dgamma = sum_n (dAcc^T x)[n, :] W[n, :].

func.func @fused(%dacc: tensor<16x160xbf16>, %x: tensor<16x24xbf16>, %w: tensor<160x24xbf16>,
                 %gamma: tensor<24xbf16>) -> (tensor<160x24xbf16>, tensor<24xf32>) {
  %a = tensor.cast %dacc : tensor<16x160xbf16> to tensor<?x?xbf16>
  %b = tensor.cast %x : tensor<16x24xbf16> to tensor<?x?xbf16>
  %wd = tensor.cast %w : tensor<160x24xbf16> to tensor<?x?xbf16>
  %gd = tensor.cast %gamma : tensor<24xbf16> to tensor<?xbf16>
  %dw, %dg = func.call @norm_weight_grad(%a, %b, %wd, %gd)
      : (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?xbf16>)
        -> (tensor<?x?xbf16>, tensor<?xf32>)
  %rw = tensor.cast %dw : tensor<?x?xbf16> to tensor<160x24xbf16>
  %rg = tensor.cast %dg : tensor<?xf32> to tensor<24xf32>
  return %rw, %rg : tensor<160x24xbf16>, tensor<24xf32>
}

#tn = affine_map<(n, k, t) -> (t, n)>
#tk = affine_map<(n, k, t) -> (t, k)>
#nk3 = affine_map<(n, k, t) -> (n, k)>
#nk = affine_map<(n, k) -> (n, k)>
#k = affine_map<(n, k) -> (k)>

func.func @reference(%dacc: tensor<16x160xbf16>, %x: tensor<16x24xbf16>, %w: tensor<160x24xbf16>,
                     %gamma: tensor<24xbf16>) -> (tensor<160x24xbf16>, tensor<24xf32>) {
  %zero = arith.constant 0.0 : f32
  // dW' = dAcc^T x, the gradient of the folded weight.
  %e = tensor.empty() : tensor<160x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<160x24xf32>) -> tensor<160x24xf32>
  %dwf = linalg.generic {indexing_maps = [#tn, #tk, #nk3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %x : tensor<16x160xbf16>, tensor<16x24xbf16>) outs(%f : tensor<160x24xf32>) {
  ^bb0(%a: bf16, %b: bf16, %s: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<160x24xf32>
  // W' = W diag(gamma): dW = dW' diag(gamma).
  %eo = tensor.empty() : tensor<160x24xbf16>
  %dw = linalg.generic {indexing_maps = [#nk, #k, #nk], iterator_types = ["parallel", "parallel"]}
      ins(%dwf, %gamma : tensor<160x24xf32>, tensor<24xbf16>) outs(%eo : tensor<160x24xbf16>) {
  ^bb0(%d: f32, %g: bf16, %out: bf16):
    %gf = arith.extf %g : bf16 to f32
    %v = arith.mulf %d, %gf : f32
    %vb = arith.truncf %v : f32 to bf16
    linalg.yield %vb : bf16
  } -> tensor<160x24xbf16>
  // dgamma[k] = sum_n dW'[n, k] W[n, k].
  %eg = tensor.empty() : tensor<24xf32>
  %fg = linalg.fill ins(%zero : f32) outs(%eg : tensor<24xf32>) -> tensor<24xf32>
  %dg = linalg.generic {indexing_maps = [#nk, #nk, #k], iterator_types = ["reduction", "parallel"]}
      ins(%dwf, %w : tensor<160x24xf32>, tensor<160x24xbf16>) outs(%fg : tensor<24xf32>) {
  ^bb0(%d: f32, %wv: bf16, %s: f32):
    %wf = arith.extf %wv : bf16 to f32
    %p = arith.mulf %d, %wf : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<24xf32>
  return %dw, %dg : tensor<160x24xbf16>, tensor<24xf32>
}
