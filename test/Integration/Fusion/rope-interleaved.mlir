// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=CHECK-FUSED

// RoPE in the interleaved convention, written without complex numbers as
// frontends lower it (reshape to pairs, take x[..., 0] and x[..., 1], rotate,
// stack, flatten), fused into its projection; against the unfused program.
// 5 tokens, 2 heads of 8 columns, tables of 4 angles per token.

// CHECK: coda-check ok: 80 elements

// CHECK-FUSED: coda.gemm
// CHECK-FUSED-NEXT: epilogue(%{{.*}}, periodic %{{.*}} = %{{.*}} : tensor<5x8xf32>, periodic %{{.*}} = %{{.*}} : tensor<5x8xf32>)
// CHECK-FUSED: coda.pair_map (%{{.*}}, %{{.*}}) = %{{.*}}, (%{{.*}}, %{{.*}}) = %{{.*}}, (%{{.*}}, %{{.*}}) = %{{.*}} : f32, f32, f32 -> f32
// CHECK-FUSED-NOT: tensor.concat

#id3 = affine_map<(t, h, j) -> (t, h, j)>
#tab = affine_map<(t, h, j) -> (t, j)>

func.func @reference(%x: tensor<5x6xf32>, %w: tensor<16x6xf32>, %cos: tensor<5x4xf32>, %sin: tensor<5x4xf32>) -> tensor<5x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5x16xf32>) -> tensor<5x16xf32>
  %wtE = tensor.empty() : tensor<6x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x6xf32>) outs(%wtE : tensor<6x16xf32>) permutation = [1, 0]
  %q = linalg.matmul ins(%x, %wt : tensor<5x6xf32>, tensor<6x16xf32>) outs(%z : tensor<5x16xf32>) -> tensor<5x16xf32>
  %q4 = tensor.expand_shape %q [[0], [1, 2, 3]] output_shape [5, 2, 4, 2] : tensor<5x16xf32> into tensor<5x2x4x2xf32>
  %x0 = tensor.extract_slice %q4[0, 0, 0, 0] [5, 2, 4, 1] [1, 1, 1, 1] : tensor<5x2x4x2xf32> to tensor<5x2x4xf32>
  %x1 = tensor.extract_slice %q4[0, 0, 0, 1] [5, 2, 4, 1] [1, 1, 1, 1] : tensor<5x2x4x2xf32> to tensor<5x2x4xf32>
  %e3 = tensor.empty() : tensor<5x2x4xf32>
  %y0 = linalg.generic {indexing_maps = [#id3, #id3, #tab, #tab, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x0, %x1, %cos, %sin : tensor<5x2x4xf32>, tensor<5x2x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>) outs(%e3 : tensor<5x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %s: f32, %o: f32):
    %ac = arith.mulf %a, %c : f32
    %bs = arith.mulf %b, %s : f32
    %r = arith.subf %ac, %bs : f32
    linalg.yield %r : f32
  } -> tensor<5x2x4xf32>
  %y1 = linalg.generic {indexing_maps = [#id3, #id3, #tab, #tab, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x0, %x1, %cos, %sin : tensor<5x2x4xf32>, tensor<5x2x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>) outs(%e3 : tensor<5x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %s: f32, %o: f32):
    %bc = arith.mulf %b, %c : f32
    %as = arith.mulf %a, %s : f32
    %r = arith.addf %bc, %as : f32
    linalg.yield %r : f32
  } -> tensor<5x2x4xf32>
  %y0e = tensor.expand_shape %y0 [[0], [1], [2, 3]] output_shape [5, 2, 4, 1] : tensor<5x2x4xf32> into tensor<5x2x4x1xf32>
  %y1e = tensor.expand_shape %y1 [[0], [1], [2, 3]] output_shape [5, 2, 4, 1] : tensor<5x2x4xf32> into tensor<5x2x4x1xf32>
  %stacked = tensor.concat dim(3) %y0e, %y1e : (tensor<5x2x4x1xf32>, tensor<5x2x4x1xf32>) -> tensor<5x2x4x2xf32>
  %y = tensor.collapse_shape %stacked [[0], [1, 2, 3]] : tensor<5x2x4x2xf32> into tensor<5x16xf32>
  return %y : tensor<5x16xf32>
}
