// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=7 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=SEVEN
// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=1 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=ONE
// RUN: coda-opt %s --coda-fuse | FileCheck %s

// Contractions in the forms frontends emit around reshapes and transposes,
// each followed by elementwise ops, with a dynamic token count (run with 7
// tokens and with 1):
// - a linear layer on [2, T, 8] activations (a batch of sequences sharing
//   the weight, as torch-mlir lowers `linear` on 3-D input): the batch is
//   folded into M, and the bias and the residual ([2, T, 6]) join the
//   epilogue;
// - a weight gradient X^T G with X stored [T, 8] as the forward read it
//   (`transpose_a`), with a bias;
// - a projection whose result is split into heads ([T, 12] -> [T, 3, 4])
//   before a scale and a residual in the heads layout: the reshape moves
//   after the elementwise op, which joins the epilogue.

// SEVEN: coda-check ok: 84 elements
// SEVEN: coda-check ok: 48 elements
// SEVEN: coda-check ok: 84 elements
// ONE: coda-check ok: 12 elements
// ONE: coda-check ok: 48 elements
// ONE: coda-check ok: 12 elements

// CHECK-LABEL: func.func @reference
// CHECK: %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]]
// CHECK: %[[G1:.*]] = coda.gemm %[[X]], %arg1 transpose_b : tensor<?x8xf32>, tensor<6x8xf32>
// CHECK-NEXT: epilogue(%{{.*}}, col %{{.*}} = %arg2 : tensor<6xf32>, tile %{{.*}} = %{{.*}} : tensor<?x6xf32>)
// CHECK: tensor.expand_shape %[[G1]] {{\[}}[0, 1], [2]]
// CHECK: coda.gemm %arg4, %arg5 transpose_a : tensor<?x8xf32>, tensor<?x6xf32>
// CHECK-NEXT: epilogue(%{{.*}}, row %{{.*}} = %arg6 : tensor<8xf32>)
// CHECK: %[[G3:.*]] = coda.gemm %arg4, %arg7 transpose_b : tensor<?x8xf32>, tensor<12x8xf32>
// CHECK-NEXT: epilogue(%{{.*}}, tile %{{.*}} = %{{.*}} : tensor<?x12xf32>)
// CHECK: tensor.expand_shape %[[G3]] {{\[}}[0], [1, 2]]
// CHECK-NOT: linalg.generic

#id3 = affine_map<(b, m, n) -> (b, m, n)>
#col3 = affine_map<(b, m, n) -> (n)>
#id2 = affine_map<(m, n) -> (m, n)>
#row2 = affine_map<(m, n) -> (m)>

func.func @reference(%x: tensor<2x?x8xf32>, %w: tensor<6x8xf32>, %bias: tensor<6xf32>, %res: tensor<2x?x6xf32>,
                     %xs: tensor<?x8xf32>, %g: tensor<?x6xf32>, %gbias: tensor<8xf32>,
                     %wq: tensor<12x8xf32>, %qres: tensor<?x3x4xf32>)
    -> (tensor<2x?x6xf32>, tensor<8x6xf32>, tensor<?x3x4xf32>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %t = tensor.dim %x, %c1 : tensor<2x?x8xf32>

  // A linear layer on a batch of sequences.
  %e1 = tensor.empty(%t) : tensor<2x?x6xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x?x6xf32>) -> tensor<2x?x6xf32>
  %mm1 = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                         iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x?x8xf32>, tensor<6x8xf32>) outs(%z1 : tensor<2x?x6xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x?x6xf32>
  %y1 = linalg.generic {indexing_maps = [#id3, #col3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%mm1, %bias, %res : tensor<2x?x6xf32>, tensor<6xf32>, tensor<2x?x6xf32>) outs(%e1 : tensor<2x?x6xf32>) {
  ^bb0(%v: f32, %c: f32, %r: f32, %o: f32):
    %0 = arith.addf %v, %c : f32
    %1 = arith.addf %0, %r : f32
    linalg.yield %1 : f32
  } -> tensor<2x?x6xf32>

  // A weight gradient: X^T G, X read as stored.
  %e2 = tensor.empty() : tensor<8x6xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x6xf32>) -> tensor<8x6xf32>
  %mm2 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%xs, %g : tensor<?x8xf32>, tensor<?x6xf32>) outs(%z2 : tensor<8x6xf32>) -> tensor<8x6xf32>
  %y2 = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%mm2, %gbias : tensor<8x6xf32>, tensor<8xf32>) outs(%e2 : tensor<8x6xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %0 = arith.addf %v, %c : f32
    linalg.yield %0 : f32
  } -> tensor<8x6xf32>

  // A projection split into heads, then scaled and added in that layout.
  %ts = tensor.dim %xs, %c0 : tensor<?x8xf32>
  %e3 = tensor.empty(%ts) : tensor<?x12xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<?x12xf32>) -> tensor<?x12xf32>
  %mm3 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%xs, %wq : tensor<?x8xf32>, tensor<12x8xf32>) outs(%z3 : tensor<?x12xf32>) -> tensor<?x12xf32>
  %heads = tensor.expand_shape %mm3 [[0], [1, 2]] output_shape [%ts, 3, 4] : tensor<?x12xf32> into tensor<?x3x4xf32>
  %e4 = tensor.empty(%ts) : tensor<?x3x4xf32>
  %y3 = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%heads, %qres : tensor<?x3x4xf32>, tensor<?x3x4xf32>) outs(%e4 : tensor<?x3x4xf32>) {
  ^bb0(%v: f32, %r: f32, %o: f32):
    %scale = arith.constant 0.5 : f32
    %0 = arith.mulf %v, %scale : f32
    %1 = arith.addf %0, %r : f32
    linalg.yield %1 : f32
  } -> tensor<?x3x4xf32>
  return %y1, %y2, %y3 : tensor<2x?x6xf32>, tensor<8x6xf32>, tensor<?x3x4xf32>
}
