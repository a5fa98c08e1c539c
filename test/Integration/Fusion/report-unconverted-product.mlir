// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s
// RUN: not coda-compile %s -o %t 2>&1 | FileCheck %s --check-prefix=COMPILE

// A matrix product whose result is written transposed (output map (n, m))
// has no coda.gemm form: the report names it, says why and what to write
// instead, and coda-compile refuses it rather than running it as a loop
// kernel.

// CHECK: coda fusion report: @transposed_result
// CHECK: after:  1 GEMM kernels (1 left in linalg), 0 memory-bound kernels
// CHECK: left: linalg.generic at loc("{{.*}}report-unconverted-product.mlir":[[@LINE+11]]:{{[0-9]+}}) (a matrix product not made a coda.gemm: its result is written transposed ((d0, d1, d2) -> (d1, d0)); write it in loop order and transpose after)

// COMPILE: error: 'linalg.generic' is a matrix product left in linalg

#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#nm = affine_map<(m, n, k) -> (n, m)>
func.func @transposed_result(%x: tensor<7x12xf32>, %w: tensor<12x10xf32>) -> tensor<10x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<10x7xf32>) -> tensor<10x7xf32>
  %mm = linalg.generic {indexing_maps = [#mk, #kn, #nm], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<7x12xf32>, tensor<12x10xf32>) outs(%z : tensor<10x7xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<10x7xf32>
  return %mm : tensor<10x7xf32>
}
