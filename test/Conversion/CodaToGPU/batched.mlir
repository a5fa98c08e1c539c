// RUN: coda-opt %s --coda-to-gpu --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-to-gpu="schedule=cooperative cluster-m=2" --split-input-file | FileCheck %s --check-prefix=COOP

// A batched coda.gemm: the kernel takes B after K and runs the tiles of
// every batch, batch after batch (the linear tile index divided by the
// tiles per batch); batched operands are loaded through 3-D TMA
// descriptors (box depth 1, the batch as the outermost coordinate), and the
// epilogue reads and writes its batch's rank-reduced views.

// CHECK-LABEL: func.func @bmm
//       CHECK:   nvgpu.tma.create.descriptor %{{.*}} box[%c1{{.*}}, %c128{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x128x64xbf16
//       CHECK:   nvgpu.tma.create.descriptor %{{.*}} box[%c1{{.*}}, %c256{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x256x64xbf16
//       CHECK:   %[[B:.*]] = memref.dim %{{.*}}, %c0
//       CHECK:   %[[N:.*]] = arith.ceildivui
//       CHECK:   %[[M:.*]] = arith.ceildivui
//       CHECK:   %[[ROWS:.*]] = arith.muli %[[M]], %[[B]]
//       CHECK:   gpu.launch_func @coda_kernels::@bmm_gemm0 blocks in (%[[N]], %[[ROWS]], %c1{{[_0-9]*}})
//  CHECK-SAME:   args(%{{.*}} : !llvm.array<16 x i64>, %{{.*}} : !llvm.array<16 x i64>, %{{.*}} : index, %{{.*}} : index, %{{.*}} : index, %[[B]] : index,
//       CHECK: gpu.func @bmm_gemm0(%{{.*}}: !llvm.array<16 x i64>, %{{.*}}: !llvm.array<16 x i64>, %[[SM:.*]]: index, %[[SN:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[RES:.*]]: memref<4x?x96xbf16>, %[[OUT:.*]]: memref<4x?x96xbf16>)
//  CHECK-SAME:   batched = true
//  CHECK-SAME:   grid = ["ceildiv(N, 256)", "ceildiv(M, 128) * B", "1"]
//  CHECK-SAME:   {kind = "index", name = "B"}
//       CHECK:   %[[TN:.*]] = arith.ceildivui %[[SN]], %c256
//       CHECK:   %[[TM:.*]] = arith.ceildivui %[[SM]], %c128
//       CHECK:   %[[PER:.*]] = arith.muli %[[TM]], %[[TN]]
//       CHECK:   %[[BATCH:.*]] = arith.divui %{{.*}}, %[[PER]]
//       CHECK:   arith.remui %{{.*}}, %[[PER]]
//       CHECK:   nvgpu.tma.async.load %{{.*}}[%{{.*}}, %{{.*}}, %[[BATCH]]]{{.*}} : <tensor = memref<1x128x64xbf16
//       CHECK:   nvgpu.tma.async.load %{{.*}}[%{{.*}}, %{{.*}}, %[[BATCH]]]{{.*}} : <tensor = memref<1x256x64xbf16
//       CHECK:   memref.subview %[[RES]][%[[BATCH]], 0, 0] [1, %{{.*}}, 96] [1, 1, 1] : memref<4x?x96xbf16> to memref<?x96xbf16, strided<[96, 1], offset: ?>>
//       CHECK:   memref.subview %[[OUT]][%[[BATCH]], 0, 0] [1, %{{.*}}, 96] [1, 1, 1] : memref<4x?x96xbf16> to memref<?x96xbf16, strided<[96, 1], offset: ?>>

