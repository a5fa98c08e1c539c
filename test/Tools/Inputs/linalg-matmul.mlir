func.func @mm(%a: tensor<256x128xbf16>, %b: tensor<128x256xbf16>) -> tensor<256x256xbf16> {
  %e = tensor.empty() : tensor<256x256xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
  %m = linalg.matmul ins(%a, %b : tensor<256x128xbf16>, tensor<128x256xbf16>) outs(%f : tensor<256x256xf32>) -> tensor<256x256xf32>
  %o = tensor.empty() : tensor<256x256xbf16>
  %t = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<256x256xf32>) outs(%o : tensor<256x256xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %r = arith.truncf %x : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<256x256xbf16>
  return %t : tensor<256x256xbf16>
}
