// RUN: coda-opt %s --coda-to-gpu="schedule=cooperative cluster-m=2" --split-input-file --verify-diagnostics | FileCheck %s

// Clusters of two CTAs along M (cooperative kernels): the pair computes two
// vertically adjacent tiles of the same columns, each CTA loads half of the
// rhs tile (128 of its 256 rows) and multicasts it to both; a slot is
// refilled once both CTAs' consumers released it (4 arrivals: two
// warpgroups per CTA, each arriving on its own and its partner's barrier).
// The grid is a whole number of clusters, at most 66 of them (132 SMs).

// CHECK-LABEL: func.func @plain
//       CHECK:   %[[PAIRS:.*]] = arith.minui %{{.*}}, %c66
//       CHECK:   %[[GRID:.*]] = arith.muli %[[PAIRS]], %c2
//       CHECK:   gpu.launch_func  @coda_kernels::@plain_gemm0 blocks in (%[[GRID]], %c1{{.*}}, %c1{{.*}}) threads in (%c384
//       CHECK: gpu.func @plain_gemm0
//  CHECK-SAME:   cluster = [2, 1, 1]
//  CHECK-SAME:   name = "lhs_tensormap"{{.*}}box = [64, 128]{{.*}}name = "rhs_tensormap"
//  CHECK-SAME:   nvvm.cluster_dim = array<i32: 2, 1, 1>
//       CHECK:   %[[RANK:.*]] = gpu.cluster_block_id  x
//       CHECK:   nvgpu.mbarrier.init %{{.*}}, %c4
//       CHECK:   nvvm.cluster.arrive
//  CHECK-NEXT:   nvvm.cluster.wait
// The producer: its own lhs tile, and half the rhs tile (row 128 * rank of
// both the slot and the tile) multicast to both CTAs.
//       CHECK:   nvgpu.tma.async.load {{.*}} to %{{.*}} : <tensor = memref<128x64xbf16
//   CHECK-NOT:   multicast_mask
//       CHECK:   arith.muli %[[RANK]], %c16384
//       CHECK:   arith.muli %[[RANK]], %c128
//       CHECK:   nvgpu.tma.async.load {{.*}} multicast_mask = %c3_i16 : <tensor = memref<128x64xbf16
//       CHECK:   nvvm.cluster.arrive
//  CHECK-NEXT:   nvvm.cluster.wait
//  CHECK-NEXT:   gpu.return
// The consumers: the tile row is the cluster tile's row times 2 plus the
// rank; slots are released on both CTAs' barriers.
//       CHECK:   arith.addi %{{.*}}, %[[RANK]]
//       CHECK:   nvgpu.mbarrier.get
//       CHECK:   nvvm.mapa %{{.*}}, %c0_i32
//       CHECK:   nvvm.mbarrier.arrive
//       CHECK:   nvvm.mapa %{{.*}}, %c1_i32
//       CHECK:   nvvm.mbarrier.arrive
// A tile row below M (the second of a pair when M has an odd number of tile
// rows) computes but writes nothing.
//       CHECK:   arith.cmpi ult, %{{.*}}, %arg2
//       CHECK:   scf.if
//       CHECK:   vector.store
//       CHECK:   nvvm.cluster.arrive
//  CHECK-NEXT:   nvvm.cluster.wait
//  CHECK-NEXT:   gpu.return
func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// A GEMM the cooperative schedule does not take (64-row column-partial
// tiles) keeps one CTA per cluster, and says so.
// CHECK-LABEL: func.func @narrow
//       CHECK: gpu.func @narrow_gemm0
//  CHECK-SAME:   cluster = [1, 1, 1]
//   CHECK-NOT:   nvvm.cluster_dim
func.func @narrow(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %s: memref<?x?xf32>) {
  // expected-warning @+2 {{cooperative schedule not applied: it needs 128-row tiles}}
  // expected-warning @+1 {{cluster-m=2 not applied: clusters of CTAs need the cooperative or ping-pong schedule}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%s : memref<?x?xf32>) {
    %c = coda.col_reduce sum %acc tile 64 : f32
    coda.yield %c : !coda.partial<f32>
  }
  return
}
