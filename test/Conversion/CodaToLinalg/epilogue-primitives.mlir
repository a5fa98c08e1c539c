// RUN: coda-opt %s --coda-lower-to-linalg --canonicalize --split-input-file | FileCheck %s

// Row partials start at the reduction's identity and fold one element at
// [m, n / tile]; column partials at [m / tile, n].
// CHECK-LABEL: func @block_reductions
// CHECK-DAG: %[[NINF:[a-z0-9_]+]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[ZERO:[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[C16:[a-z0-9_]+]] = arith.constant 16 : index
// CHECK-DAG: %[[C4:[a-z0-9_]+]] = arith.constant 4 : index
// CHECK: %[[RP:[a-z0-9_]+]] = linalg.fill ins(%[[NINF]] : f32) outs(%{{.*}} : tensor<8x2xf32>)
// CHECK: %[[CP:[a-z0-9_]+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<2x20xf32>)
// CHECK: scf.for %[[M:[a-z0-9_]+]] = {{.*}} iter_args(%{{.*}} = %[[RP]], %{{.*}} = %[[CP]])
// CHECK: scf.for %[[N:[a-z0-9_]+]] = {{.*}} iter_args(%[[R:[a-z0-9_]+]] = %{{.*}}, %[[C:[a-z0-9_]+]] = %{{.*}})
// CHECK: %[[RT:[a-z0-9_]+]] = arith.divui %[[N]], %[[C16]] : index
// CHECK: %[[OLDR:[a-z0-9_]+]] = tensor.extract %[[R]][%[[M]], %[[RT]]]
// CHECK: arith.maximumf %[[OLDR]], %{{.*}} : f32
// CHECK: %[[CT:[a-z0-9_]+]] = arith.divui %[[M]], %[[C4]] : index
// CHECK: %[[OLDC:[a-z0-9_]+]] = tensor.extract %[[C]][%[[CT]], %[[N]]]
// CHECK: arith.addf %[[OLDC]], %{{.*}} : f32
func.func @block_reductions(%a: tensor<8x4xf32>, %b: tensor<4x20xf32>, %p: tensor<8x2xf32>, %q: tensor<2x20xf32>)
    -> (tensor<8x2xf32>, tensor<2x20xf32>) {
  %0:2 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x20xf32> epilogue(%acc) outs(%p, %q : tensor<8x2xf32>, tensor<2x20xf32>) {
    %r = coda.row_reduce max %acc tile 16 : f32
    %c = coda.col_reduce sum %acc tile 4 : f32
    coda.yield %r, %c : !coda.partial<f32>, !coda.partial<f32>
  }
  return %0#0, %0#1 : tensor<8x2xf32>, tensor<2x20xf32>
}

// -----

// logsumexp combines as max + log1p(exp(min - max)), guarding -inf.
// CHECK-LABEL: func @online_logsumexp
// CHECK: %[[HI:[a-z0-9_]+]] = arith.maximumf %[[OLD:[a-z0-9_]+]], %[[V:[a-z0-9_]+]] : f32
// CHECK: %[[LO:[a-z0-9_]+]] = arith.minimumf %[[OLD]], %[[V]] : f32
// CHECK: %[[D:[a-z0-9_]+]] = arith.subf %[[LO]], %[[HI]] : f32
// CHECK: %[[E:[a-z0-9_]+]] = math.exp %[[D]] : f32
// CHECK: %[[L:[a-z0-9_]+]] = math.log1p %[[E]] : f32
// CHECK: %[[S:[a-z0-9_]+]] = arith.addf %[[HI]], %[[L]] : f32
// CHECK: %[[EMPTY:[a-z0-9_]+]] = arith.cmpf oeq, %[[HI]], %{{.*}} : f32
// CHECK: arith.select %[[EMPTY]], %[[HI]], %[[S]] : f32
func.func @online_logsumexp(%a: tensor<8x4xf32>, %b: tensor<4x20xf32>, %p: tensor<8x1xf32>) -> tensor<8x1xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x20xf32> epilogue(%acc) outs(%p : tensor<8x1xf32>) {
    %r = coda.row_reduce logsumexp %acc tile 32 : f32
    coda.yield %r : !coda.partial<f32>
  }
  return %0 : tensor<8x1xf32>
}

// -----

// CHECK-LABEL: func @select_target
// CHECK: scf.for %[[M:[a-z0-9_]+]] =
// CHECK: scf.for %[[N:[a-z0-9_]+]] = {{.*}} iter_args(%[[O:[a-z0-9_]+]] = %{{.*}})
// CHECK: %[[T:[a-z0-9_]+]] = tensor.extract %{{.*}}[%[[M]]] : tensor<8xi32>
// CHECK: %[[TI:[a-z0-9_]+]] = arith.index_cast %[[T]] : i32 to index
// CHECK: %[[HIT:[a-z0-9_]+]] = arith.cmpi eq, %[[TI]], %[[N]] : index
// CHECK: %[[OLD:[a-z0-9_]+]] = tensor.extract %[[O]][%[[M]]] : tensor<8xf32>
// CHECK: %[[NEW:[a-z0-9_]+]] = arith.select %[[HIT]], %{{.*}}, %[[OLD]] : f32
// CHECK: tensor.insert %[[NEW]] into %[[O]][%[[M]]] : tensor<8xf32>
func.func @select_target(%a: tensor<8x4xf32>, %b: tensor<4x20xf32>, %t: tensor<8xi32>, %o: tensor<8xf32>) -> tensor<8xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x20xf32> epilogue(%acc, row %tv = %t : tensor<8xi32>) outs(%o : tensor<8xf32>) {
    %s = coda.row_select %acc at %tv : f32, i32
    coda.yield %s : !coda.row<f32>
  }
  return %0 : tensor<8xf32>
}

