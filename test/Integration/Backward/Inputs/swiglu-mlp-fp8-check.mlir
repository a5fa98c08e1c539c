// The backward of coda_torch's FP8 MLP (swiglu_mlp_fp8.mlir, prepended) at
// 16 tokens, hidden 32, 24 features, against the textbook derivative.

func.func @fused(%dzq: tensor<16x32xf8E4M3FN>, %sdz: tensor<16xf32>,
                 %wdtq: tensor<24x32xf8E4M3FN>, %swdt: tensor<24xf32>,
                 %g: tensor<16x24xbf16>, %u: tensor<16x24xbf16>) -> tensor<16x48xbf16> {
  %a = tensor.cast %dzq : tensor<16x32xf8E4M3FN> to tensor<?x?xf8E4M3FN>
  %sa = tensor.cast %sdz : tensor<16xf32> to tensor<?xf32>
  %b = tensor.cast %wdtq : tensor<24x32xf8E4M3FN> to tensor<?x?xf8E4M3FN>
  %sb = tensor.cast %swdt : tensor<24xf32> to tensor<?xf32>
  %gd = tensor.cast %g : tensor<16x24xbf16> to tensor<?x?xbf16>
  %ud = tensor.cast %u : tensor<16x24xbf16> to tensor<?x?xbf16>
  %d = func.call @swiglu_mlp_fp8_backward(%a, %sa, %b, %sb, %gd, %ud)
      : (tensor<?x?xf8E4M3FN>, tensor<?xf32>, tensor<?x?xf8E4M3FN>, tensor<?xf32>,
         tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  %r = tensor.cast %d : tensor<?x?xbf16> to tensor<16x48xbf16>
  return %r : tensor<16x48xbf16>
}

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

func.func @reference(%dzq: tensor<16x32xf8E4M3FN>, %sdz: tensor<16xf32>,
                     %wdtq: tensor<24x32xf8E4M3FN>, %swdt: tensor<24xf32>,
                     %g: tensor<16x24xbf16>, %u: tensor<16x24xbf16>) -> tensor<16x48xbf16> {
  %zero = arith.constant 0.0 : f32
  // dh = (dz_q sdz) (Wd^T_q swdt)^T, dequantized before the product.
  %e = tensor.empty() : tensor<16x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x24xf32>) -> tensor<16x24xf32>
  %dh = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dzq, %wdtq : tensor<16x32xf8E4M3FN>, tensor<24x32xf8E4M3FN>) outs(%f : tensor<16x24xf32>) {
  ^bb0(%a: f8E4M3FN, %b: f8E4M3FN, %s: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %sa = tensor.extract %sdz[%m] : tensor<16xf32>
    %sb = tensor.extract %swdt[%n] : tensor<24xf32>
    %af = arith.extf %a : f8E4M3FN to f32
    %bf = arith.extf %b : f8E4M3FN to f32
    %as = arith.mulf %af, %sa : f32
    %bs = arith.mulf %bf, %sb : f32
    %p = arith.mulf %as, %bs : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<16x24xf32>
  // Column 2j: dh u silu'(g), silu'(g) = s + silu(g) (1 - s); 2j + 1: dh silu(g).
  %eo = tensor.empty() : tensor<16x48xbf16>
  %d = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%eo : tensor<16x48xbf16>) {
  ^bb0(%out: bf16):
    %m = linalg.index 0 : index
    %c = linalg.index 1 : index
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %one = arith.constant 1.0 : f32
    %j = arith.divui %c, %c2 : index
    %parity = arith.remui %c, %c2 : index
    %even = arith.cmpi eq, %parity, %c0 : index
    %gb = tensor.extract %g[%m, %j] : tensor<16x24xbf16>
    %ub = tensor.extract %u[%m, %j] : tensor<16x24xbf16>
    %dhv = tensor.extract %dh[%m, %j] : tensor<16x24xf32>
    %gv = arith.extf %gb : bf16 to f32
    %uv = arith.extf %ub : bf16 to f32
    %ng = arith.negf %gv : f32
    %ex = math.exp %ng : f32
    %den = arith.addf %one, %ex : f32
    %s = arith.divf %one, %den : f32
    %silu = arith.mulf %gv, %s : f32
    %oms = arith.subf %one, %s : f32
    %t = arith.mulf %silu, %oms : f32
    %dsilu = arith.addf %s, %t : f32
    %dhu = arith.mulf %dhv, %uv : f32
    %dg = arith.mulf %dhu, %dsilu : f32
    %du = arith.mulf %dhv, %silu : f32
    %v = arith.select %even, %dg, %du : f32
    %vb = arith.truncf %v : f32 to bf16
    linalg.yield %vb : bf16
  } -> tensor<16x48xbf16>
  return %d : tensor<16x48xbf16>
}
