// RUN: coda-opt %s --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func @erase_unread_inputs
// CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<4x6xf32>
// CHECK-NEXT: epilogue(%[[ACC:.+]], col %[[C:.+]] = %{{.*}} : tensor<6xf32>)
// CHECK: arith.addf %[[ACC]], %[[C]] : f32
func.func @erase_unread_inputs(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %r: tensor<8xf32>, %c: tensor<6xf32>,
                               %t: tensor<8x6xf32>, %o: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32>
      epilogue(%acc, row %rv = %r : tensor<8xf32>, col %cv = %c : tensor<6xf32>, tile %tv = %t : tensor<8x6xf32>)
      outs(%o : tensor<8x6xf32>) {
    %0 = arith.addf %acc, %cv : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<8x6xf32>
}

// -----

// CHECK-LABEL: func @keep_read_inputs
// CHECK: epilogue(%{{.*}}, row %{{.*}} = %{{.*}} : tensor<8xf32>, scalar %{{.*}} = %{{.*}} : f32)
func.func @keep_read_inputs(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %r: tensor<8xf32>, %s: f32, %o: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32>
      epilogue(%acc, row %rv = %r : tensor<8xf32>, scalar %sv = %s : f32) outs(%o : tensor<8x6xf32>) {
    %0 = arith.mulf %acc, %rv : f32
    %1 = arith.addf %0, %sv : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<8x6xf32>
}

// -----

// Constants folded inside the isolated epilogue stay inside it.
// CHECK-LABEL: func @fold_inside_epilogue
// CHECK: coda.gemm
// CHECK-NEXT: epilogue(%[[ACC:.+]])
// CHECK: %[[K:.+]] = arith.constant 6.000000e+00 : f32
// CHECK: arith.mulf %[[ACC]], %[[K]] : f32
func.func @fold_inside_epilogue(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %o: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32> epilogue(%acc) outs(%o : tensor<8x6xf32>) {
    %two = arith.constant 2.0 : f32
    %three = arith.constant 3.0 : f32
    %six = arith.mulf %two, %three : f32
    %0 = arith.mulf %acc, %six : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<8x6xf32>
}

// -----

// Outputs nobody reads are no longer written (partials included); the rest
// keep their order.
// CHECK-LABEL: func @erase_unread_results
// CHECK: %[[G:.+]] = coda.gemm
// CHECK-NEXT: epilogue(%[[ACC:[a-z0-9_]+]])
// CHECK-NEXT: outs(%{{.*}} : tensor<8x6xf32>)
// CHECK: %[[T:.+]] = math.tanh %[[ACC]] : f32
// CHECK-NOT: coda.row_reduce
// CHECK: coda.yield %[[T]] : f32
// CHECK: return %[[G]]
func.func @erase_unread_results(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %o: tensor<8x6xf32>, %p: tensor<8x1xf32>, %q: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0:3 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32> epilogue(%acc) outs(%o, %p, %q : tensor<8x6xf32>, tensor<8x1xf32>, tensor<8x6xf32>) {
    %s = coda.row_reduce sum %acc tile 8 : f32
    %t = math.tanh %acc : f32
    coda.yield %acc, %s, %t : f32, !coda.partial<f32>, f32
  }
  return %0#2 : tensor<8x6xf32>
}

// -----

// An input listed twice with the same form is read once.
// CHECK-LABEL: func @merge_duplicate_inputs
// CHECK: epilogue(%[[ACC:[a-z0-9_]+]], col %[[C:[a-z0-9_]+]] = %{{.*}} : tensor<6xf32>, row %{{.*}} = %{{.*}} : tensor<8xf32>)
// CHECK: arith.addf %[[ACC]], %[[C]] : f32
// CHECK: arith.mulf %{{.*}}, %[[C]] : f32
func.func @merge_duplicate_inputs(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %c: tensor<6xf32>, %r: tensor<8xf32>, %o: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32>
      epilogue(%acc, col %c0 = %c : tensor<6xf32>, row %rv = %r : tensor<8xf32>, col %c1 = %c : tensor<6xf32>) outs(%o : tensor<8x6xf32>) {
    %0 = arith.addf %acc, %c0 : f32
    %1 = arith.mulf %0, %c1 : f32
    %2 = arith.mulf %1, %rv : f32
    coda.yield %2 : f32
  }
  return %0 : tensor<8x6xf32>
}
