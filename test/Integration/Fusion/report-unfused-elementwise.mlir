// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s

// An elementwise op that reads a GEMM's result but cannot join its
// epilogue is listed with the reason: an operand read through a map that is
// none of the epilogue's access forms, or a body op an epilogue does not run.

// CHECK-LABEL: coda fusion report: @transposed_operand
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-elementwise.mlir":[[@LINE+9]]:{{[0-9]+}}) (1.07 KiB): reads a coda.gemm's result but stays outside its epilogue: its operand #1 is read through (d0, d1) -> (d1, d0), none of the epilogue's access forms (tile, row, column, scalar)

#id = affine_map<(m, n) -> (m, n)>
#tr = affine_map<(m, n) -> (n, m)>
func.func @transposed_operand(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %t: tensor<7x13xf32>) -> tensor<13x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %x = linalg.generic {indexing_maps = [#id, #tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %t : tensor<13x7xf32>, tensor<7x13xf32>) outs(%e : tensor<13x7xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %y = arith.mulf %p, %q : f32
    linalg.yield %y : f32
  } -> tensor<13x7xf32>
  return %x : tensor<13x7xf32>
}

// CHECK-LABEL: coda fusion report: @lookup_in_body
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-elementwise.mlir":[[@LINE+7]]:{{[0-9]+}}) ({{.*}}): reads a coda.gemm's result but stays outside its epilogue: its body has tensor.extract, which an epilogue does not run

func.func @lookup_in_body(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %table: tensor<64xf32>) -> tensor<13x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) {
  ^bb0(%p: f32, %o: f32):
    %i = arith.fptosi %p : f32 to i32
    %c63 = arith.constant 63 : i32
    %c0 = arith.constant 0 : i32
    %lo = arith.maxsi %i, %c0 : i32
    %hi = arith.minsi %lo, %c63 : i32
    %k = arith.index_cast %hi : i32 to index
    %y = tensor.extract %table[%k] : tensor<64xf32>
    linalg.yield %y : f32
  } -> tensor<13x7xf32>
  return %x : tensor<13x7xf32>
}
