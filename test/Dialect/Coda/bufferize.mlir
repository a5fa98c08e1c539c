// RUN: coda-opt %s --one-shot-bufferize="bufferize-function-boundaries" --split-input-file | FileCheck %s

// coda.gemm and coda.reduce_partials bufferize in place: the destination
// buffers become the memref outputs.

// CHECK-LABEL: func @gemm
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<8x4xf32{{.*}}>, %[[B:[a-z0-9_]+]]: memref<4x6xf32{{.*}}>, %[[C:[a-z0-9_]+]]: memref<6xf32{{.*}}>, %[[Y:[a-z0-9_]+]]: memref<8x6xbf16{{.*}}>, %[[P:[a-z0-9_]+]]: memref<8x1xf32{{.*}}>)
// CHECK: coda.gemm %[[A]], %[[B]] : memref<8x4xf32{{.*}}>, memref<4x6xf32{{.*}}>
// CHECK-NEXT: epilogue(%{{.*}}, col %{{.*}} = %[[C]] : memref<6xf32{{.*}}>)
// CHECK-NEXT: outs(%[[Y]], %[[P]] : memref<8x6xbf16{{.*}}>, memref<8x1xf32{{.*}}>) {
// CHECK: coda.row_reduce sum
// CHECK: return %[[Y]], %[[P]]
func.func @gemm(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %c: tensor<6xf32>, %y: tensor<8x6xbf16>, %p: tensor<8x1xf32>)
    -> (tensor<8x6xbf16>, tensor<8x1xf32>) {
  %0:2 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32>
      epilogue(%acc, col %cv = %c : tensor<6xf32>) outs(%y, %p : tensor<8x6xbf16>, tensor<8x1xf32>) {
    %0 = arith.addf %acc, %cv : f32
    %1 = arith.truncf %0 : f32 to bf16
    %2 = coda.row_reduce sum %0 tile 8 : f32
    coda.yield %1, %2 : bf16, !coda.partial<f32>
  }
  return %0#0, %0#1 : tensor<8x6xbf16>, tensor<8x1xf32>
}

// -----

// CHECK-LABEL: func @finish
// CHECK-SAME: (%[[P:[a-z0-9_]+]]: memref<8x3xf32{{.*}}>, %[[I:[a-z0-9_]+]]: memref<8xf32{{.*}}>)
// CHECK: coda.reduce_partials sum row %[[P]] : memref<8x3xf32{{.*}}> outs(%[[I]] : memref<8xf32{{.*}}>)
// CHECK: return %[[I]]
func.func @finish(%p: tensor<8x3xf32>, %i: tensor<8xf32>) -> tensor<8xf32> {
  %0 = coda.reduce_partials sum row %p : tensor<8x3xf32> outs(%i : tensor<8xf32>)
  return %0 : tensor<8xf32>
}

// -----

// A destination still needed afterwards is not clobbered: a tile output
// overwrites every element, so a fresh buffer suffices; a row selection keeps
// rows without a target, so its destination is copied.
// CHECK-LABEL: func @destination_still_needed
// CHECK-SAME: %[[Y:[a-z0-9_]+]]: memref<8x6xf32{{.*}}>, %[[S:[a-z0-9_]+]]: memref<8xf32{{.*}}>)
// CHECK: %[[FRESH:.+]] = memref.alloc() {{.*}} : memref<8x6xf32>
// CHECK: %[[COPY:.+]] = memref.alloc() {{.*}} : memref<8xf32>
// CHECK: memref.copy %[[S]], %[[COPY]]
// CHECK-NOT: memref.copy
// CHECK: coda.gemm
// CHECK: outs(%[[FRESH]], %[[COPY]] : memref<8x6xf32>, memref<8xf32>)
// CHECK: return %[[FRESH]], %[[COPY]], %[[Y]], %[[S]]
func.func @destination_still_needed(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %t: tensor<8xi64>, %y: tensor<8x6xf32>, %s: tensor<8xf32>)
    -> (tensor<8x6xf32>, tensor<8xf32>, tensor<8x6xf32>, tensor<8xf32>) {
  %0:2 = coda.gemm %a, %b : tensor<8x4xf32>, tensor<4x6xf32> epilogue(%acc, row %tv = %t : tensor<8xi64>)
      outs(%y, %s : tensor<8x6xf32>, tensor<8xf32>) {
    %sel = coda.row_select %acc at %tv : f32, i64
    coda.yield %acc, %sel : f32, !coda.row<f32>
  }
  return %0#0, %0#1, %y, %s : tensor<8x6xf32>, tensor<8xf32>, tensor<8x6xf32>, tensor<8xf32>
}
