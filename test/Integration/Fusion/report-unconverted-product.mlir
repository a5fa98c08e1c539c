// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s
// RUN: not coda-compile %s -o %t 2>&1 | FileCheck %s --check-prefix=COMPILE

// A matrix product over two batch dimensions (attention scores per batch
// and head, [B, H, T, D] x [B, H, D, S]) has no coda.gemm form: the report
// names it, says why and what to write instead, and coda-compile refuses it
// rather than running it as a loop kernel.

// CHECK: coda fusion report: @two_batch_dimensions
// CHECK: after:  1 GEMM kernels (1 left in linalg), 0 memory-bound kernels
// CHECK: left: linalg.generic at loc("{{.*}}report-unconverted-product.mlir":[[@LINE+11]]:{{[0-9]+}}) (a matrix product not made a coda.gemm: it has 2 batch dimensions; coda.gemm takes one (collapse them into one before the product))

// COMPILE: error: 'linalg.generic' is a matrix product left in linalg

#lhs = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#rhs = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#out = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
func.func @two_batch_dimensions(%q: tensor<2x3x7x4xf32>, %kt: tensor<2x3x4x7xf32>) -> tensor<2x3x7x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x7x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x7x7xf32>) -> tensor<2x3x7x7xf32>
  %s = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : tensor<2x3x7x4xf32>, tensor<2x3x4x7xf32>) outs(%z : tensor<2x3x7x7xf32>) {
  ^bb0(%p: f32, %r: f32, %acc: f32):
    %m = arith.mulf %p, %r : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<2x3x7x7xf32>
  return %s : tensor<2x3x7x7xf32>
}
