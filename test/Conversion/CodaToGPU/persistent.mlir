// RUN: coda-opt %s --coda-to-gpu="schedule=staged" --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-to-gpu="schedule=staged tile-n=128" --split-input-file | FileCheck %s --check-prefix=ONE
// RUN: coda-opt %s --coda-to-gpu="schedule=staged" --split-input-file | FileCheck %s --check-prefix=WIDE

// Persistent kernel: CTAs stride over 128 x 128 tiles (blockIdx.x, +
// gridDim.x); thread 0 streams every tile's k-tiles through the ring,
// warpgroups 1 and 2 compute and hand the accumulators over through a staging
// tile after the ring (`staged`, once the epilogue has `drained` the previous
// one), warps 2-3 run the epilogue meanwhile (64 threads: 4 rows of 128
// columns per pass, 32 passes cover the tile). Shared memory: 4 ring slots of
// 32 KiB + the 128 x 132 f32 staging tile + 1 KiB of alignment. tile-n=128
// gives the same kernel.

// CHECK-LABEL: func.func @plain
//       CHECK:   %[[TILES:.*]] = arith.muli
//       CHECK:   %[[GRID:.*]] = arith.minui %[[TILES]], %c132
//       CHECK:   gpu.launch_func  @coda_kernels::@plain_gemm0 blocks in (%[[GRID]], %c1{{.*}}, %c1{{.*}}) threads in (%c384{{.*}}, %{{.*}}, %{{.*}})  dynamic_shared_memory_size %c199680_i32
//       CHECK: gpu.func @plain_gemm0
//  CHECK-SAME:   block = [384, 1, 1]
//  CHECK-SAME:   grid = ["min(ceildiv(N, 128) * ceildiv(M, 128), SMs)", "1", "1"]
//  CHECK-SAME:   persistent = true, schedule = "staged", shared_memory_bytes = 199680 : i64, stages = 4 : i64, tile = [128, 128, 64], transpose_a = false, transpose_b = true, warp_specialized = true
//       CHECK:   %[[FULL:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
//       CHECK:   %[[EMPTY:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
//       CHECK:   %[[STAGED:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>>
//       CHECK:   %[[DRAINED:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>>
// Both consumer warpgroups hand over; the 64 epilogue threads drain.
//       CHECK:   nvgpu.mbarrier.init %[[STAGED]][%{{.*}}], %c256
//       CHECK:   nvgpu.mbarrier.init %[[DRAINED]][%{{.*}}], %c64
// The producer: a tile loop around the k loop; ring slots count across tiles.
//       CHECK:   scf.if
//       CHECK:     %[[STRIDE:.*]] = gpu.grid_dim x
//       CHECK:     scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[STRIDE]]
//       CHECK:       scf.for
//       CHECK:         nvgpu.mbarrier.try_wait.parity %[[EMPTY]]
//       CHECK:         nvgpu.mbarrier.arrive.expect_tx %[[FULL]]{{.*}}, %c32768
//       CHECK:         nvgpu.tma.async.load
//       CHECK:         nvgpu.tma.async.load
// The consumers: 64 x 128 each; the last k-tile's slot is released after the
// loop; the staging tile is waited for, filled and handed over.
//       CHECK:   scf.if
//       CHECK:     scf.for %{{.*}} step %{{.*}}grid_dim
//       CHECK:       nvvm.wgmma.mma_async {{.*}}<m = 64, n = 128, k = 16>
//       CHECK:       scf.for
//       CHECK:         nvgpu.mbarrier.try_wait.parity %[[FULL]]
//       CHECK:         nvgpu.mbarrier.arrive %[[EMPTY]]
//       CHECK:       nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:       nvgpu.mbarrier.arrive %[[EMPTY]]
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[DRAINED]]
//       CHECK:       memref.store
//       CHECK:       nvgpu.mbarrier.arrive %[[STAGED]]
// The epilogue warps: their own named barrier of 64 threads.
//       CHECK:   scf.if
//       CHECK:     scf.for %{{.*}} step %{{.*}}grid_dim
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[STAGED]]
//       CHECK:       nvvm.barrier id = %{{.*}} number_of_threads = %c64_i32
// Every row of the tile: 32 passes of 4 rows (16 threads a row).
//       CHECK:       %[[PASSES:.*]] = arith.constant 32 : index
//  CHECK-NEXT:       %[[UNROLL:.*]] = arith.constant 4 : index
//  CHECK-NEXT:       scf.for %{{.*}} = %{{.*}} to %[[PASSES]] step %[[UNROLL]]
//       CHECK:       vector.store
//       CHECK:       nvgpu.mbarrier.arrive %[[DRAINED]]
//       CHECK:   gpu.return
// ONE-LABEL: gpu.func @plain_gemm0
//  ONE-SAME:   persistent = true, schedule = "staged", shared_memory_bytes = 199680 : i64, stages = 4 : i64, tile = [128, 128, 64]
func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// Column partials: the scratch rows (one per pass row: 4 x 128 f32) follow
// the staging tile, after the ring
// (offset 131072 + 67584 from the aligned base).
// CHECK-LABEL: gpu.func @col_partials_gemm0
//  CHECK-SAME:   persistent = true, schedule = "staged", shared_memory_bytes = 201728
//       CHECK:   arith.addi %{{.*}}, %c198656
func.func @col_partials(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %p: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%p : memref<?x?xf32>) {
    %s = coda.col_reduce sum %acc tile 128 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}

// -----

// Row partials over 256 columns need a 256-column tile: not persistent.
// WIDE-LABEL: gpu.func @wide_partials_gemm0
//  WIDE-SAME:   block = [384, 1, 1]
//  WIDE-SAME:   persistent = false
//  WIDE-SAME:   tile = [128, 256, 64]
func.func @wide_partials(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %p: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%p : memref<?x?xf32>) {
    %s = coda.row_reduce sum %acc tile 256 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}
