// RUN: coda-opt %s --coda-convert-matmuls --split-input-file | FileCheck %s

// CHECK-LABEL: func @named_matmul
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<4x8xbf16>, %[[B:[a-z0-9_]+]]: tensor<8x6xbf16>)
// CHECK: %[[E:.+]] = tensor.empty() : tensor<4x6xf32>
// CHECK: %[[G:.+]] = coda.gemm %[[A]], %[[B]] : tensor<4x8xbf16>, tensor<8x6xbf16>
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]])
// CHECK-NEXT: outs(%[[E]] : tensor<4x6xf32>)
// CHECK-NEXT: coda.yield %[[ACC]] : f32
// CHECK-NOT: linalg.matmul
// CHECK: return %[[G]]
func.func @named_matmul(%a: tensor<4x8xbf16>, %b: tensor<8x6xbf16>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xbf16>, tensor<8x6xbf16>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// A generic contraction reading its rhs as N x K, with a low-precision
// result: the epilogue rounds the f32 accumulator.
// CHECK-LABEL: func @transposed_rhs_bf16_result
// CHECK: coda.gemm %{{.*}}, %{{.*}} transpose_b : tensor<4x8xbf16>, tensor<6x8xbf16>
// CHECK: %[[T:.+]] = arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: coda.yield %[[T]] : bf16
func.func @transposed_rhs_bf16_result(%a: tensor<4x8xbf16>, %b: tensor<6x8xbf16>) -> tensor<4x6xbf16> {
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<4x6xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<4x6xbf16>) -> tensor<4x6xbf16>
  %0 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%z : tensor<4x6xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %acc: bf16):
    %p = arith.mulf %x, %y : bf16
    %s = arith.addf %acc, %p : bf16
    linalg.yield %s : bf16
  } -> tensor<4x6xbf16>
  return %0 : tensor<4x6xbf16>
}

// -----

// CHECK-LABEL: func @batched
// CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<2x8x6xf32>
func.func @batched(%a: tensor<2x4x8xf32>, %b: tensor<2x8x6xf32>) -> tensor<2x4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %0 = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x6xf32>) outs(%z : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %0 : tensor<2x4x6xf32>
}

// -----

// C += A B: a destination that is not a zero fill is read as a tile input.
// CHECK-LABEL: func @accumulate
// CHECK-SAME: %[[C:[a-z0-9_]+]]: tensor<4x6xf32>)
// CHECK: coda.gemm
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]], tile %[[CV:[a-z0-9_]+]] = %[[C]] : tensor<4x6xf32>)
// CHECK-NEXT: outs(%[[C]] : tensor<4x6xf32>)
// CHECK: arith.addf %[[ACC]], %[[CV]] : f32
func.func @accumulate(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x6xf32>) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// Integer products and non-multiply-add bodies are not GEMMs.
// CHECK-LABEL: func @not_converted
// CHECK-NOT: coda.gemm
// CHECK: linalg.matmul
// CHECK: linalg.generic
func.func @not_converted(%a: tensor<4x8xi32>, %b: tensor<8x6xi32>, %c: tensor<4x6xi32>, %x: tensor<4x8xf32>, %y: tensor<8x6xf32>, %z: tensor<4x6xf32>)
    -> (tensor<4x6xi32>, tensor<4x6xf32>) {
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xi32>, tensor<8x6xi32>) outs(%c : tensor<4x6xi32>) -> tensor<4x6xi32>
  %1 = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %y : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.maximumf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  return %0, %1 : tensor<4x6xi32>, tensor<4x6xf32>
}

// -----

// The lhs read at (k, m) (a weight gradient X^T G, X as stored): transpose_a.
// CHECK-LABEL: func @transposed_lhs
// CHECK: coda.gemm %{{.*}}, %{{.*}} transpose_a : tensor<8x4xf32>, tensor<8x6xf32>
func.func @transposed_lhs(%xt: tensor<8x4xf32>, %g: tensor<8x6xf32>) -> tensor<4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %0 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%xt, %g : tensor<8x4xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

