// RUN: %differential %s | %cpu-runner | FileCheck %s

// Dynamic shapes (the pairwise loop checks at run time that N is even) and
// M = 1, with a pair contraction and row partials of a tile no N divides.

// CHECK: coda-check ok: 7 elements
// CHECK: coda-check ok: 2 elements

func.func @fused(%a: tensor<1x9xf32>, %b: tensor<9x14xf32>) -> (tensor<1x7xf32>, tensor<1x2xf32>) {
  %ad = tensor.cast %a : tensor<1x9xf32> to tensor<?x?xf32>
  %bd = tensor.cast %b : tensor<9x14xf32> to tensor<?x?xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %ad, %c0 : tensor<?x?xf32>
  %n = tensor.dim %bd, %c1 : tensor<?x?xf32>
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c7 = arith.constant 7 : index
  %half = arith.divui %n, %c2 : index
  %tiles = arith.ceildivui %n, %c8 : index
  %h0 = tensor.empty(%m, %half) : tensor<?x?xf32>
  %p0 = tensor.empty(%m, %tiles) : tensor<?x?xf32>
  %h, %p = coda.gemm %ad, %bd : tensor<?x?xf32>, tensor<?x?xf32> epilogue(%acc) outs(%h0, %p0 : tensor<?x?xf32>, tensor<?x?xf32>) {
    %pc = coda.pair_contract (%e, %o) = %acc : f32 -> !coda.pair<f32> {
      %s = arith.mulf %e, %o : f32
      coda.yield %s : f32
    }
    %part = coda.row_reduce sum %acc tile 8 : f32
    coda.yield %pc, %part : !coda.pair<f32>, !coda.partial<f32>
  }
  %hs = tensor.cast %h : tensor<?x?xf32> to tensor<1x7xf32>
  %ps = tensor.cast %p : tensor<?x?xf32> to tensor<1x2xf32>
  return %hs, %ps : tensor<1x7xf32>, tensor<1x2xf32>
}

func.func @reference(%a: tensor<1x9xf32>, %b: tensor<9x14xf32>) -> (tensor<1x7xf32>, tensor<1x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x14xf32>) -> tensor<1x14xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<1x9xf32>, tensor<9x14xf32>) outs(%z : tensor<1x14xf32>) -> tensor<1x14xf32>
  %m3 = tensor.expand_shape %mm [[0], [1, 2]] output_shape [1, 7, 2] : tensor<1x14xf32> into tensor<1x7x2xf32>
  %he = tensor.empty() : tensor<1x7xf32>
  %h0 = linalg.fill ins(%zero : f32) outs(%he : tensor<1x7xf32>) -> tensor<1x7xf32>
  %h = linalg.generic {indexing_maps = [affine_map<(m, j, p) -> (m, j, p)>, affine_map<(m, j, p) -> (m, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%m3 : tensor<1x7x2xf32>) outs(%h0 : tensor<1x7xf32>) {
  ^bb0(%v: f32, %acc: f32):
    // Product of the pair, starting from the first element.
    %p = linalg.index 2 : index
    %c0 = arith.constant 0 : index
    %first = arith.cmpi eq, %p, %c0 : index
    %prod = arith.mulf %acc, %v : f32
    %r = arith.select %first, %v, %prod : f32
    linalg.yield %r : f32
  } -> tensor<1x7xf32>
  %pad = tensor.pad %mm low[0, 0] high[0, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<1x14xf32> to tensor<1x16xf32>
  %t = tensor.expand_shape %pad [[0], [1, 2]] output_shape [1, 2, 8] : tensor<1x16xf32> into tensor<1x2x8xf32>
  %pe = tensor.empty() : tensor<1x2xf32>
  %pz = linalg.fill ins(%zero : f32) outs(%pe : tensor<1x2xf32>) -> tensor<1x2xf32>
  %s = linalg.reduce { arith.addf } ins(%t : tensor<1x2x8xf32>) outs(%pz : tensor<1x2xf32>) dimensions = [2]
  return %h, %s : tensor<1x7xf32>, tensor<1x2xf32>
}
