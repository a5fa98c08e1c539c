// RUN: %differential %s | %cpu-runner | FileCheck %s

// Column block reductions (sum and max over tiles of 8 rows, M = 21: a short
// last tile), e.g. the dgamma partials of RMSNorm backward, and their finish.

// CHECK: coda-check ok: 99 elements
// CHECK: coda-check ok: 99 elements
// CHECK: coda-check ok: 33 elements

func.func @fused(%a: tensor<21x10xf32>, %b: tensor<10x33xf32>, %g: tensor<21x33xf32>, %s0: tensor<3x33xf32>, %m0: tensor<3x33xf32>)
    -> (tensor<3x33xf32>, tensor<3x33xf32>, tensor<33xf32>) {
  %s, %m = coda.gemm %a, %b : tensor<21x10xf32>, tensor<10x33xf32>
      epilogue(%acc, tile %gv = %g : tensor<21x33xf32>) outs(%s0, %m0 : tensor<3x33xf32>, tensor<3x33xf32>) {
    %prod = arith.mulf %acc, %gv : f32
    %ps = coda.col_reduce sum %prod tile 8 : f32
    %pm = coda.col_reduce max %acc tile 8 : f32
    coda.yield %ps, %pm : !coda.partial<f32>, !coda.partial<f32>
  }
  %e = tensor.empty() : tensor<33xf32>
  %total = coda.reduce_partials sum col %s : tensor<3x33xf32> outs(%e : tensor<33xf32>)
  return %s, %m, %total : tensor<3x33xf32>, tensor<3x33xf32>, tensor<33xf32>
}

func.func @reference(%a: tensor<21x10xf32>, %b: tensor<10x33xf32>, %g: tensor<21x33xf32>)
    -> (tensor<3x33xf32>, tensor<3x33xf32>, tensor<33xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<21x33xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<21x33xf32>) -> tensor<21x33xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<21x10xf32>, tensor<10x33xf32>) outs(%z : tensor<21x33xf32>) -> tensor<21x33xf32>
  %prod = linalg.mul ins(%mm, %g : tensor<21x33xf32>, tensor<21x33xf32>) outs(%e : tensor<21x33xf32>) -> tensor<21x33xf32>
  %pp = tensor.pad %prod low[0, 0] high[3, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<21x33xf32> to tensor<24x33xf32>
  %pt = tensor.expand_shape %pp [[0, 1], [2]] output_shape [3, 8, 33] : tensor<24x33xf32> into tensor<3x8x33xf32>
  %pe = tensor.empty() : tensor<3x33xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%pe : tensor<3x33xf32>) -> tensor<3x33xf32>
  %s = linalg.reduce { arith.addf } ins(%pt : tensor<3x8x33xf32>) outs(%s0 : tensor<3x33xf32>) dimensions = [1]
  %mp = tensor.pad %mm low[0, 0] high[3, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %ninf : f32
  } : tensor<21x33xf32> to tensor<24x33xf32>
  %mt = tensor.expand_shape %mp [[0, 1], [2]] output_shape [3, 8, 33] : tensor<24x33xf32> into tensor<3x8x33xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%pe : tensor<3x33xf32>) -> tensor<3x33xf32>
  %m = linalg.reduce { arith.maximumf } ins(%mt : tensor<3x8x33xf32>) outs(%m0 : tensor<3x33xf32>) dimensions = [1]
  %te = tensor.empty() : tensor<33xf32>
  %t0 = linalg.fill ins(%zero : f32) outs(%te : tensor<33xf32>) -> tensor<33xf32>
  %total = linalg.reduce { arith.addf } ins(%prod : tensor<21x33xf32>) outs(%t0 : tensor<33xf32>) dimensions = [0]
  return %s, %m, %total : tensor<3x33xf32>, tensor<3x33xf32>, tensor<33xf32>
}
