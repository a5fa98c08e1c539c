// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=7 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=SEVEN
// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=1 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=ONE
// RUN: coda-opt %s --coda-fuse | FileCheck %s

// Matrix products whose result is wanted transposed, in the forms frontends
// emit, with a dynamic token count (run with 7 tokens and with 1): each is
// the GEMM of the swapped operands (C^T = B^T A^T), whose elementwise
// readers join its epilogue and which no transpose kernel follows:
// - a contraction that writes its result transposed (output map (n, m)),
//   then a bias per row of that result;
// - linalg.matmul, then linalg.transpose (torch-mlir's `x.t()` /
//   StableHLO's transpose), then a scale per token (a column of the
//   transposed result);
// - linalg.matmul, then linalg.transpose, returned as it is (the same
//   product as the one before: one GEMM writes both results);
// - linalg.batch_matmul, then the last two dimensions transposed
//   (`transpose(-1, -2)`), then exp.

// SEVEN: coda-check ok: 42 elements
// SEVEN: coda-check ok: 42 elements
// SEVEN: coda-check ok: 42 elements
// SEVEN: coda-check ok: 84 elements
// ONE: coda-check ok: 6 elements
// ONE: coda-check ok: 6 elements
// ONE: coda-check ok: 6 elements
// ONE: coda-check ok: 12 elements

// CHECK-LABEL: func.func @reference
// CHECK: coda.gemm %arg1, %arg0 transpose_b : tensor<6x8xf32>, tensor<?x8xf32>
// CHECK-NEXT: epilogue(%{{.*}}, row %{{.*}} = %arg2 : tensor<6xf32>)
// CHECK: coda.gemm %arg3, %arg0 transpose_a transpose_b : tensor<8x6xf32>, tensor<?x8xf32>
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9]*]], col %[[S:[a-z0-9]*]] = %arg4 : tensor<?xf32>)
// CHECK-NEXT: outs(%{{.*}}, %{{.*}} : tensor<6x?xf32>, tensor<6x?xf32>)
// CHECK-NEXT: %[[SCALED:.*]] = arith.mulf %[[ACC]], %[[S]] : f32
// CHECK-NEXT: coda.yield %[[ACC]], %[[SCALED]] : f32, f32
// CHECK: coda.gemm %arg6, %arg5 transpose_a transpose_b : tensor<2x8x6xf32>, tensor<2x?x8xf32>
// CHECK-NEXT: epilogue(%{{[a-z0-9]*}})
// CHECK: math.exp
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.transpose

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#nm = affine_map<(m, n, k) -> (n, m)>
#id2 = affine_map<(n, m) -> (n, m)>
#row2 = affine_map<(n, m) -> (n)>
#col2 = affine_map<(n, m) -> (m)>
#id3 = affine_map<(b, n, m) -> (b, n, m)>

func.func @reference(%x: tensor<?x8xf32>, %w: tensor<6x8xf32>, %bias: tensor<6xf32>,
                     %wk: tensor<8x6xf32>, %scale: tensor<?xf32>,
                     %a: tensor<2x?x8xf32>, %bb: tensor<2x8x6xf32>)
    -> (tensor<6x?xf32>, tensor<6x?xf32>, tensor<6x?xf32>, tensor<2x6x?xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %t = tensor.dim %x, %c0 : tensor<?x8xf32>

  // Written transposed, then a bias per row.
  %e1 = tensor.empty(%t) : tensor<6x?xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<6x?xf32>) -> tensor<6x?xf32>
  %p1 = linalg.generic {indexing_maps = [#mk, #nk, #nm], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<?x8xf32>, tensor<6x8xf32>) outs(%z1 : tensor<6x?xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<6x?xf32>
  %y1 = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%p1, %bias : tensor<6x?xf32>, tensor<6xf32>) outs(%e1 : tensor<6x?xf32>) {
  ^bb0(%v: f32, %b: f32, %o: f32):
    %s = arith.addf %v, %b : f32
    linalg.yield %s : f32
  } -> tensor<6x?xf32>

  // matmul, transpose, a scale per token.
  %e2 = tensor.empty(%t) : tensor<?x6xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x6xf32>) -> tensor<?x6xf32>
  %p2 = linalg.matmul ins(%x, %wk : tensor<?x8xf32>, tensor<8x6xf32>) outs(%z2 : tensor<?x6xf32>) -> tensor<?x6xf32>
  %tr2 = linalg.transpose ins(%p2 : tensor<?x6xf32>) outs(%e1 : tensor<6x?xf32>) permutation = [1, 0]
  %y2 = linalg.generic {indexing_maps = [#id2, #col2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%tr2, %scale : tensor<6x?xf32>, tensor<?xf32>) outs(%e1 : tensor<6x?xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.mulf %v, %c : f32
    linalg.yield %s : f32
  } -> tensor<6x?xf32>

  // matmul, transpose, returned.
  %p3 = linalg.matmul ins(%x, %wk : tensor<?x8xf32>, tensor<8x6xf32>) outs(%z2 : tensor<?x6xf32>) -> tensor<?x6xf32>
  %y3 = linalg.transpose ins(%p3 : tensor<?x6xf32>) outs(%e1 : tensor<6x?xf32>) permutation = [1, 0]

  // batch_matmul, the last two dimensions transposed, exp.
  %e4 = tensor.empty(%t) : tensor<2x?x6xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<2x?x6xf32>) -> tensor<2x?x6xf32>
  %p4 = linalg.batch_matmul ins(%a, %bb : tensor<2x?x8xf32>, tensor<2x8x6xf32>) outs(%z4 : tensor<2x?x6xf32>) -> tensor<2x?x6xf32>
  %e4t = tensor.empty(%t) : tensor<2x6x?xf32>
  %tr4 = linalg.transpose ins(%p4 : tensor<2x?x6xf32>) outs(%e4t : tensor<2x6x?xf32>) permutation = [0, 2, 1]
  %y4 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%tr4 : tensor<2x6x?xf32>) outs(%e4t : tensor<2x6x?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x6x?xf32>
  return %y1, %y2, %y3, %y4 : tensor<6x?xf32>, tensor<6x?xf32>, tensor<6x?xf32>, tensor<2x6x?xf32>
}
