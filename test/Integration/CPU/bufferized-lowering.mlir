// RUN: %differential %s | coda-opt --one-shot-bufferize="bufferize-function-boundaries" | %cpu-runner | FileCheck %s

// Bufferize first, then lower: the tensor program becomes coda.gemm on
// memrefs (in place) and runs through the memref form of the reference
// lowering. Covers a tile output, a row selection (whose destination is read)
// and row partials.

// CHECK: coda-check ok: 442 elements
// CHECK: coda-check ok: 17 elements
// CHECK: coda-check ok: 34 elements

func.func @fused(%a: tensor<17x5xf32>, %b: tensor<5x26xf32>, %t: tensor<17xi64>, %o: tensor<17x26xf32>, %p: tensor<17x2xf32>)
    -> (tensor<17x26xf32>, tensor<17xf32>, tensor<17x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %sE = tensor.empty() : tensor<17xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%sE : tensor<17xf32>) -> tensor<17xf32>
  %y, %s, %q = coda.gemm %a, %b : tensor<17x5xf32>, tensor<5x26xf32>
      epilogue(%acc, row %tv = %t : tensor<17xi64>) outs(%o, %s0, %p : tensor<17x26xf32>, tensor<17xf32>, tensor<17x2xf32>) {
    %sq = arith.mulf %acc, %acc : f32
    %part = coda.row_reduce sum %sq tile 16 : f32
    %sel = coda.row_select %acc at %tv : f32, i64
    coda.yield %sq, %sel, %part : f32, !coda.row<f32>, !coda.partial<f32>
  }
  return %y, %s, %q : tensor<17x26xf32>, tensor<17xf32>, tensor<17x2xf32>
}

func.func @reference(%a: tensor<17x5xf32>, %b: tensor<5x26xf32>, %t: tensor<17xi64> {coda_test.range = array<i64: -2, 26>})
    -> (tensor<17x26xf32>, tensor<17xf32>, tensor<17x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<17x26xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<17x26xf32>) -> tensor<17x26xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<17x5xf32>, tensor<5x26xf32>) outs(%z : tensor<17x26xf32>) -> tensor<17x26xf32>
  %sq = linalg.mul ins(%mm, %mm : tensor<17x26xf32>, tensor<17x26xf32>) outs(%e : tensor<17x26xf32>) -> tensor<17x26xf32>
  %rE = tensor.empty() : tensor<17xf32>
  %sel = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%t : tensor<17xi64>) outs(%rE : tensor<17xf32>) {
  ^bb0(%target: i64, %out: f32):
    %m = linalg.index 0 : index
    %c0 = arith.constant 0 : i64
    %valid = arith.cmpi sge, %target, %c0 : i64
    %safe = arith.select %valid, %target, %c0 : i64
    %n = arith.index_cast %safe : i64 to index
    %v = tensor.extract %mm[%m, %n] : tensor<17x26xf32>
    %r = arith.select %valid, %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<17xf32>
  %first = tensor.extract_slice %sq[0, 0] [17, 16] [1, 1] : tensor<17x26xf32> to tensor<17x16xf32>
  %rest = tensor.extract_slice %sq[0, 16] [17, 10] [1, 1] : tensor<17x26xf32> to tensor<17x10xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%rE : tensor<17xf32>) -> tensor<17xf32>
  %s0 = linalg.reduce { arith.addf } ins(%first : tensor<17x16xf32>) outs(%r0 : tensor<17xf32>) dimensions = [1]
  %s1 = linalg.reduce { arith.addf } ins(%rest : tensor<17x10xf32>) outs(%r0 : tensor<17xf32>) dimensions = [1]
  %pE = tensor.empty() : tensor<17x2xf32>
  %p0 = tensor.insert_slice %s0 into %pE[0, 0] [17, 1] [1, 1] : tensor<17xf32> into tensor<17x2xf32>
  %p = tensor.insert_slice %s1 into %p0[0, 1] [17, 1] [1, 1] : tensor<17xf32> into tensor<17x2xf32>
  return %sq, %sel, %p : tensor<17x26xf32>, tensor<17xf32>, tensor<17x2xf32>
}
