// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=7 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=SEVEN
// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=1 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=ONE
// RUN: coda-opt %s --coda-fuse | FileCheck %s

// Hugging Face's Llama RoPE with its batch, as torch-mlir lowers it: q_proj
// on [B, T, hidden] (the batch folded into the GEMM's rows), the heads split
// ([B, T, H, D]) and transposed ([B, H, T, D]), rotate_half through slices,
// negation and concatenation, and the per-sequence tables [B, T, D]
// unsqueezed to [B, 1, T, D]; a dynamic token count, run with 7 tokens and
// with 1. The rotation becomes the projection's pair_map with the tables as
// [B * T, D] periodic inputs; one transpose of the rotated heads is left.

// SEVEN: coda-check ok: 224 elements
// ONE: coda-check ok: 32 elements

// CHECK-LABEL: func.func @reference
// CHECK-DAG: %[[X:.*]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]]
// CHECK-DAG: %[[COS:.*]] = tensor.collapse_shape %arg2 {{\[}}[0, 1, 2], [3]]
// CHECK: coda.gemm %[[X]], %arg1 transpose_b : tensor<?x6xf32>, tensor<16x6xf32>
// CHECK-NEXT: epilogue(%{{.*}}, periodic %{{.*}} = %[[COS]] : tensor<?x8xf32>, periodic
// CHECK: coda.pair_map stride 4
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2, 3]]
// CHECK-NOT: tensor.concat
// CHECK-NOT: tensor.extract_slice

#id4 = affine_map<(b, h, t, i) -> (b, h, t, i)>
#tab = affine_map<(b, h, t, i) -> (b, 0, t, i)>

func.func @reference(%x: tensor<2x?x6xf32>, %w: tensor<16x6xf32>, %cos: tensor<2x1x?x8xf32>, %sin: tensor<2x1x?x8xf32>) -> tensor<2x2x?x8xf32> {
  %c1 = arith.constant 1 : index
  %t = tensor.dim %x, %c1 : tensor<2x?x6xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%t) : tensor<2x?x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x?x6xf32>, tensor<16x6xf32>) outs(%z : tensor<2x?x16xf32>) {
  ^bb0(%a: f32, %bb: f32, %acc: f32):
    %m = arith.mulf %a, %bb : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x?x16xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, %t, 2, 8] : tensor<2x?x16xf32> into tensor<2x?x2x8xf32>
  %et = tensor.empty(%t) : tensor<2x2x?x8xf32>
  %qt = linalg.transpose ins(%q4 : tensor<2x?x2x8xf32>) outs(%et : tensor<2x2x?x8xf32>) permutation = [0, 2, 1, 3]
  %lo = tensor.extract_slice %qt[0, 0, 0, 0] [2, 2, %t, 4] [1, 1, 1, 1] : tensor<2x2x?x8xf32> to tensor<2x2x?x4xf32>
  %hi = tensor.extract_slice %qt[0, 0, 0, 4] [2, 2, %t, 4] [1, 1, 1, 1] : tensor<2x2x?x8xf32> to tensor<2x2x?x4xf32>
  %hE = tensor.empty(%t) : tensor<2x2x?x4xf32>
  %neg = linalg.negf ins(%hi : tensor<2x2x?x4xf32>) outs(%hE : tensor<2x2x?x4xf32>) -> tensor<2x2x?x4xf32>
  %rot = tensor.concat dim(3) %neg, %lo : (tensor<2x2x?x4xf32>, tensor<2x2x?x4xf32>) -> tensor<2x2x?x8xf32>
  %r = linalg.generic {indexing_maps = [#id4, #id4, #tab, #tab, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qt, %rot, %cos, %sin : tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>, tensor<2x1x?x8xf32>, tensor<2x1x?x8xf32>) outs(%et : tensor<2x2x?x8xf32>) {
  ^bb0(%v: f32, %rr: f32, %c: f32, %s: f32, %out: f32):
    %a = arith.mulf %v, %c : f32
    %b = arith.mulf %rr, %s : f32
    %y = arith.addf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<2x2x?x8xf32>
  return %r : tensor<2x2x?x8xf32>
}
