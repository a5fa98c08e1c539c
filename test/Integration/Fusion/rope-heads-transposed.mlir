// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=7 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=SEVEN
// RUN: coda-opt %s --coda-test-differential-main="fuse dynamic-size=1 rtol=1e-4 atol=1e-5" | %cpu-runner | FileCheck %s --check-prefix=ONE
// RUN: coda-opt %s --coda-fuse | FileCheck %s

// RoPE after the heads transpose, as Hugging Face's Llama writes it
// (`q_proj(x).view(T, H, D).transpose(0, 1)`, then rotate_half with the
// cos / sin tables unsqueezed to [1, T, D] and broadcast over the heads),
// with a dynamic token count
// (run with 7 tokens and with 1): the transpose moves after the slices, the
// negation, the concatenation and the rotation, which then join the
// projection's epilogue as a pair_map; one transpose of the rotated heads
// is left, where the unfused program had the transpose and four kernels.

// SEVEN: coda-check ok: 112 elements
// ONE: coda-check ok: 16 elements

// CHECK-LABEL: func.func @reference
// CHECK: %[[Q:.*]] = coda.gemm %arg0, %arg1 transpose_b
// CHECK-SAME: tensor<?x6xf32>, tensor<16x6xf32>
// CHECK: coda.pair_map stride 4
// CHECK: %[[H:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2]]
// CHECK: %[[T:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[H]] : tensor<?x2x8xf32>)
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
// CHECK-NOT: tensor.concat
// CHECK-NOT: tensor.extract_slice
// CHECK: return %[[T]]

#id3 = affine_map<(h, t, i) -> (h, t, i)>
#tab = affine_map<(h, t, i) -> (0, t, i)>

func.func @reference(%x: tensor<?x6xf32>, %w: tensor<16x6xf32>, %cos: tensor<1x?x8xf32>, %sin: tensor<1x?x8xf32>) -> tensor<2x?x8xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x6xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%t) : tensor<?x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x16xf32>) -> tensor<?x16xf32>
  %q = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<?x6xf32>, tensor<16x6xf32>) outs(%z : tensor<?x16xf32>) -> tensor<?x16xf32>
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [%t, 2, 8] : tensor<?x16xf32> into tensor<?x2x8xf32>
  %et = tensor.empty(%t) : tensor<2x?x8xf32>
  %qt = linalg.transpose ins(%q3 : tensor<?x2x8xf32>) outs(%et : tensor<2x?x8xf32>) permutation = [1, 0, 2]
  %lo = tensor.extract_slice %qt[0, 0, 0] [2, %t, 4] [1, 1, 1] : tensor<2x?x8xf32> to tensor<2x?x4xf32>
  %hi = tensor.extract_slice %qt[0, 0, 4] [2, %t, 4] [1, 1, 1] : tensor<2x?x8xf32> to tensor<2x?x4xf32>
  %hE = tensor.empty(%t) : tensor<2x?x4xf32>
  %neg = linalg.negf ins(%hi : tensor<2x?x4xf32>) outs(%hE : tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  %rot = tensor.concat dim(2) %neg, %lo : (tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> tensor<2x?x8xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #tab, #tab, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%qt, %rot, %cos, %sin : tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>) outs(%et : tensor<2x?x8xf32>) {
  ^bb0(%v: f32, %rr: f32, %c: f32, %s: f32, %out: f32):
    %a = arith.mulf %v, %c : f32
    %b = arith.mulf %rr, %s : f32
    %y = arith.addf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<2x?x8xf32>
  return %r : tensor<2x?x8xf32>
}
