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

// -----

// A pair_map's unread results are dropped, then the operands whose region
// arguments only they read: the accumulator is no longer read (a derived
// adjoint computes every operand's gradient, a table's too).
// CHECK-LABEL: func @erase_unread_pair_map_values
// CHECK: epilogue(%[[ACC:[a-z0-9_]+]], periodic %[[C:[a-z0-9_]+]] = %{{.*}} : tensor<8x4xbf16>, tile %[[D:[a-z0-9_]+]] = %{{.*}} : tensor<8x8xf32>)
// CHECK: %[[R:.+]] = coda.pair_map stride 2 (%[[C0:[a-z0-9_]+]], %[[C1:[a-z0-9_]+]]) = %[[C]], (%[[D0:[a-z0-9_]+]], %[[D1:[a-z0-9_]+]]) = %[[D]] : bf16, f32 -> f32 {
// CHECK-NEXT: %[[E0:.+]] = arith.extf %[[C0]] : bf16 to f32
// CHECK-NEXT: %[[E1:.+]] = arith.extf %[[C1]] : bf16 to f32
// CHECK-NEXT: %[[P0:.+]] = arith.mulf %[[D0]], %[[E0]] : f32
// CHECK-NEXT: %[[P1:.+]] = arith.mulf %[[D1]], %[[E1]] : f32
// CHECK-NEXT: coda.yield %[[P0]], %[[P1]] : f32, f32
// CHECK-NEXT: }
// CHECK-NEXT: coda.yield %[[R]] : f32
// CHECK-NOT: %[[ACC]]
func.func @erase_unread_pair_map_values(%a: tensor<8x4xf32>, %b: tensor<4x8xf32>, %cos: tensor<8x4xbf16>, %dy: tensor<8x8xf32>, %o: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x8xf32>
      epilogue(%acc, periodic %c = %cos : tensor<8x4xbf16>, tile %d = %dy : tensor<8x8xf32>) outs(%o : tensor<8x8xf32>) {
    %r:2 = coda.pair_map stride 2 (%x0, %x1) = %acc, (%c0, %c1) = %c, (%d0, %d1) = %d : f32, bf16, f32 -> f32, f32 {
      %e0 = arith.extf %c0 : bf16 to f32
      %e1 = arith.extf %c1 : bf16 to f32
      %g0 = arith.mulf %d0, %e0 : f32
      %g1 = arith.mulf %d1, %e1 : f32
      %t0 = arith.mulf %d0, %x0 : f32
      %t1 = arith.mulf %d1, %x1 : f32
      coda.yield %g0, %g1, %t0, %t1 : f32, f32, f32, f32
    }
    coda.yield %r#0 : f32
  }
  return %0 : tensor<8x8xf32>
}

// -----

// Every result read: nothing changes.
// CHECK-LABEL: func @keep_read_pair_map_values
// CHECK: coda.pair_map (%{{.*}}, %{{.*}}) = %{{.*}}, (%{{.*}}, %{{.*}}) = %{{.*}} : f32, f32 -> f32, f32
func.func @keep_read_pair_map_values(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %dy: tensor<8x6xf32>, %o: tensor<8x6xf32>, %p: tensor<8x6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>) {
  %0:2 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32>
      epilogue(%acc, tile %d = %dy : tensor<8x6xf32>) outs(%o, %p : tensor<8x6xf32>, tensor<8x6xf32>) {
    %r:2 = coda.pair_map (%x0, %x1) = %acc, (%d0, %d1) = %d : f32, f32 -> f32, f32 {
      %g0 = arith.mulf %d0, %x1 : f32
      %g1 = arith.mulf %d1, %x0 : f32
      coda.yield %g0, %g1, %x1, %x0 : f32, f32, f32, f32
    }
    coda.yield %r#0, %r#1 : f32, f32
  }
  return %0#0, %0#1 : tensor<8x6xf32>, tensor<8x6xf32>
}
