// RUN: coda-opt %s --coda-convert-matmuls --coda-fuse-pointwise --canonicalize --split-input-file | FileCheck %s

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>


// A chain of elementwise consumers (column bias, then ReLU reading a row
// scale and the position) joins the epilogue.
// CHECK-LABEL: func @chain
// CHECK-SAME: (%{{[a-z0-9_]+}}: tensor<4x8xf32>, %{{[a-z0-9_]+}}: tensor<8x6xf32>, %[[BIAS:[a-z0-9_]+]]: tensor<6xf32>, %[[S:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK: %[[G:.+]] = coda.gemm
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]], col %[[B:[a-z0-9_]+]] = %[[BIAS]] : tensor<6xf32>, row %[[R:[a-z0-9_]+]] = %[[S]] : tensor<4xf32>)
// CHECK: %[[X:.+]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK: %[[Y:.+]] = arith.mulf %[[X]], %[[R]] : f32
// CHECK: coda.col_index
// CHECK: arith.maximumf
// CHECK: coda.yield
// CHECK-NOT: linalg.generic
// CHECK: return %[[G]]
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %bias: tensor<6xf32>, %s: tensor<4xf32>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %x = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<4x6xf32>, tensor<6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %0 = arith.addf %v, %c : f32
    linalg.yield %0 : f32
  } -> tensor<4x6xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<4x6xf32>, tensor<4xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %r: f32, %o: f32):
    %0 = arith.mulf %v, %r : f32
    %n = linalg.index 1 : index
    %ni = arith.index_cast %n : index to i32
    %nf = arith.sitofp %ni : i32 to f32
    %1 = arith.maximumf %0, %nf : f32
    linalg.yield %1 : f32
  } -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>

// An intermediate that is also returned stays as an extra tile output.
// CHECK-LABEL: func @intermediate_with_other_use
// CHECK: %[[G:.+]]:2 = coda.gemm
// CHECK: coda.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK: return %[[G]]#0, %[[G]]#1
func.func @intermediate_with_other_use(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %0 = math.tanh %v : f32
    linalg.yield %0 : f32
  } -> tensor<4x6xf32>
  return %mm, %t : tensor<4x6xf32>, tensor<4x6xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>

// Not fused: an operand computed after the GEMM (that would reorder the
// program), and a transposed read of the GEMM's result.
// CHECK-LABEL: func @not_fused
// CHECK: coda.gemm
// CHECK: linalg.exp
// CHECK: linalg.generic
// CHECK: linalg.generic
func.func @not_fused(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %later = linalg.exp ins(%c : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %later : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(m, n) -> (n, m)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<4x4xf32>
}