// The persistent cooperative kernel counts the tiles of every batch; its
// epilogue writes a batched output with the threads' stores, not TMA's
// (a batched output has no store descriptor).
// COOP-LABEL: func.func @bmm
//       COOP:   %[[B:.*]] = memref.dim %{{.*}}, %c0
//       COOP: gpu.func @bmm_gemm0
//  COOP-SAME:   grid = ["min(ceildiv(N, 256) * ceildiv(M, 256) * B, SMs / 2) * 2", "1", "1"]
//   COOP-NOT:   access = "store"
//       COOP:   %[[TILES:.*]] = arith.muli
//       COOP:   arith.muli %[[TILES]], %{{.*}} : index
//   COOP-NOT:   cp.async.bulk.tensor
//       COOP:   gpu.return
func.func @bmm(%a: memref<4x?x64xbf16>, %b: memref<4x96x64xbf16>, %r: memref<4x?x96xbf16>, %y: memref<4x?x96xbf16>) {
  coda.gemm %a, %b transpose_b : memref<4x?x64xbf16>, memref<4x96x64xbf16>
      epilogue(%acc, tile %res = %r : memref<4x?x96xbf16>) outs(%y : memref<4x?x96xbf16>) {
    %rf = arith.extf %res : bf16 to f32
    %h = arith.addf %acc, %rf : f32
    %hb = arith.truncf %h : f32 to bf16
    coda.yield %hb : bf16
  }
  return
}

// -----

// A shared rhs keeps its 2-D descriptor; a column input is read as it is
// (no batch); the batched row partials are reduced by a finish of one
// thread per (batch, row): index i reads partials[i / M, i mod M, j].
// CHECK-LABEL: func.func @shared_rhs
//       CHECK:   nvgpu.tma.create.descriptor %{{.*}} box[%c1{{.*}}, %c128{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x128x64xbf16
//       CHECK:   nvgpu.tma.create.descriptor %{{.*}} box[%c256{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<256x64xbf16
//       CHECK:   gpu.launch_func @coda_kernels::@shared_rhs_gemm0
//       CHECK:   %[[R0:.*]] = memref.dim %[[SS:.*]], %c0
//       CHECK:   %[[R1:.*]] = memref.dim %[[SS]], %c1
//       CHECK:   %[[R:.*]] = arith.muli %[[R0]], %[[R1]]
//       CHECK:   %[[BLOCKS:.*]] = arith.ceildivui %[[R]], %c128
//       CHECK:   gpu.launch_func @coda_kernels::@shared_rhs_finish0 blocks in (%[[BLOCKS]],
//       CHECK: gpu.func @shared_rhs_gemm0
//   CHECK-NOT:   memref.subview %{{.*}} : memref<96xf32>
//       CHECK:   nvgpu.tma.async.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}]{{.*}} : <tensor = memref<1x128x64xbf16
//       CHECK:   nvgpu.tma.async.load %{{.*}}[%{{.*}}, %{{.*}}]{{.*}} : <tensor = memref<256x64xbf16
//       CHECK: gpu.func @shared_rhs_finish0(%[[P:.*]]: memref<3x?x1xf32>, %[[O:.*]]: memref<3x?xf32>)
//       CHECK:   %[[PER:.*]] = memref.dim %[[O]], %c1
//       CHECK:   scf.if
//       CHECK:     %[[BI:.*]] = arith.divui %{{.*}}, %[[PER]]
//       CHECK:     %[[RI:.*]] = arith.remui %{{.*}}, %[[PER]]
//       CHECK:     scf.for %[[J:[a-z0-9_]+]] =
//       CHECK:       memref.load %[[P]][%[[BI]], %[[RI]], %[[J]]]
//       CHECK:     memref.store %{{.*}}, %[[O]][%[[BI]], %[[RI]]]
func.func @shared_rhs(%a: memref<3x?x64xbf16>, %b: memref<96x64xbf16>, %bias: memref<96xf32>,
                      %y: memref<3x?x96xf32>, %ss_part: memref<3x?x1xf32>, %ss: memref<3x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<3x?x64xbf16>, memref<96x64xbf16>
      epilogue(%acc, col %c = %bias : memref<96xf32>) outs(%y, %ss_part : memref<3x?x96xf32>, memref<3x?x1xf32>) {
    %x = arith.addf %acc, %c : f32
    %sq = arith.mulf %x, %x : f32
    %p = coda.row_reduce sum %sq tile 256 : f32
    coda.yield %x, %p : f32, !coda.partial<f32>
  }
  coda.reduce_partials sum row %ss_part : memref<3x?x1xf32> outs(%ss : memref<3x?xf32>)
  return
}