// A batch sharing its weight (a linear layer on [B, T, K]): one GEMM over
// B * T rows, the destination accumulated into folded too.
// CHECK-LABEL: func @shared_weight_batch
// CHECK-SAME: (%[[X:.*]]: tensor<2x?x8xbf16>, %[[W:.*]]: tensor<6x8xbf16>, %[[C:.*]]: tensor<2x?x6xf32>)
// CHECK-DAG: %[[XR:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x?x8xbf16> into tensor<?x8xbf16>
// CHECK-DAG: %[[CR:.*]] = tensor.collapse_shape %[[C]] {{\[}}[0, 1], [2]] : tensor<2x?x6xf32> into tensor<?x6xf32>
// CHECK-DAG: %[[T:.*]] = tensor.dim %[[C]], %c1
// CHECK: %[[G:.*]] = coda.gemm %[[XR]], %[[W]] transpose_b : tensor<?x8xbf16>, tensor<6x8xbf16>
// CHECK-NEXT: epilogue(%{{.*}}, tile %{{.*}} = %[[CR]] : tensor<?x6xf32>)
// CHECK-NEXT: outs(%[[CR]] : tensor<?x6xf32>)
// CHECK: %[[Y:.*]] = tensor.expand_shape %[[G]] {{\[}}[0, 1], [2]] output_shape [2, %[[T]], 6]
// CHECK: return %[[Y]]
func.func @shared_weight_batch(%x: tensor<2x?x8xbf16>, %w: tensor<6x8xbf16>, %c: tensor<2x?x6xf32>) -> tensor<2x?x6xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x?x8xbf16>, tensor<6x8xbf16>) outs(%c : tensor<2x?x6xf32>) {
  ^bb0(%p: bf16, %q: bf16, %acc: f32):
    %pe = arith.extf %p : bf16 to f32
    %qe = arith.extf %q : bf16 to f32
    %m = arith.mulf %pe, %qe : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x?x6xf32>
  return %0 : tensor<2x?x6xf32>
}

// -----

// A transposed lhs per batch ([B, K, M]) cannot fold B into M: the GEMM
// stays batched, its rhs shared.
// CHECK-LABEL: func @shared_weight_batch_transposed_lhs
// CHECK-NOT: tensor.collapse_shape
// CHECK: coda.gemm %{{.*}}, %{{.*}} transpose_a : tensor<2x8x4xf32>, tensor<8x6xf32>
func.func @shared_weight_batch_transposed_lhs(%xt: tensor<2x8x4xf32>, %w: tensor<8x6xf32>) -> tensor<2x4x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, k, m)>, affine_map<(b, m, n, k) -> (k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%xt, %w : tensor<2x8x4xf32>, tensor<8x6xf32>) outs(%z : tensor<2x4x6xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x6xf32>
  return %0 : tensor<2x4x6xf32>
}

// -----

// The heads split off a GEMM result before an elementwise op: the op runs
// on the GEMM's [T, H * D] space, its other operand and destination
// reshaped (and hoisted above the GEMM), and the split moves after it.
// CHECK-LABEL: func @reshape_moved_past_consumer
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[W:.*]]: tensor<12x8xf32>, %[[R:.*]]: tensor<?x3x4xf32>)
// CHECK: %[[RR:.*]] = tensor.collapse_shape %[[R]] {{\[}}[0], [1, 2]] : tensor<?x3x4xf32> into tensor<?x12xf32>
// CHECK: %[[G:.*]] = coda.gemm %[[X]], %[[W]] transpose_b
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: ins(%[[G]], %[[RR]] : tensor<?x12xf32>, tensor<?x12xf32>)
// CHECK: tensor.expand_shape %[[Y]] {{\[}}[0], [1, 2]]
func.func @reshape_moved_past_consumer(%x: tensor<?x8xf32>, %w: tensor<12x8xf32>, %r: tensor<?x3x4xf32>) -> tensor<?x3x4xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%t) : tensor<?x12xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x12xf32>) -> tensor<?x12xf32>
  %mm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<?x8xf32>, tensor<12x8xf32>) outs(%z : tensor<?x12xf32>) -> tensor<?x12xf32>
  %q = tensor.expand_shape %mm [[0], [1, 2]] output_shape [%t, 3, 4] : tensor<?x12xf32> into tensor<?x3x4xf32>
  %e3 = tensor.empty(%t) : tensor<?x3x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(t, h, d) -> (t, h, d)>, affine_map<(t, h, d) -> (t, h, d)>, affine_map<(t, h, d) -> (t, h, d)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %r : tensor<?x3x4xf32>, tensor<?x3x4xf32>) outs(%e3 : tensor<?x3x4xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %0 = arith.addf %v, %s : f32
    linalg.yield %0 : f32
  } -> tensor<?x3x4xf32>
  return %y : tensor<?x3x4xf32>
}

// -----

