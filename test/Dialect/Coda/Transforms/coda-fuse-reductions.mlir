// RUN: coda-opt %s --coda-convert-matmuls --coda-fuse-pointwise --coda-fuse-reductions="tile=4" --canonicalize --split-input-file | FileCheck %s
// RUN: not coda-opt %s --split-input-file --coda-fuse-reductions="tile=0" 2>&1 | FileCheck %s --check-prefix=CHECK-TILE

// CHECK-TILE: coda-fuse-reductions: tile must be positive, got 0

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>

// The sum of squares of a GEMM's output becomes per-tile partials in its
// epilogue (N = 10, tiles of 4: 3 partials) and a finish.
// CHECK-LABEL: func @sum_of_squares
// CHECK: %[[P:.+]] = tensor.empty() : tensor<4x3xf32>
// CHECK: %[[G:.+]]:2 = coda.gemm
// CHECK: %[[SQ:.+]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[PART:.+]] = coda.row_reduce sum %[[SQ]] tile 4 : f32
// CHECK: coda.yield %{{.*}}, %[[PART]] : f32, !coda.partial<f32>
// CHECK: %[[S:.+]] = coda.reduce_partials sum row %[[G]]#1 : tensor<4x3xf32> outs(%{{.*}} : tensor<4xf32>)
// CHECK: return %[[G]]#0, %[[S]]
func.func @sum_of_squares(%a: tensor<4x8xf32>, %b: tensor<8x10xf32>) -> (tensor<4x10xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
  %h = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x10xf32>) outs(%z : tensor<4x10xf32>) -> tensor<4x10xf32>
  %re = tensor.empty() : tensor<4xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<4x10xf32>) outs(%r0 : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %sum = arith.addf %acc, %sq : f32
    linalg.yield %sum : f32
  } -> tensor<4xf32>
  return %h, %s : tensor<4x10xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>
#keep = affine_map<(m, n) -> (m, 0)>

// keepdim (M x 1) results are reshaped from the finish.
// CHECK-LABEL: func @keepdim
// CHECK: coda.row_reduce sum
// CHECK: %[[S:.+]] = coda.reduce_partials sum row
// CHECK: %[[K:.+]] = tensor.expand_shape %[[S]] {{\[}}[0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
// CHECK: return %[[K]]
func.func @keepdim(%a: tensor<4x8xf32>, %b: tensor<8x10xf32>) -> tensor<4x1xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
  %h = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x10xf32>) outs(%z : tensor<4x10xf32>) -> tensor<4x10xf32>
  %re = tensor.empty() : tensor<4x1xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%re : tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<4x10xf32>) outs(%r0 : tensor<4x1xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sum = arith.addf %v, %acc : f32
    linalg.yield %sum : f32
  } -> tensor<4x1xf32>
  return %s : tensor<4x1xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>

// Not fused: a reduction over a function argument, a sum that does not start
// at zero, and a max that does not start at -inf.
// CHECK-LABEL: func @not_fused
// CHECK-NOT: coda.row_reduce
// CHECK-COUNT-3: linalg.generic
func.func @not_fused(%x: tensor<4x10xf32>, %a: tensor<4x8xf32>, %b: tensor<8x10xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
  %h = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x10xf32>) outs(%z : tensor<4x10xf32>) -> tensor<4x10xf32>
  %re = tensor.empty() : tensor<4xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %r1 = linalg.fill ins(%one : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %s0 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x10xf32>) outs(%r0 : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sum = arith.addf %acc, %v : f32
    linalg.yield %sum : f32
  } -> tensor<4xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<4x10xf32>) outs(%r1 : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sum = arith.addf %acc, %v : f32
    linalg.yield %sum : f32
  } -> tensor<4xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<4x10xf32>) outs(%r0 : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %acc, %v : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %s0, %s1, %s2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>

// A row maximum and a softmax denominator sum exp(C - m): per-tile maxima
// and online log-sum-exps in the epilogue; the denominator is finished as
// exp(lse - m).
// CHECK-LABEL: func @softmax_statistics
// CHECK: %[[G:.+]]:2 = coda.gemm
// CHECK-DAG: coda.row_reduce max %{{.*}} tile 4 : f32
// CHECK-DAG: coda.row_reduce logsumexp %{{.*}} tile 4 : f32
// CHECK-DAG: %[[MAX:.+]] = coda.reduce_partials max row
// CHECK-DAG: %[[LSE:.+]] = coda.reduce_partials logsumexp row
// CHECK: %[[DEN:.+]] = linalg.generic {{.*}} ins(%[[LSE]], %[[MAX]] : tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[D:.+]] = arith.subf
// CHECK: math.exp %[[D]] : f32
// CHECK: return %[[MAX]], %[[DEN]]
func.func @softmax_statistics(%a: tensor<4x8xf32>, %b: tensor<8x10xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<4x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x10xf32>) -> tensor<4x10xf32>
  %c = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x10xf32>) outs(%z : tensor<4x10xf32>) -> tensor<4x10xf32>
  %re = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%c : tensor<4x10xf32>) outs(%m0 : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %m = arith.maximumf %v, %acc : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>
  %den = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%c, %max : tensor<4x10xf32>, tensor<4xf32>) outs(%s0 : tensor<4xf32>) {
  ^bb0(%v: f32, %m: f32, %acc: f32):
    %d = arith.subf %v, %m : f32
    %x = math.exp %d : f32
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %max, %den : tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>

// A reduction over the rows (a column sum, like RMSNorm backward's dgamma =
// sum_m dy * n_hat) becomes column partials per 4 rows and a column finish;
// the product itself is no longer written.
// CHECK-LABEL: func @column_sum
// CHECK-SAME: (%{{[a-z0-9_]+}}: tensor<10x8xf32>, %{{[a-z0-9_]+}}: tensor<8x6xf32>, %[[G:[a-z0-9_]+]]: tensor<10x6xf32>)
// CHECK-DAG: %[[P:.+]] = tensor.empty() : tensor<3x6xf32>
// CHECK: %[[R:.+]] = coda.gemm
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]], tile %[[GV:[a-z0-9_]+]] = %[[G]] : tensor<10x6xf32>)
// CHECK-NEXT: outs(%[[P]] : tensor<3x6xf32>)
// CHECK: %[[PROD:.+]] = arith.mulf %[[ACC]], %[[GV]] : f32
// CHECK: %[[PART:.+]] = coda.col_reduce sum %[[PROD]] tile 4 : f32
// CHECK: coda.yield %[[PART]] : !coda.partial<f32>
// CHECK: %[[T:.+]] = coda.reduce_partials sum col %[[R]] : tensor<3x6xf32> outs(%{{.*}} : tensor<6xf32>)
// CHECK: return %[[T]]
func.func @column_sum(%a: tensor<10x8xf32>, %b: tensor<8x6xf32>, %g: tensor<10x6xf32>) -> tensor<6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<10x6xf32>) -> tensor<10x6xf32>
  %c = linalg.matmul ins(%a, %b : tensor<10x8xf32>, tensor<8x6xf32>) outs(%z : tensor<10x6xf32>) -> tensor<10x6xf32>
  %prod = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %g : tensor<10x6xf32>, tensor<10x6xf32>) outs(%e : tensor<10x6xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    linalg.yield %p : f32
  } -> tensor<10x6xf32>
  %ce = tensor.empty() : tensor<6xf32>
  %c0 = linalg.fill ins(%zero : f32) outs(%ce : tensor<6xf32>) -> tensor<6xf32>
  %t = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%prod : tensor<10x6xf32>) outs(%c0 : tensor<6xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  return %t : tensor<6xf32>
}
