// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s

// An elementwise op that reads a GEMM's result but cannot join its
// epilogue is listed with the reason: an operand read through a map that is
// none of the epilogue's access forms, a body op an epilogue does not run,
// or a reshape of the GEMM's result that cannot move after the op (and
// which of the op's operands or results keeps it).

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

// A GEMM result split into heads and read with a table per (token,
// within-head position), shared by the heads: the split cannot move after
// the reader, and the report names the operand that keeps it.
// CHECK-LABEL: coda fusion report: @table_per_head_position
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-elementwise.mlir":[[@LINE+12]]:{{[0-9]+}}) (dynamic shape): reads a coda.gemm's result but stays outside its epilogue: it reads it through a tensor.expand_shape that cannot move after it: its operand #1 is read through (d0, d1, d2) -> (d0, d2), which does not keep the reshaped dimensions (d1, d2) together and in order

func.func @table_per_head_position(%x: tensor<?x8xf32>, %w: tensor<12x8xf32>, %cos: tensor<?x4xf32>) -> tensor<?x3x4xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%t) : tensor<?x12xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x12xf32>) -> tensor<?x12xf32>
  %mm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<?x8xf32>, tensor<12x8xf32>) outs(%z : tensor<?x12xf32>) -> tensor<?x12xf32>
  %q = tensor.expand_shape %mm [[0], [1, 2]] output_shape [%t, 3, 4] : tensor<?x12xf32> into tensor<?x3x4xf32>
  %e3 = tensor.empty(%t) : tensor<?x3x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(t, h, d) -> (t, h, d)>, affine_map<(t, h, d) -> (t, d)>, affine_map<(t, h, d) -> (t, h, d)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %cos : tensor<?x3x4xf32>, tensor<?x4xf32>) outs(%e3 : tensor<?x3x4xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %0 = arith.mulf %v, %c : f32
    linalg.yield %0 : f32
  } -> tensor<?x3x4xf32>
  return %y : tensor<?x3x4xf32>
}

// A linear layer on [2, T, K] (the batch folded into the GEMM's rows), read
// with its last two dimensions transposed: the batch's unfolding cannot move
// after the reader, and the GEMM keeps its orientation (transposed, its
// rows would be the shared weight's).
// CHECK-LABEL: coda fusion report: @batch_read_transposed
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-elementwise.mlir":[[@LINE+15]]:{{[0-9]+}}) (384 B): reads a coda.gemm's result but stays outside its epilogue: it reads it through a tensor.expand_shape that cannot move after it: its result #0 is written through (d0, d1, d2) -> (d0, d1, d2), which does not keep the reshaped dimensions (d0, d2) together and in order

func.func @batch_read_transposed(%x: tensor<2x4x8xf32>, %w: tensor<6x8xf32>) -> tensor<2x6x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x4x8xf32>, tensor<6x8xf32>) outs(%z : tensor<2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x6xf32>
  %et = tensor.empty() : tensor<2x6x4xf32>
  %r = linalg.transpose ins(%p : tensor<2x4x6xf32>) outs(%et : tensor<2x6x4xf32>) permutation = [0, 2, 1]
  return %r : tensor<2x6x4xf32>
}

// Heads transposed before an op with a per-(token, position) table: the
// transpose moves after the op, the op still cannot join the epilogue, and
// the transpose is merged back into it: one kernel, as written.
// CHECK-LABEL: coda fusion report: @transposed_heads_stay_one_kernel
// CHECK: after:  1 GEMM kernels, 1 memory-bound kernels
// CHECK-NEXT: left: linalg.generic at loc("{{.*}}report-unfused-elementwise.mlir":[[@LINE+11]]:{{[0-9]+}}) (400 B): reads a coda.gemm's result but stays outside its epilogue

func.func @transposed_heads_stay_one_kernel(%x: tensor<5x8xf32>, %w: tensor<8x8xf32>, %cos: tensor<5x4xf32>) -> tensor<2x5x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5x8xf32>) -> tensor<5x8xf32>
  %mm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<5x8xf32>, tensor<8x8xf32>) outs(%z : tensor<5x8xf32>) -> tensor<5x8xf32>
  %q = tensor.expand_shape %mm [[0], [1, 2]] output_shape [5, 2, 4] : tensor<5x8xf32> into tensor<5x2x4xf32>
  %et = tensor.empty() : tensor<2x5x4xf32>
  %qt = linalg.transpose ins(%q : tensor<5x2x4xf32>) outs(%et : tensor<2x5x4xf32>) permutation = [1, 0, 2]
  %y = linalg.generic {indexing_maps = [affine_map<(h, t, d) -> (h, t, d)>, affine_map<(h, t, d) -> (t, d)>, affine_map<(h, t, d) -> (h, t, d)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%qt, %cos : tensor<2x5x4xf32>, tensor<5x4xf32>) outs(%et : tensor<2x5x4xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %0 = arith.mulf %v, %c : f32
    linalg.yield %0 : f32
  } -> tensor<2x5x4xf32>
  return %y : tensor<2x5x4xf32>
}
