// RUN: coda-opt %s --coda-lower-to-linalg --canonicalize | FileCheck %s

// Where each access form reads and what the position ops become, in a
// batched epilogue: tile [b, m, n], row [b, m], col [n], scalar as is,
// row_index m, col_index n.

// CHECK-LABEL: func @positions_and_inputs
// CHECK-SAME: (%{{[a-z0-9_]+}}: tensor<2x4x8xf32>, %{{[a-z0-9_]+}}: tensor<8x6xf32>, %[[T:[a-z0-9_]+]]: tensor<2x4x6xf32>, %[[R:[a-z0-9_]+]]: tensor<2x4xf32>, %[[C:[a-z0-9_]+]]: tensor<6xf32>, %[[S:[a-z0-9_]+]]: f32
// CHECK: scf.for %[[B:[a-z0-9_]+]] =
// CHECK: scf.for %[[M:[a-z0-9_]+]] =
// CHECK: scf.for %[[N:[a-z0-9_]+]] =
// CHECK-DAG: %[[TV:.+]] = tensor.extract %[[T]][%[[B]], %[[M]], %[[N]]] : tensor<2x4x6xf32>
// CHECK-DAG: %[[RV:.+]] = tensor.extract %[[R]][%[[B]], %[[M]]] : tensor<2x4xf32>
// CHECK-DAG: %[[CV:.+]] = tensor.extract %[[C]][%[[N]]] : tensor<6xf32>
// CHECK-DAG: arith.index_cast %[[M]] : index to i64
// CHECK-DAG: arith.index_cast %[[N]] : index to i64
// CHECK-DAG: arith.mulf %{{.*}}, %[[S]] : f32
func.func @positions_and_inputs(%a: tensor<2x4x8xf32>, %b: tensor<8x6xf32>, %t: tensor<2x4x6xf32>, %r: tensor<2x4xf32>,
                                %c: tensor<6xf32>, %s: f32, %o: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %0 = coda.gemm %a, %b : tensor<2x4x8xf32>, tensor<8x6xf32>
      epilogue(%acc, tile %tv = %t : tensor<2x4x6xf32>, row %rv = %r : tensor<2x4xf32>, col %cv = %c : tensor<6xf32>, scalar %sv = %s : f32)
      outs(%o : tensor<2x4x6xf32>) {
    %m = coda.row_index
    %n = coda.col_index
    %mi = arith.index_cast %m : index to i64
    %ni = arith.index_cast %n : index to i64
    %sum = arith.addi %mi, %ni : i64
    %f = arith.sitofp %sum : i64 to f32
    %0 = arith.addf %acc, %tv : f32
    %1 = arith.mulf %0, %rv : f32
    %2 = arith.addf %1, %cv : f32
    %3 = arith.mulf %2, %sv : f32
    %4 = arith.addf %3, %f : f32
    coda.yield %4 : f32
  }
  return %0 : tensor<2x4x6xf32>
}
