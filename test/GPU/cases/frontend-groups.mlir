// Statistics over groups of a GEMM's row as frontends write them (on the
// output viewed as [T, N / w, w]), which coda-compile fuses into the GEMMs'
// epilogues (test_frontend_groups.py): a blockwise 1 x 128 FP8 quantization
// of x W^T, and Qwen3's QK-norm (a bf16 projection, each head's RMSNorm in
// f32 with a per-head-dimension weight, rounded to bf16), and a MoE
// router over 60 experts (a whole row, one group of 64): the softmax's
// probabilities and the top-1 expert as torch.max(logits, -1) lowers.
// 200 tokens: no tile divides them.

#lhs = affine_map<(m, n, k) -> (m, k)>
#rhsT = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(m, n) -> (m, n)>
#id3 = affine_map<(m, g, e) -> (m, g, e)>
#group3 = affine_map<(m, g, e) -> (m, g, 0)>
#elem = affine_map<(m, g, e) -> (e)>
#keep = affine_map<(m, n) -> (m, 0)>
#row = affine_map<(m, n) -> (m)>

func.func @blockwise_quantize(%x: tensor<200x256xbf16>, %w: tensor<384x256xbf16>)
    -> (tensor<200x384xf8E4M3FN>, tensor<200x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<200x384xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<200x384xf32>) -> tensor<200x384xf32>
  %y = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %w : tensor<200x256xbf16>, tensor<384x256xbf16>) outs(%z : tensor<200x384xf32>) -> tensor<200x384xf32>
  %v = tensor.expand_shape %y [[0], [1, 2]] output_shape [200, 3, 128] : tensor<200x384xf32> into tensor<200x3x128xf32>
  %ea = tensor.empty() : tensor<200x3x1xf32>
  %za = linalg.fill ins(%zero : f32) outs(%ea : tensor<200x3x1xf32>) -> tensor<200x3x1xf32>
  %amax = linalg.generic {indexing_maps = [#id3, #group3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<200x3x128xf32>) outs(%za : tensor<200x3x1xf32>) {
  ^bb0(%a: f32, %m: f32):
    %abs = math.absf %a : f32
    %mx = arith.maximumf %m, %abs : f32
    linalg.yield %mx : f32
  } -> tensor<200x3x1xf32>
  %scale = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%amax : tensor<200x3x1xf32>) outs(%ea : tensor<200x3x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %eps = arith.constant 1.0e-12 : f32
    %fmax = arith.constant 448.0 : f32
    %floor = arith.maximumf %a, %eps : f32
    %s = arith.divf %floor, %fmax : f32
    linalg.yield %s : f32
  } -> tensor<200x3x1xf32>
  %eq = tensor.empty() : tensor<200x3x128xf8E4M3FN>
  %q = linalg.generic {indexing_maps = [#id3, #group3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %scale : tensor<200x3x128xf32>, tensor<200x3x1xf32>) outs(%eq : tensor<200x3x128xf8E4M3FN>) {
  ^bb0(%a: f32, %s: f32, %o: f8E4M3FN):
    %hi = arith.constant 448.0 : f32
    %lo = arith.constant -448.0 : f32
    %d = arith.divf %a, %s : f32
    %c1 = arith.maximumf %d, %lo : f32
    %c2 = arith.minimumf %c1, %hi : f32
    %c = arith.truncf %c2 : f32 to f8E4M3FN
    linalg.yield %c : f8E4M3FN
  } -> tensor<200x3x128xf8E4M3FN>
  %codes = tensor.collapse_shape %q [[0], [1, 2]] : tensor<200x3x128xf8E4M3FN> into tensor<200x384xf8E4M3FN>
  %scales = tensor.collapse_shape %scale [[0], [1, 2]] : tensor<200x3x1xf32> into tensor<200x3xf32>
  return %codes, %scales : tensor<200x384xf8E4M3FN>, tensor<200x3xf32>
}

