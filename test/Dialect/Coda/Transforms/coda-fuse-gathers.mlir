// RUN: coda-opt %s --coda-convert-matmuls --coda-fuse-gathers --canonicalize --split-input-file | FileCheck %s

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#r = affine_map<(m) -> (m)>

// nll[m] = -(C[m, t_m] - lse[m]) read through tensor.extract of the M x N
// log-probabilities: the GEMM picks C[m, t_m] and the M x N tensor goes away.
// CHECK-LABEL: func @target_gather
// CHECK-SAME: (%{{[a-z0-9_]+}}: tensor<4x8xf32>, %{{[a-z0-9_]+}}: tensor<8x10xf32>, %[[LSE:[a-z0-9_]+]]: tensor<4xf32>, %[[T:[a-z0-9_]+]]: tensor<4xi64>)
// (The per-row column j = t folds to t itself.)
// CHECK: %[[P:.+]] = coda.gemm
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]], row %[[JV:[a-z0-9_]+]] = %[[T]] : tensor<4xi64>)
// CHECK: %[[SEL:.+]] = coda.row_select %[[ACC]] at %[[JV]] : f32, i64
// CHECK: coda.yield %[[SEL]] : !coda.row<f32>
// CHECK: linalg.generic {{.*}} ins(%[[T]], %[[P]], %[[LSE]] : tensor<4xi64>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT: tensor.extract
// CHECK: arith.subf
// CHECK: arith.negf
func.func @target_gather(%a: tensor<4x8xf32>, %b: tensor<8x10xf32>, %lse: tensor<4xf32>, %t: tensor<4xi64>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
  %logits = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x10xf32>) outs(%z : tensor<4x10xf32>) -> tensor<4x10xf32>
  %logp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %lse : tensor<4x10xf32>, tensor<4xf32>) outs(%e : tensor<4x10xf32>) {
  ^bb0(%l: f32, %s: f32, %o: f32):
    %d = arith.subf %l, %s : f32
    linalg.yield %d : f32
  } -> tensor<4x10xf32>
  %re = tensor.empty() : tensor<4xf32>
  %nll = linalg.generic {indexing_maps = [#r, #r], iterator_types = ["parallel"]}
      ins(%t : tensor<4xi64>) outs(%re : tensor<4xf32>) {
  ^bb0(%target: i64, %o: f32):
    %m = linalg.index 0 : index
    %n = arith.index_cast %target : i64 to index
    %v = tensor.extract %logp[%m, %n] : tensor<4x10xf32>
    %neg = arith.negf %v : f32
    linalg.yield %neg : f32
  } -> tensor<4xf32>
  return %nll : tensor<4xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>
#r = affine_map<(m) -> (m)>

// Not fused: the gathered tensor is also returned (it must be written
// anyway), and a gather whose column reads the row position.
// CHECK-LABEL: func @not_fused
// CHECK-NOT: coda.row_select
// CHECK-COUNT-2: tensor.extract
func.func @not_fused(%a: tensor<4x8xf32>, %b: tensor<8x10xf32>, %t: tensor<4xi64>) -> (tensor<4xf32>, tensor<4x10xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
  %logits = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x10xf32>) outs(%z : tensor<4x10xf32>) -> tensor<4x10xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%logits : tensor<4x10xf32>) outs(%e : tensor<4x10xf32>) {
  ^bb0(%l: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %d = arith.mulf %l, %two : f32
    linalg.yield %d : f32
  } -> tensor<4x10xf32>
  %re = tensor.empty() : tensor<4xf32>
  %picked = linalg.generic {indexing_maps = [#r, #r], iterator_types = ["parallel"]}
      ins(%t : tensor<4xi64>) outs(%re : tensor<4xf32>) {
  ^bb0(%target: i64, %o: f32):
    %m = linalg.index 0 : index
    %n = arith.index_cast %target : i64 to index
    %v = tensor.extract %scaled[%m, %n] : tensor<4x10xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %diag = linalg.generic {indexing_maps = [#r, #r], iterator_types = ["parallel"]}
      ins(%t : tensor<4xi64>) outs(%re : tensor<4xf32>) {
  ^bb0(%target: i64, %o: f32):
    %m = linalg.index 0 : index
    %v = tensor.extract %logits[%m, %m] : tensor<4x10xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %picked, %scaled, %diag : tensor<4xf32>, tensor<4x10xf32>, tensor<4xf32>
}
