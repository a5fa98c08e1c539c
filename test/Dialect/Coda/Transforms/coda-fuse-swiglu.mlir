// RUN: coda-opt %s --coda-convert-matmuls --coda-fuse-swiglu --canonicalize --split-input-file | FileCheck %s

#id = affine_map<(m, n) -> (m, n)>

// silu(x Wg^T) * (x Wu^T) with nn.Linear weights: one GEMM over the
// interleaved weights, a pair contraction, an M x N output.
// CHECK-LABEL: func @swiglu
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>, %[[WG:[a-z0-9_]+]]: tensor<6x8xf32>, %[[WU:[a-z0-9_]+]]: tensor<6x8xf32>)
// CHECK: %[[S0:.+]] = tensor.insert_slice %[[WG]] into %{{.*}}[0, 0, 0] [6, 1, 8] [1, 1, 1] {coda.weight_transform}
// CHECK: %[[S1:.+]] = tensor.insert_slice %[[WU]] into %[[S0]][0, 1, 0] [6, 1, 8] [1, 1, 1] {coda.weight_transform}
// CHECK: %[[W:.+]] = tensor.collapse_shape %[[S1]] {{\[}}[0, 1], [2]] {coda.weight_transform} : tensor<6x2x8xf32> into tensor<12x8xf32>
// CHECK: %[[H:.+]] = coda.gemm %[[X]], %[[W]] transpose_b : tensor<4x8xf32>, tensor<12x8xf32>
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]])
// CHECK-NEXT: outs(%{{.*}} : tensor<4x6xf32>)
// CHECK: %[[P:.+]] = coda.pair_contract (%[[G:[a-z0-9_]+]], %[[U:[a-z0-9_]+]]) = %[[ACC]] : f32 -> !coda.pair<f32>
// CHECK: math.exp
// CHECK: coda.yield %{{.*}} : f32
// CHECK: coda.yield %[[P]] : !coda.pair<f32>
// CHECK: return %[[H]]
func.func @swiglu(%x: tensor<4x8xf32>, %wg: tensor<6x8xf32>, %wu: tensor<6x8xf32>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wg : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wu : tensor<4x8xf32>, tensor<6x8xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %u : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%gv: f32, %uv: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %gv : f32
    %ex = math.exp %n : f32
    %d = arith.addf %one, %ex : f32
    %silu = arith.divf %gv, %d : f32
    %y = arith.mulf %silu, %uv : f32
    linalg.yield %y : f32
  } -> tensor<4x6xf32>
  return %h : tensor<4x6xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>

// K x N weights interleave along their columns.
// CHECK-LABEL: func @kn_weights
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] {coda.weight_transform} : tensor<8x6x2xf32> into tensor<8x12xf32>
// CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x12xf32>
// CHECK: coda.pair_contract
func.func @kn_weights(%x: tensor<4x8xf32>, %wg: tensor<8x6xf32>, %wu: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %g = linalg.matmul ins(%x, %wg : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %u = linalg.matmul ins(%x, %wu : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %u : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%gv: f32, %uv: f32, %o: f32):
    %y = arith.mulf %gv, %uv : f32
    linalg.yield %y : f32
  } -> tensor<4x6xf32>
  return %h : tensor<4x6xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>

// Not merged: the two products read different lhs; the gate is also
// returned (so it must still be written).
// CHECK-LABEL: func @not_merged
// CHECK-NOT: coda.pair_contract
// CHECK-COUNT-4: coda.gemm
// CHECK-NOT: coda.pair_contract
func.func @not_merged(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %wg: tensor<8x6xf32>, %wu: tensor<8x6xf32>)
    -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %g = linalg.matmul ins(%x, %wg : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %u = linalg.matmul ins(%y, %wu : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %u : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%gv: f32, %uv: f32, %o: f32):
    %p = arith.mulf %gv, %uv : f32
    linalg.yield %p : f32
  } -> tensor<4x6xf32>
  %g2 = linalg.matmul ins(%x, %wg : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %u2 = linalg.matmul ins(%x, %wu : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  %h2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g2, %u2 : tensor<4x6xf32>, tensor<4x6xf32>) outs(%e : tensor<4x6xf32>) {
  ^bb0(%gv: f32, %uv: f32, %o: f32):
    %p = arith.mulf %gv, %uv : f32
    linalg.yield %p : f32
  } -> tensor<4x6xf32>
  return %h, %h2, %g2 : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>
}
