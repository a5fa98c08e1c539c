// RUN: %differential %s | %cpu-runner | FileCheck %s

// Online log-sum-exp and max as per-tile row partials (tile 32 over N = 70, a
// short last tile), finished by coda.reduce_partials, against a two-pass
// logsumexp (max, then sum of exp(x - max)) over whole rows.

// CHECK: coda-check ok: 25 elements
// CHECK: coda-check ok: 75 elements
// CHECK: coda-check ok: 25 elements

func.func @fused(%a: tensor<25x12xf32>, %b: tensor<12x70xf32>, %lse0: tensor<25x3xf32>, %max0: tensor<25x3xf32>)
    -> (tensor<25xf32>, tensor<25x3xf32>, tensor<25xf32>) {
  %four = arith.constant 4.0 : f32
  %lse_p, %max_p = coda.gemm %a, %b : tensor<25x12xf32>, tensor<12x70xf32>
      epilogue(%acc, scalar %k = %four : f32) outs(%lse0, %max0 : tensor<25x3xf32>, tensor<25x3xf32>) {
    // Spread the logits so that exp() of the unscaled values would matter.
    %x = arith.mulf %acc, %k : f32
    %l = coda.row_reduce logsumexp %x tile 32 : f32
    %m = coda.row_reduce max %x tile 32 : f32
    coda.yield %l, %m : !coda.partial<f32>, !coda.partial<f32>
  }
  %e = tensor.empty() : tensor<25xf32>
  %lse = coda.reduce_partials logsumexp row %lse_p : tensor<25x3xf32> outs(%e : tensor<25xf32>)
  %max = coda.reduce_partials max row %max_p : tensor<25x3xf32> outs(%e : tensor<25xf32>)
  return %lse, %max_p, %max : tensor<25xf32>, tensor<25x3xf32>, tensor<25xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>

func.func @reference(%a: tensor<25x12xf32>, %b: tensor<12x70xf32>) -> (tensor<25xf32>, tensor<25x3xf32>, tensor<25xf32>) {
  %zero = arith.constant 0.0 : f32
  %four = arith.constant 4.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<25x70xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<25x70xf32>) -> tensor<25x70xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<25x12xf32>, tensor<12x70xf32>) outs(%z : tensor<25x70xf32>) -> tensor<25x70xf32>
  %k = linalg.fill ins(%four : f32) outs(%e : tensor<25x70xf32>) -> tensor<25x70xf32>
  %x = linalg.mul ins(%mm, %k : tensor<25x70xf32>, tensor<25x70xf32>) outs(%e : tensor<25x70xf32>) -> tensor<25x70xf32>
  %re = tensor.empty() : tensor<25xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%re : tensor<25xf32>) -> tensor<25xf32>
  %max = linalg.reduce { arith.maximumf } ins(%x : tensor<25x70xf32>) outs(%m0 : tensor<25xf32>) dimensions = [1]
  %s0 = linalg.fill ins(%zero : f32) outs(%re : tensor<25xf32>) -> tensor<25xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %max : tensor<25x70xf32>, tensor<25xf32>) outs(%s0 : tensor<25xf32>) {
  ^bb0(%v: f32, %mx: f32, %acc: f32):
    %d = arith.subf %v, %mx : f32
    %ex = math.exp %d : f32
    %s = arith.addf %acc, %ex : f32
    linalg.yield %s : f32
  } -> tensor<25xf32>
  %lse = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%sum, %max : tensor<25xf32>, tensor<25xf32>) outs(%re : tensor<25xf32>) {
  ^bb0(%s: f32, %mx: f32, %out: f32):
    %l = math.log %s : f32
    %r = arith.addf %l, %mx : f32
    linalg.yield %r : f32
  } -> tensor<25xf32>
  // Per-tile maxima: pad with -inf to 96 columns and reduce tiles of 32.
  %padded = tensor.pad %x low[0, 0] high[0, 26] {
  ^bb0(%i: index, %j: index):
    tensor.yield %ninf : f32
  } : tensor<25x70xf32> to tensor<25x96xf32>
  %tiles = tensor.expand_shape %padded [[0], [1, 2]] output_shape [25, 3, 32] : tensor<25x96xf32> into tensor<25x3x32xf32>
  %pe = tensor.empty() : tensor<25x3xf32>
  %p0 = linalg.fill ins(%ninf : f32) outs(%pe : tensor<25x3xf32>) -> tensor<25x3xf32>
  %pmax = linalg.reduce { arith.maximumf } ins(%tiles : tensor<25x3x32xf32>) outs(%p0 : tensor<25x3xf32>) dimensions = [2]
  return %lse, %pmax, %max : tensor<25xf32>, tensor<25x3xf32>, tensor<25xf32>
}
