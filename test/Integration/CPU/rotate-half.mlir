// RUN: %differential %s | %cpu-runner | FileCheck %s

// Strided pairs and periodic inputs: RoPE in the rotate_half convention of
// Hugging Face Llama. Heads of 8 columns pair column i with i + 4
// (stride 4); cos/sin are 8-wide per-token tables read at n mod 8 for every
// head. Plus a strided 2 -> 1 contraction (pair j of head b to column
// 4b + j). Against the unfused cat(-x2, x1) formulation.

// CHECK: coda-check ok: 360 elements
// CHECK: coda-check ok: 180 elements

func.func @fused(%x: tensor<15x6xf32>, %w: tensor<24x6xf32>, %cos: tensor<15x8xf32>, %sin: tensor<15x8xf32>,
                 %o: tensor<15x24xf32>, %h: tensor<15x12xf32>) -> (tensor<15x24xf32>, tensor<15x12xf32>) {
  %y, %s = coda.gemm %x, %w transpose_b : tensor<15x6xf32>, tensor<24x6xf32>
      epilogue(%acc, periodic %c = %cos : tensor<15x8xf32>, periodic %sn = %sin : tensor<15x8xf32>)
      outs(%o, %h : tensor<15x24xf32>, tensor<15x12xf32>) {
    %r = coda.pair_map stride 4 (%lo, %hi) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %sn : f32, f32, f32 -> f32 {
      // y_lo = lo * cos_lo - hi * sin_lo ; y_hi = hi * cos_hi + lo * sin_hi
      %0 = arith.mulf %lo, %c0 : f32
      %1 = arith.mulf %hi, %s0 : f32
      %2 = arith.subf %0, %1 : f32
      %3 = arith.mulf %hi, %c1 : f32
      %4 = arith.mulf %lo, %s1 : f32
      %5 = arith.addf %3, %4 : f32
      coda.yield %2, %5 : f32, f32
    }
    %d = coda.pair_contract stride 4 (%lo, %hi) = %acc : f32 -> !coda.pair<f32> {
      %0 = arith.subf %lo, %hi : f32
      coda.yield %0 : f32
    }
    coda.yield %r, %d : f32, !coda.pair<f32>
  }
  return %y, %s : tensor<15x24xf32>, tensor<15x12xf32>
}

#id3 = affine_map<(t, h, i) -> (t, h, i)>
#tab = affine_map<(t, h, i) -> (t, i)>

func.func @reference(%x: tensor<15x6xf32>, %w: tensor<24x6xf32>, %cos: tensor<15x8xf32>, %sin: tensor<15x8xf32>)
    -> (tensor<15x24xf32>, tensor<15x12xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<15x24xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<15x24xf32>) -> tensor<15x24xf32>
  %wtE = tensor.empty() : tensor<6x24xf32>
  %wt = linalg.transpose ins(%w : tensor<24x6xf32>) outs(%wtE : tensor<6x24xf32>) permutation = [1, 0]
  %q = linalg.matmul ins(%x, %wt : tensor<15x6xf32>, tensor<6x24xf32>) outs(%z : tensor<15x24xf32>) -> tensor<15x24xf32>
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [15, 3, 8] : tensor<15x24xf32> into tensor<15x3x8xf32>
  %lo = tensor.extract_slice %q3[0, 0, 0] [15, 3, 4] [1, 1, 1] : tensor<15x3x8xf32> to tensor<15x3x4xf32>
  %hi = tensor.extract_slice %q3[0, 0, 4] [15, 3, 4] [1, 1, 1] : tensor<15x3x8xf32> to tensor<15x3x4xf32>
  %hE = tensor.empty() : tensor<15x3x4xf32>
  %neg = linalg.negf ins(%hi : tensor<15x3x4xf32>) outs(%hE : tensor<15x3x4xf32>) -> tensor<15x3x4xf32>
  %rot = tensor.concat dim(2) %neg, %lo : (tensor<15x3x4xf32>, tensor<15x3x4xf32>) -> tensor<15x3x8xf32>
  %e3 = tensor.empty() : tensor<15x3x8xf32>
  %r3 = linalg.generic {indexing_maps = [#id3, #id3, #tab, #tab, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q3, %rot, %cos, %sin : tensor<15x3x8xf32>, tensor<15x3x8xf32>, tensor<15x8xf32>, tensor<15x8xf32>) outs(%e3 : tensor<15x3x8xf32>) {
  ^bb0(%v: f32, %r: f32, %c: f32, %s: f32, %out: f32):
    %a = arith.mulf %v, %c : f32
    %b = arith.mulf %r, %s : f32
    %y = arith.addf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<15x3x8xf32>
  %y = tensor.collapse_shape %r3 [[0], [1, 2]] : tensor<15x3x8xf32> into tensor<15x24xf32>
  %dE = tensor.empty() : tensor<15x3x4xf32>
  %d3 = linalg.sub ins(%lo, %hi : tensor<15x3x4xf32>, tensor<15x3x4xf32>) outs(%dE : tensor<15x3x4xf32>) -> tensor<15x3x4xf32>
  %d = tensor.collapse_shape %d3 [[0], [1, 2]] : tensor<15x3x4xf32> into tensor<15x12xf32>
  return %y, %d : tensor<15x24xf32>, tensor<15x12xf32>
}
