// RUN: %differential %s | %cpu-runner | FileCheck %s

// The logit at each row's target column (cross-entropy's target pick).
// Targets are drawn from [-3, 52): negative ones act as an ignore index and
// leave the destination's initial value (0) in place.

// CHECK: coda-check ok: 57 elements

func.func @fused(%a: tensor<57x8xf32>, %w: tensor<52x8xf32>, %t: tensor<57xi64>) -> tensor<57xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<57xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<57xf32>) -> tensor<57xf32>
  %picked = coda.gemm %a, %w transpose_b : tensor<57x8xf32>, tensor<52x8xf32>
      epilogue(%acc, row %target = %t : tensor<57xi64>) outs(%init : tensor<57xf32>) {
    %p = coda.row_select %acc at %target : f32, i64
    coda.yield %p : !coda.row<f32>
  }
  return %picked : tensor<57xf32>
}

func.func @reference(%a: tensor<57x8xf32>, %w: tensor<52x8xf32>, %t: tensor<57xi64> {coda_test.range = array<i64: -3, 52>})
    -> tensor<57xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<57x52xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<57x52xf32>) -> tensor<57x52xf32>
  %wt0 = tensor.empty() : tensor<8x52xf32>
  %wt = linalg.transpose ins(%w : tensor<52x8xf32>) outs(%wt0 : tensor<8x52xf32>) permutation = [1, 0]
  %logits = linalg.matmul ins(%a, %wt : tensor<57x8xf32>, tensor<8x52xf32>) outs(%z : tensor<57x52xf32>) -> tensor<57x52xf32>
  %re = tensor.empty() : tensor<57xf32>
  // Gather logits[m, t[m]] where t[m] >= 0.
  %picked = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%t : tensor<57xi64>) outs(%re : tensor<57xf32>) {
  ^bb0(%target: i64, %out: f32):
    %m = linalg.index 0 : index
    %c0 = arith.constant 0 : i64
    %valid = arith.cmpi sge, %target, %c0 : i64
    %safe = arith.select %valid, %target, %c0 : i64
    %n = arith.index_cast %safe : i64 to index
    %v = tensor.extract %logits[%m, %n] : tensor<57x52xf32>
    %r = arith.select %valid, %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<57xf32>
  return %picked : tensor<57xf32>
}
