// RUN: coda-opt %s --coda-split-row-reductions --split-input-file | FileCheck %s
// RUN: not coda-opt %s --coda-split-row-reductions=min-columns=64 --split-input-file 2>&1 | FileCheck %s --check-prefix=INVALID

// A norm's statistic of a function's input, [T, 1024] -> [T, 1] (the map
// torch-mlir's sum(-1, keepdim) gives): partials over 128 interleaved
// columns, the body as written, then each row's 128 partials summed.
// CHECK-LABEL: func @sum_of_squares
// CHECK-SAME: (%[[X:.+]]: tensor<?x1024xbf16>, %[[OUT:.+]]: tensor<?x1xf32>)
// CHECK: %[[Z:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[E:.+]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [%{{.+}}, 8, 128] : tensor<?x1024xbf16> into tensor<?x8x128xbf16>
// CHECK: %[[F:.+]] = linalg.fill ins(%[[Z]] : f32) outs(%{{.+}} : tensor<?x128xf32>)
// CHECK: %[[P:.+]] = linalg.generic {indexing_maps = [#[[IN:.+]], #[[PART:.+]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[E]] : tensor<?x8x128xbf16>) outs(%[[F]] : tensor<?x128xf32>)
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[R:.+]] = linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}], iterator_types = ["parallel", "reduction"]} ins(%[[P]] : tensor<?x128xf32>) outs(%[[OUT]] : tensor<?x1xf32>)
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32):
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT: linalg.yield %[[S]] : f32
// CHECK: return %[[R]]
#id = affine_map<(t, k) -> (t, k)>
#col = affine_map<(t, k) -> (t, 0)>
func.func @sum_of_squares(%x: tensor<?x1024xbf16>, %out: tensor<?x1xf32>) -> tensor<?x1xf32> {
  %r = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<?x1024xbf16>) outs(%out : tensor<?x1xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %e = arith.extf %in : bf16 to f32
    %sq = arith.mulf %e, %e : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  return %r : tensor<?x1xf32>
}

// -----

// A row maximum into [T]: the identity is the maximum's.
// CHECK-LABEL: func @row_max
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32):
// CHECK-NEXT: arith.maximumf %[[B]], %[[A]] : f32
#id2 = affine_map<(t, k) -> (t, k)>
#row = affine_map<(t, k) -> (t)>
func.func @row_max(%x: tensor<64x2048xf32>, %out: tensor<64xf32>) -> tensor<64xf32> {
  %r = linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x2048xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

// Left as written: rows narrower than min-columns, a width that is not a
// multiple of the lanes, a reduction over the outer dimension, a body that
// reads its indices.
// CHECK-LABEL: func @kept
// CHECK-NOT: tensor.expand_shape
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
#id3 = affine_map<(t, k) -> (t, k)>
#row3 = affine_map<(t, k) -> (t)>
#colT = affine_map<(t, k) -> (k, t)>
func.func @kept(%narrow: tensor<64x512xf32>, %odd: tensor<64x1100xf32>, %tall: tensor<2048x64xf32>,
                %wide: tensor<64x2048xf32>, %out: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %a = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "reduction"]}
      ins(%narrow : tensor<64x512xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %b = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "reduction"]}
      ins(%odd : tensor<64x1100xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %c = linalg.generic {indexing_maps = [#colT, #row3], iterator_types = ["parallel", "reduction"]}
      ins(%tall : tensor<2048x64xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %d = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "reduction"]}
      ins(%wide : tensor<64x2048xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %k = linalg.index 1 : index
    %ki = arith.index_cast %k : index to i64
    %kf = arith.sitofp %ki : i64 to f32
    %w = arith.mulf %in, %kf : f32
    %s = arith.addf %w, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %a, %b, %c, %d : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

// INVALID: coda-split-row-reductions: lanes must be positive and min-columns above lanes
func.func @any() {
  return
}
