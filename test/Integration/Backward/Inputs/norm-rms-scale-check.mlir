// The check of norm-rms-scale.mlir (appended to its derived functions): rs
// computed from x as the caller does (eps 1e-5); @fused runs the backward
// whose x gradient holds the norm's term, @reference the one without the
// attribute, adding x drs rs^3 (-1 / 8) to its dx.

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>

func.func @rms_scale(%x: tensor<7x8xf32>) -> tensor<7xf32> {
  %zero = arith.constant 0.0 : f32
  %rE = tensor.empty() : tensor<7xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%rE : tensor<7xf32>) -> tensor<7xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<7x8xf32>) outs(%s0 : tensor<7xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<7xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%ss : tensor<7xf32>) outs(%rE : tensor<7xf32>) {
  ^bb0(%s: f32, %out: f32):
    %n = arith.constant 8.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %s, %n : f32
    %t = arith.addf %mean, %eps : f32
    %r = math.rsqrt %t : f32
    linalg.yield %r : f32
  } -> tensor<7xf32>
  return %rs : tensor<7xf32>
}

func.func @fused(%x: tensor<7x8xf32>, %wgu: tensor<10x8xf32>, %wd: tensor<8x5xf32>,
                 %dz: tensor<7x8xf32>, %dss: tensor<7xf32>)
    -> (tensor<7x8xf32>, tensor<10x8xf32>, tensor<8x5xf32>) {
  %rs = func.call @rms_scale(%x) : (tensor<7x8xf32>) -> tensor<7xf32>
  %dx, %dwgu, %dwd = func.call @backward(%x, %rs, %wgu, %wd, %dz, %dss)
      : (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>, tensor<7x8xf32>, tensor<7xf32>)
     -> (tensor<7x8xf32>, tensor<10x8xf32>, tensor<8x5xf32>)
  return %dx, %dwgu, %dwd : tensor<7x8xf32>, tensor<10x8xf32>, tensor<8x5xf32>
}

func.func @reference(%x: tensor<7x8xf32>, %wgu: tensor<10x8xf32>, %wd: tensor<8x5xf32>,
                     %dz: tensor<7x8xf32>, %dss: tensor<7xf32>)
    -> (tensor<7x8xf32>, tensor<10x8xf32>, tensor<8x5xf32>) {
  %rs = func.call @rms_scale(%x) : (tensor<7x8xf32>) -> tensor<7xf32>
  %dx, %drs, %dwgu, %dwd = func.call @backward_plain(%x, %rs, %wgu, %wd, %dz, %dss)
      : (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>, tensor<7x8xf32>, tensor<7xf32>)
     -> (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>)
  // d rs / d x[m, n] = -rs[m]^3 x[m, n] / 8.
  %e = tensor.empty() : tensor<7x8xf32>
  %total = linalg.generic {indexing_maps = [#id, #id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dx, %x, %drs, %rs : tensor<7x8xf32>, tensor<7x8xf32>, tensor<7xf32>, tensor<7xf32>)
      outs(%e : tensor<7x8xf32>) {
  ^bb0(%g: f32, %v: f32, %d: f32, %r: f32, %out: f32):
    %n = arith.constant 8.0 : f32
    %r2 = arith.mulf %r, %r : f32
    %r3 = arith.mulf %r2, %r : f32
    %c = arith.mulf %d, %r3 : f32
    %cv = arith.mulf %c, %v : f32
    %t = arith.divf %cv, %n : f32
    %s = arith.subf %g, %t : f32
    linalg.yield %s : f32
  } -> tensor<7x8xf32>
  return %total, %dwgu, %dwd : tensor<7x8xf32>, tensor<10x8xf32>, tensor<8x5xf32>
}
