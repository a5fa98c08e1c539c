// RUN: %differential %s | %cpu-runner | FileCheck %s

// A leading batch dimension: a shared N x K weight (transpose_b) and a
// batched K x N rhs, with a batched row input, tile input and row partials.

// CHECK: coda-check ok: 1110 elements
// CHECK: coda-check ok: 90 elements
// CHECK: coda-check ok: 1110 elements

func.func @fused(%a: tensor<3x10x8xf32>, %w: tensor<37x8xf32>, %b: tensor<3x8x37xf32>, %r: tensor<3x10xf32>,
                 %t: tensor<3x10x37xf32>, %o0: tensor<3x10x37xf32>, %p0: tensor<3x10x3xf32>, %o1: tensor<3x10x37xf32>)
    -> (tensor<3x10x37xf32>, tensor<3x10x3xf32>, tensor<3x10x37xf32>) {
  %y, %p = coda.gemm %a, %w transpose_b : tensor<3x10x8xf32>, tensor<37x8xf32>
      epilogue(%acc, row %rv = %r : tensor<3x10xf32>, tile %tv = %t : tensor<3x10x37xf32>)
      outs(%o0, %p0 : tensor<3x10x37xf32>, tensor<3x10x3xf32>) {
    %0 = arith.mulf %acc, %rv : f32
    %1 = arith.addf %0, %tv : f32
    %s = coda.row_reduce sum %1 tile 16 : f32
    coda.yield %1, %s : f32, !coda.partial<f32>
  }
  %z = coda.gemm %a, %b : tensor<3x10x8xf32>, tensor<3x8x37xf32> epilogue(%acc) outs(%o1 : tensor<3x10x37xf32>) {
    coda.yield %acc : f32
  }
  return %y, %p, %z : tensor<3x10x37xf32>, tensor<3x10x3xf32>, tensor<3x10x37xf32>
}

func.func @reference(%a: tensor<3x10x8xf32>, %w: tensor<37x8xf32>, %b: tensor<3x8x37xf32>, %r: tensor<3x10xf32>,
                     %t: tensor<3x10x37xf32>) -> (tensor<3x10x37xf32>, tensor<3x10x3xf32>, tensor<3x10x37xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x10x37xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<3x10x37xf32>) -> tensor<3x10x37xf32>
  %wt0 = tensor.empty() : tensor<8x37xf32>
  %wt = linalg.transpose ins(%w : tensor<37x8xf32>) outs(%wt0 : tensor<8x37xf32>) permutation = [1, 0]
  %wb0 = tensor.empty() : tensor<3x8x37xf32>
  %wb = linalg.broadcast ins(%wt : tensor<8x37xf32>) outs(%wb0 : tensor<3x8x37xf32>) dimensions = [0]
  %mm = linalg.batch_matmul ins(%a, %wb : tensor<3x10x8xf32>, tensor<3x8x37xf32>) outs(%z : tensor<3x10x37xf32>) -> tensor<3x10x37xf32>
  %rb = linalg.broadcast ins(%r : tensor<3x10xf32>) outs(%e : tensor<3x10x37xf32>) dimensions = [2]
  %0 = linalg.mul ins(%mm, %rb : tensor<3x10x37xf32>, tensor<3x10x37xf32>) outs(%e : tensor<3x10x37xf32>) -> tensor<3x10x37xf32>
  %y = linalg.add ins(%0, %t : tensor<3x10x37xf32>, tensor<3x10x37xf32>) outs(%e : tensor<3x10x37xf32>) -> tensor<3x10x37xf32>
  %pad = tensor.pad %y low[0, 0, 0] high[0, 0, 11] {
  ^bb0(%i: index, %j: index, %k: index):
    tensor.yield %zero : f32
  } : tensor<3x10x37xf32> to tensor<3x10x48xf32>
  %tiles = tensor.expand_shape %pad [[0], [1], [2, 3]] output_shape [3, 10, 3, 16] : tensor<3x10x48xf32> into tensor<3x10x3x16xf32>
  %pe = tensor.empty() : tensor<3x10x3xf32>
  %pz = linalg.fill ins(%zero : f32) outs(%pe : tensor<3x10x3xf32>) -> tensor<3x10x3xf32>
  %p = linalg.reduce { arith.addf } ins(%tiles : tensor<3x10x3x16xf32>) outs(%pz : tensor<3x10x3xf32>) dimensions = [3]
  %bmm = linalg.batch_matmul ins(%a, %b : tensor<3x10x8xf32>, tensor<3x8x37xf32>) outs(%z : tensor<3x10x37xf32>) -> tensor<3x10x37xf32>
  return %y, %p, %bmm : tensor<3x10x37xf32>, tensor<3x10x3xf32>, tensor<3x10x37xf32>
}