func.func @qk_norm(%x: tensor<200x256xbf16>, %w: tensor<512x256xbf16>, %gamma: tensor<128xbf16>)
    -> tensor<200x512xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<200x512xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<200x512xf32>) -> tensor<200x512xf32>
  %y = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %w : tensor<200x256xbf16>, tensor<512x256xbf16>) outs(%z : tensor<200x512xf32>) -> tensor<200x512xf32>
  %eb = tensor.empty() : tensor<200x512xbf16>
  %yb = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<200x512xf32>) outs(%eb : tensor<200x512xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %r = arith.truncf %a : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<200x512xbf16>
  %v = tensor.expand_shape %yb [[0], [1, 2]] output_shape [200, 4, 128] : tensor<200x512xbf16> into tensor<200x4x128xbf16>
  %es = tensor.empty() : tensor<200x4x1xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<200x4x1xf32>) -> tensor<200x4x1xf32>
  %ss = linalg.generic {indexing_maps = [#id3, #group3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<200x4x128xbf16>) outs(%zs : tensor<200x4x1xf32>) {
  ^bb0(%a: bf16, %s: f32):
    %af = arith.extf %a : bf16 to f32
    %sq = arith.mulf %af, %af : f32
    %acc = arith.addf %s, %sq : f32
    linalg.yield %acc : f32
  } -> tensor<200x4x1xf32>
  %rstd = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ss : tensor<200x4x1xf32>) outs(%es : tensor<200x4x1xf32>) {
  ^bb0(%s: f32, %o: f32):
    %d = arith.constant 128.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %mean = arith.divf %s, %d : f32
    %me = arith.addf %mean, %eps : f32
    %r = math.rsqrt %me : f32
    linalg.yield %r : f32
  } -> tensor<200x4x1xf32>
  %eo = tensor.empty() : tensor<200x4x128xbf16>
  %n = linalg.generic {indexing_maps = [#id3, #group3, #elem, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %rstd, %gamma : tensor<200x4x128xbf16>, tensor<200x4x1xf32>, tensor<128xbf16>) outs(%eo : tensor<200x4x128xbf16>) {
  ^bb0(%a: bf16, %r: f32, %g: bf16, %o: bf16):
    %af = arith.extf %a : bf16 to f32
    %s = arith.mulf %af, %r : f32
    %sb = arith.truncf %s : f32 to bf16
    %p = arith.mulf %g, %sb : bf16
    linalg.yield %p : bf16
  } -> tensor<200x4x128xbf16>
  %out = tensor.collapse_shape %n [[0], [1, 2]] : tensor<200x4x128xbf16> into tensor<200x512xbf16>
  return %out : tensor<200x512xbf16>
}

func.func @router(%x: tensor<200x256xbf16>, %wr: tensor<60x256xbf16>)
    -> (tensor<200x60xf32>, tensor<200xi64>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<200x60xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<200x60xf32>) -> tensor<200x60xf32>
  %logits = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %wr : tensor<200x256xbf16>, tensor<60x256xbf16>) outs(%z : tensor<200x60xf32>) -> tensor<200x60xf32>
  %ek = tensor.empty() : tensor<200x1xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%ek : tensor<200x1xf32>) -> tensor<200x1xf32>
  %max = linalg.generic {indexing_maps = [#id2, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<200x60xf32>) outs(%fm : tensor<200x1xf32>) {
  ^bb0(%l: f32, %m: f32):
    %r = arith.maximumf %l, %m : f32
    linalg.yield %r : f32
  } -> tensor<200x1xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%ek : tensor<200x1xf32>) -> tensor<200x1xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #keep, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%logits, %max : tensor<200x60xf32>, tensor<200x1xf32>) outs(%fz : tensor<200x1xf32>) {
  ^bb0(%l: f32, %m: f32, %s: f32):
    %d = arith.subf %l, %m : f32
    %x1 = math.exp %d : f32
    %a = arith.addf %x1, %s : f32
    linalg.yield %a : f32
  } -> tensor<200x1xf32>
  %probs = linalg.generic {indexing_maps = [#id2, #keep, #keep, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max, %sum : tensor<200x60xf32>, tensor<200x1xf32>, tensor<200x1xf32>) outs(%e : tensor<200x60xf32>) {
  ^bb0(%l: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    %x1 = math.exp %d : f32
    %p = arith.divf %x1, %s : f32
    linalg.yield %p : f32
  } -> tensor<200x60xf32>
  %ev = tensor.empty() : tensor<200xf32>
  %fv = linalg.fill ins(%ninf : f32) outs(%ev : tensor<200xf32>) -> tensor<200xf32>
  %c0 = arith.constant 0 : i64
  %ei = tensor.empty() : tensor<200xi64>
  %fi = linalg.fill ins(%c0 : i64) outs(%ei : tensor<200xi64>) -> tensor<200xi64>
  %top:2 = linalg.generic {indexing_maps = [#id2, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<200x60xf32>) outs(%fv, %fi : tensor<200xf32>, tensor<200xi64>) {
  ^bb0(%new: f32, %old: f32, %oldi: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %m = arith.maximumf %new, %old : f32
    %gt = arith.cmpf ogt, %new, %old : f32
    %i = arith.select %gt, %ji, %oldi : i64
    linalg.yield %m, %i : f32, i64
  } -> (tensor<200xf32>, tensor<200xi64>)
  return %probs, %top#1 : tensor<200x60xf32>, tensor<200xi64>
}
