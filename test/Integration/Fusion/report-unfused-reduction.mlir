// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s

// A row or column reduction of a GEMM's result that cannot become partials
// in its epilogue is listed with the reason the reduction fusion itself
// fails with.

// A max that starts from 0 rather than -inf (a ReLU folded into the max):
// not one of the reductions an epilogue computes.
// CHECK-LABEL: coda fusion report: @max_from_zero
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-reduction.mlir":[[@LINE+9]]:{{[0-9]+}}) (416 B): reads a coda.gemm's result but stays outside its epilogue: it combines with arith.maximumf from its start value: not a sum from 0, a max from -inf or an exp-sum from 0

func.func @max_from_zero(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>) -> tensor<13xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %r0 = tensor.empty() : tensor<13xf32>
  %rz = linalg.fill ins(%zero : f32) outs(%r0 : tensor<13xf32>) -> tensor<13xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm : tensor<13x7xf32>) outs(%rz : tensor<13xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %x = arith.maximumf %acc, %v : f32
    linalg.yield %x : f32
  } -> tensor<13xf32>
  return %r : tensor<13xf32>
}

// A row sum of differences with a matrix read transposed: that operand is
// read neither elementwise nor once per row.
// CHECK-LABEL: coda fusion report: @minus_a_transpose
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-reduction.mlir":[[@LINE+9]]:{{[0-9]+}}) ({{.*}}): reads a coda.gemm's result but stays outside its epilogue: its operand #1 is read through (d0, d1) -> (d1, d0), neither elementwise nor once per row

func.func @minus_a_transpose(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %wt: tensor<7x13xf32>) -> tensor<13xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %r0 = tensor.empty() : tensor<13xf32>
  %rz = linalg.fill ins(%zero : f32) outs(%r0 : tensor<13xf32>) -> tensor<13xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (n, m)>, affine_map<(m, n) -> (m)>], iterator_types = ["parallel", "reduction"]}
      ins(%mm, %wt : tensor<13x7xf32>, tensor<7x13xf32>) outs(%rz : tensor<13xf32>) {
  ^bb0(%v: f32, %w: f32, %acc: f32):
    %p = arith.subf %v, %w : f32
    %x = arith.addf %acc, %p : f32
    linalg.yield %x : f32
  } -> tensor<13xf32>
  return %r : tensor<13xf32>
}
