// RUN: coda-opt %s --coda-convert-matmuls --coda-fuse-rope --canonicalize --split-input-file | FileCheck %s

#id3 = affine_map<(t, h, i) -> (t, h, i)>
#tab = affine_map<(t, h, i) -> (t, i)>

// q = x Wq^T, then q * cos + rotate_half(q) * sin per head of 8 columns:
// one GEMM whose epilogue rotates the column pairs (i, i + 4) of each head,
// reading cos/sin as 8-periodic tables.
// CHECK-LABEL: func @rotate_half
// CHECK-SAME: %[[COS:[a-z0-9_]+]]: tensor<5x8xf32>, %[[SIN:[a-z0-9_]+]]: tensor<5x8xf32>)
// CHECK: %[[Q:.+]] = coda.gemm %{{.*}}, %{{.*}} transpose_b : tensor<5x6xf32>, tensor<16x6xf32>
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]], periodic %[[C:[a-z0-9_]+]] = %[[COS]] : tensor<5x8xf32>, periodic %[[S:[a-z0-9_]+]] = %[[SIN]] : tensor<5x8xf32>)
// CHECK-NEXT: outs(%{{.*}} : tensor<5x16xf32>)
// CHECK: %[[R:.+]] = coda.pair_map stride 4 (%[[LO:[a-z0-9_]+]], %[[HI:[a-z0-9_]+]]) = %[[ACC]], (%[[C0:[a-z0-9_]+]], %[[C1:[a-z0-9_]+]]) = %[[C]], (%[[S0:[a-z0-9_]+]], %[[S1:[a-z0-9_]+]]) = %[[S]] : f32, f32, f32 -> f32
// CHECK: %[[NEG:.+]] = arith.negf %[[HI]] : f32
// CHECK: arith.mulf %[[LO]], %[[C0]] : f32
// CHECK: arith.mulf %[[NEG]], %[[S0]] : f32
// CHECK: arith.mulf %[[HI]], %[[C1]] : f32
// CHECK: arith.mulf %[[LO]], %[[S1]] : f32
// CHECK: coda.yield %[[R]] : f32
// CHECK-NOT: tensor.concat
// CHECK: return %[[Q]]
func.func @rotate_half(%x: tensor<5x6xf32>, %w: tensor<16x6xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>) -> tensor<5x16xf32> {
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

// -----

#id3 = affine_map<(t, h, i) -> (t, h, i)>
#tab = affine_map<(t, h, i) -> (t, i)>

// Not fused: q is also returned, so the GEMM would have to run twice; and the
// halves are concatenated the wrong way round (not rotate_half).
// CHECK-LABEL: func @not_fused
// CHECK-NOT: coda.pair_map
// CHECK: tensor.concat
// CHECK-NOT: coda.pair_map
func.func @not_fused(%x: tensor<5x6xf32>, %w: tensor<6x16xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>)
    -> (tensor<5x16xf32>, tensor<5x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5x16xf32>) -> tensor<5x16xf32>
  %q = linalg.matmul ins(%x, %w : tensor<5x6xf32>, tensor<6x16xf32>) outs(%z : tensor<5x16xf32>) -> tensor<5x16xf32>
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [5, 2, 8] : tensor<5x16xf32> into tensor<5x2x8xf32>
  %lo = tensor.extract_slice %q3[0, 0, 0] [5, 2, 4] [1, 1, 1] : tensor<5x2x8xf32> to tensor<5x2x4xf32>
  %hi = tensor.extract_slice %q3[0, 0, 4] [5, 2, 4] [1, 1, 1] : tensor<5x2x8xf32> to tensor<5x2x4xf32>
  %hE = tensor.empty() : tensor<5x2x4xf32>
  %neg = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%lo : tensor<5x2x4xf32>) outs(%hE : tensor<5x2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<5x2x4xf32>
  %rot = tensor.concat dim(2) %neg, %hi : (tensor<5x2x4xf32>, tensor<5x2x4xf32>) -> tensor<5x2x8xf32>
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
  return %y, %q : tensor<5x16xf32>, tensor<5x16xf32>
}
