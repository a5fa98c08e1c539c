// RUN: %differential %s | %cpu-runner | FileCheck %s

// Row and column indices: a causal mask (n > m -> -1e4) plus a position-
// dependent term 0.01 * (m - 2n), against linalg.index in a linalg.generic.

// CHECK: coda-check ok: 1118 elements

func.func @fused(%a: tensor<43x16xf32>, %b: tensor<16x26xf32>, %o: tensor<43x26xf32>) -> tensor<43x26xf32> {
  %y = coda.gemm %a, %b : tensor<43x16xf32>, tensor<16x26xf32> epilogue(%acc) outs(%o : tensor<43x26xf32>) {
    %m = coda.row_index
    %n = coda.col_index
    %masked = arith.cmpi ugt, %n, %m : index
    %big = arith.constant -1.0e4 : f32
    %c2 = arith.constant 2 : index
    %k = arith.constant 0.01 : f32
    %mi = arith.index_cast %m : index to i64
    %ni = arith.index_cast %n : index to i64
    %mf = arith.sitofp %mi : i64 to f32
    %nf = arith.sitofp %ni : i64 to f32
    %two = arith.constant 2.0 : f32
    %n2 = arith.mulf %nf, %two : f32
    %d = arith.subf %mf, %n2 : f32
    %term = arith.mulf %d, %k : f32
    %v = arith.addf %acc, %term : f32
    %r = arith.select %masked, %big, %v : f32
    coda.yield %r : f32
  }
  return %y : tensor<43x26xf32>
}

#id = affine_map<(m, n) -> (m, n)>

func.func @reference(%a: tensor<43x16xf32>, %b: tensor<16x26xf32>) -> tensor<43x26xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<43x26xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<43x26xf32>) -> tensor<43x26xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<43x16xf32>, tensor<16x26xf32>) outs(%z : tensor<43x26xf32>) -> tensor<43x26xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<43x26xf32>) outs(%e : tensor<43x26xf32>) {
  ^bb0(%v: f32, %out: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %mi = arith.index_cast %m : index to i32
    %ni = arith.index_cast %n : index to i32
    %c2 = arith.constant 2 : i32
    %n2 = arith.muli %ni, %c2 : i32
    %d = arith.subi %mi, %n2 : i32
    %df = arith.sitofp %d : i32 to f32
    %k = arith.constant 0.01 : f32
    %t = arith.mulf %df, %k : f32
    %s = arith.addf %v, %t : f32
    %future = arith.cmpi sgt, %ni, %mi : i32
    %big = arith.constant -1.0e4 : f32
    %r = arith.select %future, %big, %s : f32
    linalg.yield %r : f32
  } -> tensor<43x26xf32>
  return %y : tensor<43x26xf32>
}
