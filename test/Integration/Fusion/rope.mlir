// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=CHECK-FUSED

// RoPE in the rotate_half form, fused into its projection's epilogue, against
// the unfused slices + negation + concat + rotation. 5 tokens, 2 heads of 8.

// CHECK: coda-check ok: 80 elements
// CHECK-FUSED: coda.pair_map stride 4
// CHECK-FUSED-NOT: tensor.concat

#id3 = affine_map<(t, h, i) -> (t, h, i)>
#tab = affine_map<(t, h, i) -> (t, i)>

func.func @reference(%x: tensor<5x6xf32>, %w: tensor<16x6xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>) -> tensor<5x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5x16xf32>) -> tensor<5x16xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<5x6xf32>, tensor<16x6xf32>) outs(%z : tensor<5x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<5x16xf32>
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [5, 2, 8] : tensor<5x16xf32> into tensor<5x2x8xf32>
  %lo = tensor.extract_slice %q3[0, 0, 0] [5, 2, 4] [1, 1, 1] : tensor<5x2x8xf32> to tensor<5x2x4xf32>
  %hi = tensor.extract_slice %q3[0, 0, 4] [5, 2, 4] [1, 1, 1] : tensor<5x2x8xf32> to tensor<5x2x4xf32>
  %hE = tensor.empty() : tensor<5x2x4xf32>
  %neg = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%hi : tensor<5x2x4xf32>) outs(%hE : tensor<5x2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<5x2x4xf32>
  %rot = tensor.concat dim(2) %neg, %lo : (tensor<5x2x4xf32>, tensor<5x2x4xf32>) -> tensor<5x2x8xf32>
  %e3 = tensor.empty() : tensor<5x2x8xf32>
  %r3 = linalg.generic {indexing_maps = [#id3, #id3, #tab, #tab, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q3, %rot, %cos, %sin : tensor<5x2x8xf32>, tensor<5x2x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>) outs(%e3 : tensor<5x2x8xf32>) {
  ^bb0(%v: f32, %r: f32, %c: f32, %s: f32, %out: f32):
    %a = arith.mulf %v, %c : f32
    %b = arith.mulf %r, %s : f32
    %y = arith.addf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<5x2x8xf32>
  %y = tensor.collapse_shape %r3 [[0], [1, 2]] : tensor<5x2x8xf32> into tensor<5x16xf32>
  return %y : tensor<5x16xf32>
}

