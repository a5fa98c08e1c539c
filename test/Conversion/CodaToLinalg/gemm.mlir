// RUN: coda-opt %s --coda-lower-to-linalg --canonicalize --split-input-file | FileCheck %s

// CHECK-DAG: #[[LHS:[a-z0-9_]+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[RHST:[a-z0-9_]+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[OUT:[a-z0-9_]+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func @bias_on_tensors
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: tensor<4x8xbf16>, %[[B:[a-z0-9_]+]]: tensor<6x8xbf16>, %[[C:[a-z0-9_]+]]: tensor<6xf32>, %[[INIT:[a-z0-9_]+]]: tensor<4x6xbf16>)
// CHECK: %[[ZERO:[a-z0-9_]+]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x6xf32>)
// CHECK: %[[ACC:[a-z0-9_]+]] = linalg.generic {indexing_maps = [#[[LHS]], #[[RHST]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[A]], %[[B]] : tensor<4x8xbf16>, tensor<6x8xbf16>) outs(%[[ZERO]] : tensor<4x6xf32>)
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[R:[a-z0-9_]+]] = scf.for %[[M:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[O0:[a-z0-9_]+]] = %[[INIT]]) -> (tensor<4x6xbf16>)
// CHECK: scf.for %[[N:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[O1:[a-z0-9_]+]] = %[[O0]]) -> (tensor<4x6xbf16>)
// CHECK: %[[E:[a-z0-9_]+]] = tensor.extract %[[ACC]][%[[M]], %[[N]]] : tensor<4x6xf32>
// CHECK: %[[CB:[a-z0-9_]+]] = tensor.extract %[[C]][%[[N]]] : tensor<6xf32>
// CHECK: %[[S:[a-z0-9_]+]] = arith.addf %[[E]], %[[CB]] : f32
// CHECK: %[[T:[a-z0-9_]+]] = arith.truncf %[[S]] : f32 to bf16
// CHECK: tensor.insert %[[T]] into %[[O1]][%[[M]], %[[N]]] : tensor<4x6xbf16>
// CHECK: return %[[R]]
// CHECK-NOT: coda.
func.func @bias_on_tensors(%a: tensor<4x8xbf16>, %b: tensor<6x8xbf16>, %c: tensor<6xf32>, %init: tensor<4x6xbf16>) -> tensor<4x6xbf16> {
  %0 = coda.gemm %a, %b transpose_b : tensor<4x8xbf16>, tensor<6x8xbf16>
      epilogue(%acc, col %bias = %c : tensor<6xf32>) outs(%init : tensor<4x6xbf16>) {
    %0 = arith.addf %acc, %bias : f32
    %1 = arith.truncf %0 : f32 to bf16
    coda.yield %1 : bf16
  }
  return %0 : tensor<4x6xbf16>
}

// -----

// CHECK-LABEL: func @scale_on_memrefs
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<4x8xf32>, %[[B:[a-z0-9_]+]]: memref<8x6xf32>, %[[R:[a-z0-9_]+]]: memref<4xf32>, %[[O:[a-z0-9_]+]]: memref<4x6xf32>)
// CHECK: %[[ACC:[a-z0-9_]+]] = memref.alloc() : memref<4x6xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[ACC]] : memref<4x6xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : memref<4x8xf32>, memref<8x6xf32>) outs(%[[ACC]] : memref<4x6xf32>)
// CHECK: scf.for %[[M:[a-z0-9_]+]] =
// CHECK: scf.for %[[N:[a-z0-9_]+]] =
// CHECK: %[[E:[a-z0-9_]+]] = memref.load %[[ACC]][%[[M]], %[[N]]] : memref<4x6xf32>
// CHECK: %[[RV:[a-z0-9_]+]] = memref.load %[[R]][%[[M]]] : memref<4xf32>
// CHECK: %[[P:[a-z0-9_]+]] = arith.mulf %[[E]], %[[RV]] : f32
// CHECK: memref.store %[[P]], %[[O]][%[[M]], %[[N]]] : memref<4x6xf32>
// CHECK: memref.dealloc %[[ACC]] : memref<4x6xf32>
func.func @scale_on_memrefs(%a: memref<4x8xf32>, %b: memref<8x6xf32>, %r: memref<4xf32>, %o: memref<4x6xf32>) {
  coda.gemm %a, %b : memref<4x8xf32>, memref<8x6xf32> epilogue(%acc, row %rv = %r : memref<4xf32>) outs(%o : memref<4x6xf32>) {
    %0 = arith.mulf %acc, %rv : f32
    coda.yield %0 : f32
  }
  return
}

// -----

// CHECK-DAG: #[[BLHS:[a-z0-9_]+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[BRHS:[a-z0-9_]+]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-DAG: #[[BOUT:[a-z0-9_]+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func @batched_shared_rhs
// CHECK: linalg.generic {indexing_maps = [#[[BLHS]], #[[BRHS]], #[[BOUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK: scf.for %[[BI:[a-z0-9_]+]] =
// CHECK: scf.for %[[M:[a-z0-9_]+]] =
// CHECK: scf.for %[[N:[a-z0-9_]+]] =
// CHECK: tensor.extract %{{.*}}[%[[BI]], %[[M]], %[[N]]] : tensor<2x4x6xf32>
func.func @batched_shared_rhs(%a: tensor<2x4x8xf32>, %b: tensor<8x6xf32>, %o: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %0 = coda.gemm %a, %b : tensor<2x4x8xf32>, tensor<8x6xf32> epilogue(%acc) outs(%o : tensor<2x4x6xf32>) {
    coda.yield %acc : f32
  }
  return %0 : tensor<2x4x6xf32>
}