// A consumer that reads another operand per (token, within-head position),
// shared by the heads (RoPE's tables): that read has no form over [T, H * D],
// so the split stays before the consumer.
// CHECK-LABEL: func @reshape_not_moved
// CHECK: %[[G:.*]] = coda.gemm
// CHECK: %[[Q:.*]] = tensor.expand_shape %[[G]]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[Q]], %{{.*}} : tensor<?x3x4xf32>, tensor<?x4xf32>)
func.func @reshape_not_moved(%x: tensor<?x8xf32>, %w: tensor<12x8xf32>, %cos: tensor<?x4xf32>) -> tensor<?x3x4xf32> {
  %c0 = arith.constant 0 : index
  %t = tensor.dim %x, %c0 : tensor<?x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%t) : tensor<?x12xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x12xf32>) -> tensor<?x12xf32>
  %mm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<?x8xf32>, tensor<12x8xf32>) outs(%z : tensor<?x12xf32>) -> tensor<?x12xf32>
  %q = tensor.expand_shape %mm [[0], [1, 2]] output_shape [%t, 3, 4] : tensor<?x12xf32> into tensor<?x3x4xf32>
  %e3 = tensor.empty(%t) : tensor<?x3x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(t, h, d) -> (t, h, d)>, affine_map<(t, h, d) -> (t, d)>, affine_map<(t, h, d) -> (t, h, d)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %cos : tensor<?x3x4xf32>, tensor<?x4xf32>) outs(%e3 : tensor<?x3x4xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %0 = arith.mulf %v, %c : f32
    linalg.yield %0 : f32
  } -> tensor<?x3x4xf32>
  return %y : tensor<?x3x4xf32>
}

// -----

