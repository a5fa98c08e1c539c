// RUN: %differential %s | %cpu-runner | FileCheck %s

// Batched block reductions and their finish on 3-D partials, with reduction
// tiles wider than the reduced axis (one partial covers the whole row or
// column): row max (tile 64 > N = 20) and column sum (tile 8 over M = 9).

// CHECK: coda-check ok: 18 elements
// CHECK: coda-check ok: 80 elements
// CHECK: coda-check ok: 18 elements
// CHECK: coda-check ok: 40 elements

func.func @fused(%a: tensor<2x9x7xf32>, %b: tensor<2x7x20xf32>, %r0: tensor<2x9x1xf32>, %c0: tensor<2x2x20xf32>)
    -> (tensor<2x9x1xf32>, tensor<2x2x20xf32>, tensor<2x9xf32>, tensor<2x20xf32>) {
  %r, %c = coda.gemm %a, %b : tensor<2x9x7xf32>, tensor<2x7x20xf32>
      epilogue(%acc) outs(%r0, %c0 : tensor<2x9x1xf32>, tensor<2x2x20xf32>) {
    %rm = coda.row_reduce max %acc tile 64 : f32
    %cs = coda.col_reduce sum %acc tile 8 : f32
    coda.yield %rm, %cs : !coda.partial<f32>, !coda.partial<f32>
  }
  %rE = tensor.empty() : tensor<2x9xf32>
  %cE = tensor.empty() : tensor<2x20xf32>
  %rowMax = coda.reduce_partials max row %r : tensor<2x9x1xf32> outs(%rE : tensor<2x9xf32>)
  %colSum = coda.reduce_partials sum col %c : tensor<2x2x20xf32> outs(%cE : tensor<2x20xf32>)
  return %r, %c, %rowMax, %colSum : tensor<2x9x1xf32>, tensor<2x2x20xf32>, tensor<2x9xf32>, tensor<2x20xf32>
}

func.func @reference(%a: tensor<2x9x7xf32>, %b: tensor<2x7x20xf32>)
    -> (tensor<2x9x1xf32>, tensor<2x2x20xf32>, tensor<2x9xf32>, tensor<2x20xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x9x20xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x9x20xf32>) -> tensor<2x9x20xf32>
  %mm = linalg.batch_matmul ins(%a, %b : tensor<2x9x7xf32>, tensor<2x7x20xf32>) outs(%z : tensor<2x9x20xf32>) -> tensor<2x9x20xf32>
  %rE = tensor.empty() : tensor<2x9xf32>
  %r0 = linalg.fill ins(%ninf : f32) outs(%rE : tensor<2x9xf32>) -> tensor<2x9xf32>
  %rowMax = linalg.reduce { arith.maximumf } ins(%mm : tensor<2x9x20xf32>) outs(%r0 : tensor<2x9xf32>) dimensions = [2]
  %rowPartials = tensor.expand_shape %rowMax [[0], [1, 2]] output_shape [2, 9, 1] : tensor<2x9xf32> into tensor<2x9x1xf32>
  // Column partials: rows 0-7 and row 8.
  %top = tensor.extract_slice %mm[0, 0, 0] [2, 8, 20] [1, 1, 1] : tensor<2x9x20xf32> to tensor<2x8x20xf32>
  %last = tensor.extract_slice %mm[0, 8, 0] [2, 1, 20] [1, 1, 1] : tensor<2x9x20xf32> to tensor<2x20xf32>
  %cE = tensor.empty() : tensor<2x20xf32>
  %c0 = linalg.fill ins(%zero : f32) outs(%cE : tensor<2x20xf32>) -> tensor<2x20xf32>
  %topSum = linalg.reduce { arith.addf } ins(%top : tensor<2x8x20xf32>) outs(%c0 : tensor<2x20xf32>) dimensions = [1]
  %pE = tensor.empty() : tensor<2x2x20xf32>
  %p0 = tensor.insert_slice %topSum into %pE[0, 0, 0] [2, 1, 20] [1, 1, 1] : tensor<2x20xf32> into tensor<2x2x20xf32>
  %colPartials = tensor.insert_slice %last into %p0[0, 1, 0] [2, 1, 20] [1, 1, 1] : tensor<2x20xf32> into tensor<2x2x20xf32>
  %colSum = linalg.reduce { arith.addf } ins(%mm : tensor<2x9x20xf32>) outs(%c0 : tensor<2x20xf32>) dimensions = [1]
  return %rowPartials, %colPartials, %rowMax, %colSum : tensor<2x9x1xf32>, tensor<2x2x20xf32>, tensor<2x9xf32>, tensor<2x20xf32>
}
