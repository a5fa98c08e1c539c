// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=7 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=SEVEN
// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=1 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=ONE
// RUN: coda-opt %s --coda-fuse | FileCheck %s

// Row reductions of a linear layer applied to a batch of sequences
// ([2, T, 8] x [6, 8]^T, the batch folded into the GEMM's rows), as
// frontends emit them on 3-D activations, with a dynamic token count (run
// with 7 tokens and with 1): the sum of squares an RMSNorm needs and a row
// max become partials of the one GEMM and their finishes; the batch is
// unfolded from the finished vectors.

// SEVEN: coda-check ok: 14 elements
// SEVEN: coda-check ok: 14 elements
// ONE: coda-check ok: 2 elements
// ONE: coda-check ok: 2 elements

// CHECK-LABEL: func.func @reference
// CHECK: %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]]
// CHECK: coda.gemm %[[X]], %arg1 transpose_b : tensor<?x8xf32>, tensor<6x8xf32>
// CHECK-DAG: coda.row_reduce sum
// CHECK-DAG: coda.row_reduce max
// CHECK: coda.reduce_partials
// CHECK: coda.reduce_partials
// CHECK-NOT: linalg.generic

func.func @reference(%x: tensor<2x?x8xf32>, %w: tensor<6x8xf32>) -> (tensor<2x?xf32>, tensor<2x?xf32>) {
  %c1 = arith.constant 1 : index
  %t = tensor.dim %x, %c1 : tensor<2x?x8xf32>
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty(%t) : tensor<2x?x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x?x6xf32>) -> tensor<2x?x6xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x?x8xf32>, tensor<6x8xf32>) outs(%z : tensor<2x?x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x?x6xf32>
  %r0 = tensor.empty(%t) : tensor<2x?xf32>
  %rz = linalg.fill ins(%zero : f32) outs(%r0 : tensor<2x?xf32>) -> tensor<2x?xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (b, m)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%p : tensor<2x?x6xf32>) outs(%rz : tensor<2x?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<2x?xf32>
  %rm = linalg.fill ins(%ninf : f32) outs(%r0 : tensor<2x?xf32>) -> tensor<2x?xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (b, m)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%p : tensor<2x?x6xf32>) outs(%rm : tensor<2x?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.maximumf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<2x?xf32>
  return %ss, %mx : tensor<2x?xf32>, tensor<2x?xf32>
}