// A product read only transposed (a transpose merged into its elementwise
// reader) is computed transposed, as the GEMM of the swapped operands, and
// read in loop order.
// CHECK-LABEL: func @read_transposed
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-z0-9_]+]]: tensor<8x6xf32>)
// CHECK: %[[G:.+]] = coda.gemm %[[W]], %[[X]] transpose_a transpose_b : tensor<8x6xf32>, tensor<4x8xf32>
// CHECK: outs(%{{.*}} : tensor<6x4xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[ID:map[0-9]*]], #[[ID]]]
// CHECK-SAME: ins(%[[G]] : tensor<6x4xf32>)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#swap = affine_map<(i, j) -> (j, i)>
#id = affine_map<(i, j) -> (i, j)>
func.func @read_transposed(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> tensor<6x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %et = tensor.empty() : tensor<6x4xf32>
  %r = linalg.generic {indexing_maps = [#swap, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<4x6xf32>) outs(%et : tensor<6x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  return %r : tensor<6x4xf32>
}

// -----

// Read transposed by one reader and in order by another: one orientation
// cannot serve both, and the product keeps its own.
// CHECK-LABEL: func @read_both_ways
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: tensor<4x8xf32>, %[[W:[a-z0-9_]+]]: tensor<8x6xf32>)
// CHECK: coda.gemm %[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x6xf32>
// CHECK: outs(%{{.*}} : tensor<4x6xf32>)
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
#swap = affine_map<(i, j) -> (j, i)>
#id = affine_map<(i, j) -> (i, j)>
func.func @read_both_ways(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> (tensor<6x4xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %p = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%z : tensor<4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  %et = tensor.empty() : tensor<6x4xf32>
  %r = linalg.generic {indexing_maps = [#swap, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<4x6xf32>) outs(%et : tensor<6x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<6x4xf32>
  return %r, %p : tensor<6x4xf32>, tensor<4x6xf32>
}

// -----

// A batch sharing its weight, read transposed: the batch folds into the
// GEMM's rows only in its own orientation, which it keeps.
// CHECK-LABEL: func @shared_weight_batch_read_transposed
// CHECK: %[[X:.+]] = tensor.collapse_shape %arg0 {{\[}}[0, 1], [2]]
// CHECK: coda.gemm %[[X]], %arg1 transpose_b : tensor<8x8xf32>, tensor<6x8xf32>
#lhs = affine_map<(b, m, n, k) -> (b, m, k)>
#rhs = affine_map<(b, m, n, k) -> (n, k)>
#out = affine_map<(b, m, n, k) -> (b, m, n)>
#swap3 = affine_map<(b, i, j) -> (b, j, i)>
#id3 = affine_map<(b, i, j) -> (b, i, j)>
func.func @shared_weight_batch_read_transposed(%x: tensor<2x4x8xf32>, %w: tensor<6x8xf32>) -> tensor<2x6x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x4x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %p = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x4x8xf32>, tensor<6x8xf32>) outs(%z : tensor<2x4x6xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x6xf32>
  %et = tensor.empty() : tensor<2x6x4xf32>
  %r = linalg.generic {indexing_maps = [#swap3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%p : tensor<2x4x6xf32>) outs(%et : tensor<2x6x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<2x6x4xf32>
  return %r : tensor<2x6x4xf32>
}

// -----

// Heads transposed before an elementwise op with a per-(token, position)
// table: the op is computed in the heads' own order, reading the reshaped
// GEMM result in loop order, and its result transposed after it.
// CHECK-LABEL: func @transpose_sunk_below_elementwise
// CHECK: %[[G:.*]] = coda.gemm
// CHECK: %[[Q:.*]] = tensor.expand_shape %[[G]] {{\[}}[0], [1, 2]]
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[ID:map[0-9]*]], #[[TAB:map[0-9]*]], #[[ID]]]
// CHECK-SAME: ins(%[[Q]], %{{.*}} : tensor<5x2x4xf32>, tensor<5x4xf32>) outs(%{{.*}} : tensor<5x2x4xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[SWAP:map[0-9]*]], #[[ID]]]
// CHECK-SAME: ins(%[[R]] : tensor<5x2x4xf32>) outs(%{{.*}} : tensor<2x5x4xf32>)
func.func @transpose_sunk_below_elementwise(%x: tensor<5x8xf32>, %w: tensor<8x8xf32>, %cos: tensor<5x4xf32>) -> tensor<2x5x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5x8xf32>) -> tensor<5x8xf32>
  %mm = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<5x8xf32>, tensor<8x8xf32>) outs(%z : tensor<5x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<5x8xf32>
  %q = tensor.expand_shape %mm [[0], [1, 2]] output_shape [5, 2, 4] : tensor<5x8xf32> into tensor<5x2x4xf32>
  %et = tensor.empty() : tensor<2x5x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(h, t, d) -> (t, h, d)>, affine_map<(h, t, d) -> (t, d)>, affine_map<(h, t, d) -> (h, t, d)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %cos : tensor<5x2x4xf32>, tensor<5x4xf32>) outs(%et : tensor<2x5x4xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %0 = arith.mulf %v, %c : f32
    linalg.yield %0 : f32
  } -> tensor<2x5x4xf32>
  return %y : tensor<2x5x4xf32>
}

// -----

// Two full-size operands read in different orders: no one order serves
// both, and the op is left as written.
// CHECK-LABEL: func @operands_in_two_orders
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}]
// CHECK-SAME: ins(%{{.*}}, %arg2 : tensor<5x2x4xf32>, tensor<2x5x4xf32>) outs(%{{.*}} : tensor<2x5x4xf32>)
// CHECK-NOT: linalg.generic
func.func @operands_in_two_orders(%x: tensor<5x8xf32>, %w: tensor<8x8xf32>, %r: tensor<2x5x4xf32>) -> tensor<2x5x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<5x8xf32>) -> tensor<5x8xf32>
  %mm = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>],
                        iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<5x8xf32>, tensor<8x8xf32>) outs(%z : tensor<5x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<5x8xf32>
  %q = tensor.expand_shape %mm [[0], [1, 2]] output_shape [5, 2, 4] : tensor<5x8xf32> into tensor<5x2x4xf32>
  %et = tensor.empty() : tensor<2x5x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(h, t, d) -> (t, h, d)>, affine_map<(h, t, d) -> (h, t, d)>, affine_map<(h, t, d) -> (h, t, d)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q, %r : tensor<5x2x4xf32>, tensor<2x5x4xf32>) outs(%et : tensor<2x5x4xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %0 = arith.addf %v, %c : f32
    linalg.yield %0 : f32
  } -> tensor<2x5x4xf32>
  return %y : tensor<2x5x4xf32>
}

// -----

// An elementwise op reading a transposed weight (no product before it)
// stays as written: moving that transpose after it would only add a kernel.
// CHECK-LABEL: func @weight_transpose_stays
// CHECK: linalg.generic {indexing_maps = [#[[SWAP:map[0-9]*]], #[[ID:map[0-9]*]]]
// CHECK-SAME: ins(%arg0 : tensor<8x6xf32>) outs(%{{.*}} : tensor<6x8xf32>)
// CHECK-NOT: linalg.generic
func.func @weight_transpose_stays(%w: tensor<8x6xf32>) -> tensor<6x8xf32> {
  %et = tensor.empty() : tensor<6x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<8x6xf32>) outs(%et : tensor<6x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %0 = arith.negf %v : f32
    linalg.yield %0 : f32
  } -> tensor<6x8xf32>
  return %y : tensor<6x8xf32>
}
