// RUN: %differential %s | %cpu-runner | FileCheck %s

// A batched N x K rhs (transpose_b with a batch dimension, as in batched
// attention-style products) with a column input shared across the batch and
// a pair contraction.

// CHECK: coda-check ok: 378 elements
// CHECK: coda-check ok: 189 elements

func.func @fused(%a: tensor<3x9x5xf32>, %b: tensor<3x14x5xf32>, %c: tensor<14xf32>, %o: tensor<3x9x14xf32>, %h: tensor<3x9x7xf32>)
    -> (tensor<3x9x14xf32>, tensor<3x9x7xf32>) {
  %y, %p = coda.gemm %a, %b transpose_b : tensor<3x9x5xf32>, tensor<3x14x5xf32>
      epilogue(%acc, col %cv = %c : tensor<14xf32>) outs(%o, %h : tensor<3x9x14xf32>, tensor<3x9x7xf32>) {
    %x = arith.mulf %acc, %cv : f32
    %pc = coda.pair_contract (%e, %d) = %x : f32 -> !coda.pair<f32> {
      %m = arith.maximumf %e, %d : f32
      coda.yield %m : f32
    }
    coda.yield %x, %pc : f32, !coda.pair<f32>
  }
  return %y, %p : tensor<3x9x14xf32>, tensor<3x9x7xf32>
}

func.func @reference(%a: tensor<3x9x5xf32>, %b: tensor<3x14x5xf32>, %c: tensor<14xf32>) -> (tensor<3x9x14xf32>, tensor<3x9x7xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %btE = tensor.empty() : tensor<3x5x14xf32>
  %bt = linalg.transpose ins(%b : tensor<3x14x5xf32>) outs(%btE : tensor<3x5x14xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<3x9x14xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<3x9x14xf32>) -> tensor<3x9x14xf32>
  %mm = linalg.batch_matmul ins(%a, %bt : tensor<3x9x5xf32>, tensor<3x5x14xf32>) outs(%z : tensor<3x9x14xf32>) -> tensor<3x9x14xf32>
  %cb = linalg.broadcast ins(%c : tensor<14xf32>) outs(%e : tensor<3x9x14xf32>) dimensions = [0, 1]
  %x = linalg.mul ins(%mm, %cb : tensor<3x9x14xf32>, tensor<3x9x14xf32>) outs(%e : tensor<3x9x14xf32>) -> tensor<3x9x14xf32>
  %pairs = tensor.expand_shape %x [[0], [1], [2, 3]] output_shape [3, 9, 7, 2] : tensor<3x9x14xf32> into tensor<3x9x7x2xf32>
  %hE = tensor.empty() : tensor<3x9x7xf32>
  %h0 = linalg.fill ins(%ninf : f32) outs(%hE : tensor<3x9x7xf32>) -> tensor<3x9x7xf32>
  %h = linalg.reduce { arith.maximumf } ins(%pairs : tensor<3x9x7x2xf32>) outs(%h0 : tensor<3x9x7xf32>) dimensions = [3]
  return %x, %h : tensor<3x9x14xf32>, tensor<3x9x7xf32>
}