// -----

// A pairwise epilogue walks column pairs: pair p holds columns 2p and
// 2p + 1; the body runs for both, the pair region once, and a contraction
// writes column p.
// CHECK-LABEL: func @pairs
// CHECK-DAG: %[[C2:[a-z0-9_]+]] = arith.constant 2 : index
// CHECK-DAG: %[[C10:[a-z0-9_]+]] = arith.constant 10 : index
// CHECK: scf.for %[[M:[a-z0-9_]+]] =
// CHECK: scf.for %[[P:[a-z0-9_]+]] = %{{.*}} to %[[C10]] step %{{.*}} iter_args(%[[Y:[a-z0-9_]+]] = %{{.*}}, %[[H:[a-z0-9_]+]] = %{{.*}})
// CHECK: %[[N:[a-z0-9_]+]] = arith.muli %[[P]], %[[C2]] : index
// CHECK: %[[N1:[a-z0-9_]+]] = arith.addi %[[N]], %{{.*}} : index
// CHECK: %[[X0:[a-z0-9_]+]] = tensor.extract %{{.*}}[%[[M]], %[[N]]] : tensor<8x20xf32>
// CHECK: %[[X1:[a-z0-9_]+]] = tensor.extract %{{.*}}[%[[M]], %[[N1]]] : tensor<8x20xf32>
// CHECK: %[[SWAP0:[a-z0-9_]+]] = arith.negf %[[X1]] : f32
// CHECK: %[[PROD:[a-z0-9_]+]] = arith.mulf %[[X0]], %[[X1]] : f32
// CHECK: %[[Y0:[a-z0-9_]+]] = tensor.insert %[[SWAP0]] into %[[Y]][%[[M]], %[[N]]]
// CHECK: tensor.insert %[[X0]] into %[[Y0]][%[[M]], %[[N1]]]
// CHECK: tensor.insert %[[PROD]] into %[[H]][%[[M]], %[[P]]] : tensor<8x10xf32>
func.func @pairs(%a: tensor<8x4xf32>, %b: tensor<4x20xf32>, %y: tensor<8x20xf32>, %h: tensor<8x10xf32>) -> (tensor<8x20xf32>, tensor<8x10xf32>) {
  %0:2 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x20xf32> epilogue(%acc) outs(%y, %h : tensor<8x20xf32>, tensor<8x10xf32>) {
    // Rotate by 90 degrees: (x0, x1) -> (-x1, x0).
    %r = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      %n = arith.negf %x1 : f32
      coda.yield %n, %x0 : f32, f32
    }
    %p = coda.pair_contract (%x0, %x1) = %acc : f32 -> !coda.pair<f32> {
      %m = arith.mulf %x0, %x1 : f32
      coda.yield %m : f32
    }
    coda.yield %r, %p : f32, !coda.pair<f32>
  }
  return %0#0, %0#1 : tensor<8x20xf32>, tensor<8x10xf32>
}

// -----

// CHECK-LABEL: func @pairs_dynamic_n
// CHECK: cf.assert %{{.*}}, "coda.gemm: N must be a multiple of twice the pair stride"
func.func @pairs_dynamic_n(%a: tensor<8x4xf32>, %b: tensor<4x?xf32>, %h: tensor<8x?xf32>) -> tensor<8x?xf32> {
  %0 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x?xf32> epilogue(%acc) outs(%h : tensor<8x?xf32>) {
    %p = coda.pair_contract (%x0, %x1) = %acc : f32 -> !coda.pair<f32> {
      %m = arith.mulf %x0, %x1 : f32
      coda.yield %m : f32
    }
    coda.yield %p : !coda.pair<f32>
  }
  return %0 : tensor<8x?xf32>
}

// -----

// CHECK-LABEL: func @finish
// CHECK: %[[INIT:[a-z0-9_]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<8xf32>)
// CHECK: linalg.reduce { arith.addf } ins(%{{.*}} : tensor<8x3xf32>) outs(%[[INIT]] : tensor<8xf32>) dimensions = [1]
// CHECK: linalg.reduce { arith.maximumf } ins(%{{.*}} : tensor<3x20xf32>) outs(%{{.*}} : tensor<20xf32>) dimensions = [0]
func.func @finish(%p: tensor<8x3xf32>, %i: tensor<8xf32>, %q: tensor<3x20xf32>, %j: tensor<20xf32>) -> (tensor<8xf32>, tensor<20xf32>) {
  %0 = coda.reduce_partials sum row %p : tensor<8x3xf32> outs(%i : tensor<8xf32>)
  %1 = coda.reduce_partials max col %q : tensor<3x20xf32> outs(%j : tensor<20xf32>)
  return %0, %1 : tensor<8xf32>, tensor<20xf32>
}
