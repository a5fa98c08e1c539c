// RUN: %differential %s | %cpu-runner | FileCheck %s

// Residual add, a saved copy of h and per-tile row sums of squares (the
// producer half of a deferred RMSNorm), fused vs an unfused linalg program.
// N = 50 is not a multiple of the reduction tile (16): the last tile is short.

// CHECK: coda-check ok: 1850 elements
// CHECK: coda-check ok: 148 elements

func.func @fused(%a: tensor<37x16xf32>, %b: tensor<16x50xf32>, %res: tensor<37x50xf32>,
                 %h0: tensor<37x50xf32>, %p0: tensor<37x4xf32>) -> (tensor<37x50xf32>, tensor<37x4xf32>) {
  %h, %p = coda.gemm %a, %b : tensor<37x16xf32>, tensor<16x50xf32>
      epilogue(%acc, tile %r = %res : tensor<37x50xf32>)
      outs(%h0, %p0 : tensor<37x50xf32>, tensor<37x4xf32>) {
    %x = arith.addf %acc, %r : f32
    %sq = arith.mulf %x, %x : f32
    %part = coda.row_reduce sum %sq tile 16 : f32
    coda.yield %x, %part : f32, !coda.partial<f32>
  }
  return %h, %p : tensor<37x50xf32>, tensor<37x4xf32>
}

func.func @reference(%a: tensor<37x16xf32>, %b: tensor<16x50xf32>, %res: tensor<37x50xf32>)
    -> (tensor<37x50xf32>, tensor<37x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<37x50xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<37x50xf32>) -> tensor<37x50xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<37x16xf32>, tensor<16x50xf32>) outs(%z : tensor<37x50xf32>) -> tensor<37x50xf32>
  %h = linalg.add ins(%mm, %res : tensor<37x50xf32>, tensor<37x50xf32>) outs(%e : tensor<37x50xf32>) -> tensor<37x50xf32>
  %sq = linalg.mul ins(%h, %h : tensor<37x50xf32>, tensor<37x50xf32>) outs(%e : tensor<37x50xf32>) -> tensor<37x50xf32>
  // Pad to 4 tiles of 16 columns, split the column axis, reduce each tile.
  %padded = tensor.pad %sq low[0, 0] high[0, 14] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<37x50xf32> to tensor<37x64xf32>
  %tiles = tensor.expand_shape %padded [[0], [1, 2]] output_shape [37, 4, 16] : tensor<37x64xf32> into tensor<37x4x16xf32>
  %pe = tensor.empty() : tensor<37x4xf32>
  %pz = linalg.fill ins(%zero : f32) outs(%pe : tensor<37x4xf32>) -> tensor<37x4xf32>
  %p = linalg.reduce { arith.addf } ins(%tiles : tensor<37x4x16xf32>) outs(%pz : tensor<37x4xf32>) dimensions = [2]
  return %h, %p : tensor<37x50xf32>, tensor<37x4xf32>
}
