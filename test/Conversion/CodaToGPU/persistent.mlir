// RUN: coda-opt %s --coda-to-gpu="persistent=1" --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-to-gpu="persistent=1 tile-n=128" --split-input-file | FileCheck %s --check-prefix=ONE

// Persistent kernel: CTAs stride over the tiles (blockIdx.x, + gridDim.x);
// thread 0 streams every tile's k-tiles through the ring, warpgroups 1 and 2
// compute and hand the accumulators over through a staging tile after the
// ring (`staged`, once the epilogue has `drained` the previous hand-over),
// warps 1-3 run the epilogue meanwhile. A 128 x 256 tile goes over as two
// 64-row slabs, one per consumer (3 ring slots of 48 KiB + a 64 x 260 f32
// staging tile + 1 KiB of alignment).

// CHECK-LABEL: func.func @plain
//       CHECK:   %[[TILES:.*]] = arith.muli
//       CHECK:   %[[GRID:.*]] = arith.minui %[[TILES]], %c132
//       CHECK:   gpu.launch_func  @coda_kernels::@plain_gemm0 blocks in (%[[GRID]], %c1{{.*}}, %c1{{.*}}) threads in (%c384{{.*}}, %{{.*}}, %{{.*}})  dynamic_shared_memory_size %c215040_i32
//       CHECK: gpu.func @plain_gemm0
//  CHECK-SAME:   block = [384, 1, 1]
//  CHECK-SAME:   grid = ["min(ceildiv(N, 256) * ceildiv(M, 128), SMs)", "1", "1"]
//  CHECK-SAME:   persistent = true, shared_memory_bytes = 215040 : i64, stages = 3 : i64, tile = [128, 256, 64], transpose_b = true, warp_specialized = true
//       CHECK:   %[[FULL:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
//       CHECK:   %[[EMPTY:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 3>
//       CHECK:   %[[STAGED:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>>
//       CHECK:   %[[DRAINED:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>>
// One consumer warpgroup per hand-over; the 96 epilogue threads drain it.
//       CHECK:   nvgpu.mbarrier.init %[[STAGED]][%{{.*}}], %c128
//       CHECK:   nvgpu.mbarrier.init %[[DRAINED]][%{{.*}}], %c96
// The producer: a tile loop around the k loop; ring slots count across tiles.
//       CHECK:   scf.if
//       CHECK:     %[[STRIDE:.*]] = gpu.grid_dim x
//       CHECK:     scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[STRIDE]]
//       CHECK:       scf.for
//       CHECK:         nvgpu.mbarrier.try_wait.parity %[[EMPTY]]
//       CHECK:         nvgpu.mbarrier.arrive.expect_tx %[[FULL]]{{.*}}, %c49152
//       CHECK:         nvgpu.tma.async.load
//       CHECK:         nvgpu.tma.async.load
// The consumers: 64 x 256 each; the last k-tile's slot is released after the
// loop; the staging tile is waited for, filled and handed over.
//       CHECK:   scf.if
//       CHECK:     scf.for %{{.*}} step %{{.*}}grid_dim
//       CHECK:       nvvm.wgmma.mma_async {{.*}}<m = 64, n = 256, k = 16>
//       CHECK:       scf.for
//       CHECK:         nvgpu.mbarrier.try_wait.parity %[[FULL]]
//       CHECK:         nvgpu.mbarrier.arrive %[[EMPTY]]
//       CHECK:       nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:       nvgpu.mbarrier.arrive %[[EMPTY]]
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[DRAINED]]
//       CHECK:       memref.store
//       CHECK:       nvgpu.mbarrier.arrive %[[STAGED]]
// The epilogue warps: two slabs per tile, 64 rows apart, each waited for,
// run with a named barrier of 96 threads, and drained.
//       CHECK:   scf.if
//       CHECK:     scf.for %{{.*}} step %{{.*}}grid_dim
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[STAGED]]
//       CHECK:       nvvm.barrier id = %{{.*}} number_of_threads = %c96_i32
//       CHECK:       vector.store
//       CHECK:       nvgpu.mbarrier.arrive %[[DRAINED]]
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[STAGED]]
//       CHECK:       arith.addi %{{.*}}, %c64
//       CHECK:       vector.store
//       CHECK:       nvgpu.mbarrier.arrive %[[DRAINED]]
//       CHECK:   gpu.return

// With tile-n=128 the whole tile fits the staging tile next to 4 ring slots
// and both consumers hand over together.
// ONE-LABEL: gpu.func @plain_gemm0
//  ONE-SAME:   persistent = true, shared_memory_bytes = 199680 : i64, stages = 4 : i64, tile = [128, 128, 64]
//       ONE:   nvgpu.mbarrier.init %{{.*}}, %c256
//       ONE:   nvgpu.mbarrier.init %{{.*}}, %c96
//       ONE:   nvvm.wgmma.mma_async {{.*}}<m = 64, n = 128, k = 16>
//       ONE:   nvgpu.mbarrier.try_wait.parity
//       ONE:   vector.store
//   ONE-NOT:   vector.store
//       ONE:   gpu.return
func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// Column partials cover all 128 rows of a tile: not handed over in slabs, so
// a 256-column tile is not persistent; a 128-column one is, with the scratch
// rows after the staging tile (offset 131072 + 67584 from the aligned base).
// CHECK-LABEL: gpu.func @col_partials_gemm0
//  CHECK-SAME:   block = [384, 1, 1]
//  CHECK-SAME:   persistent = false
//  CHECK-SAME:   tile = [128, 256, 64]
// ONE-LABEL: gpu.func @col_partials_gemm0
//  ONE-SAME:   persistent = true, shared_memory_bytes = 202752
//       ONE:   arith.addi %{{.*}}, %c198656
func.func @col_partials(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %p: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%p : memref<?x?xf32>) {
    %s = coda.col_reduce sum %acc tile 128 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}
