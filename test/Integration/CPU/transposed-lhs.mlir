// RUN: %differential %s | %cpu-runner | FileCheck %s

// transpose_a: lhs stored K x M (a weight gradient X^T dY reads X as
// stored), with either rhs layout, against linalg products of explicit
// transposes. 7 x 5 outputs, K = 9, and an epilogue reading a row input.

// CHECK-COUNT-2: coda-check ok: 35 elements

func.func @fused(%a: tensor<9x7xf32>, %b: tensor<9x5xf32>, %bt: tensor<5x9xf32>, %r: tensor<7xf32>,
                 %o0: tensor<7x5xf32>, %o1: tensor<7x5xf32>) -> (tensor<7x5xf32>, tensor<7x5xf32>) {
  %y0 = coda.gemm %a, %b transpose_a : tensor<9x7xf32>, tensor<9x5xf32>
      epilogue(%acc, row %rv = %r : tensor<7xf32>) outs(%o0 : tensor<7x5xf32>) {
    %s = arith.mulf %acc, %rv : f32
    coda.yield %s : f32
  }
  %y1 = coda.gemm %a, %bt transpose_a transpose_b : tensor<9x7xf32>, tensor<5x9xf32>
      epilogue(%acc) outs(%o1 : tensor<7x5xf32>) {
    coda.yield %acc : f32
  }
  return %y0, %y1 : tensor<7x5xf32>, tensor<7x5xf32>
}

func.func @reference(%a: tensor<9x7xf32>, %b: tensor<9x5xf32>, %bt: tensor<5x9xf32>, %r: tensor<7xf32>)
    -> (tensor<7x5xf32>, tensor<7x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %atE = tensor.empty() : tensor<7x9xf32>
  %at = linalg.transpose ins(%a : tensor<9x7xf32>) outs(%atE : tensor<7x9xf32>) permutation = [1, 0]
  %btE = tensor.empty() : tensor<9x5xf32>
  %btt = linalg.transpose ins(%bt : tensor<5x9xf32>) outs(%btE : tensor<9x5xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<7x5xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<7x5xf32>) -> tensor<7x5xf32>
  %p0 = linalg.matmul ins(%at, %b : tensor<7x9xf32>, tensor<9x5xf32>) outs(%z : tensor<7x5xf32>) -> tensor<7x5xf32>
  %y0 = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m)>, affine_map<(m, n) -> (m, n)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%p0, %r : tensor<7x5xf32>, tensor<7xf32>) outs(%e : tensor<7x5xf32>) {
  ^bb0(%v: f32, %rv: f32, %out: f32):
    %s = arith.mulf %v, %rv : f32
    linalg.yield %s : f32
  } -> tensor<7x5xf32>
  %y1 = linalg.matmul ins(%at, %btt : tensor<7x9xf32>, tensor<9x5xf32>) outs(%z : tensor<7x5xf32>) -> tensor<7x5xf32>
  return %y0, %y1 : tensor<7x5xf32>, tensor<7x5xf32>
}
