// RUN: coda-opt %s --coda-to-gpu="schedule=ping-pong" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: coda-opt %s --coda-to-gpu="schedule=ping-pong cluster-m=2" --split-input-file 2>/dev/null | FileCheck %s --check-prefix=CLUSTER

// Ping-pong kernel: persistent CTAs of 384 threads with launch bounds and
// 128 x 128 tiles (a 4-slot ring of 32 KB stages); the producer block gives
// registers up and streams every tile's k-tiles; each consumer warpgroup
// takes the iterations of its parity, waits for the other's turn barrier
// (the previous tile's K loop done), computes the whole tile as two 64-row
// fragments (m64n128k16), arrives on its own turn barrier once per warp as
// soon as its last WGMMAs are issued (the other's queue behind them), waits
// for them, and runs the epilogue from its registers, staging the bf16 tile
// through its warps' buffers (4 warps x 8 rows x 128 bf16 per consumer after
// the 131072-byte ring). Each slot is released by one warpgroup (empty
// barriers count 1 arrival).

// CHECK-LABEL: func.func @plain
//       CHECK:   %[[GRID:.*]] = arith.minui %{{.*}}, %c132
//       CHECK:   gpu.launch_func  @coda_kernels::@plain_gemm0 blocks in (%[[GRID]], %c1{{.*}}, %c1{{.*}}) threads in (%c384{{.*}}, %{{.*}}, %{{.*}})  dynamic_shared_memory_size %c149504_i32
//       CHECK: gpu.func @plain_gemm0
//  CHECK-SAME:   persistent = true, schedule = "ping_pong", shared_memory_bytes = 149504 : i64, stages = 4 : i64, tile = [128, 128, 64]
//  CHECK-SAME:   nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
//       CHECK:   %[[FULL:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
//       CHECK:   %[[EMPTY:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
//       CHECK:   %[[TURN:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
//       CHECK:   nvgpu.mbarrier.init %[[FULL]][%{{.*}}], %c1
//       CHECK:   nvgpu.mbarrier.init %[[EMPTY]][%{{.*}}], %c1
//       CHECK:   nvgpu.mbarrier.init %[[TURN]][%{{.*}}], %c4
//       CHECK:   cf.cond_br %{{.*}}, ^[[PRODUCER:bb[0-9]+]], ^[[CONSUMER:bb[0-9]+]]
//       CHECK: ^[[PRODUCER]]:
//       CHECK:   nvvm.setmaxregister  decrease 40
//       CHECK:     nvgpu.tma.async.load
//       CHECK:   gpu.return
//       CHECK: ^[[CONSUMER]]:
//       CHECK:   nvvm.setmaxregister  increase 232
//       CHECK:   %[[INDEX:.*]] = arith.subi %{{.*}}, %c1
//       CHECK:   scf.for %[[TILE:.*]] = %block_id_x to %{{.*}} step %grid_dim_x {
//       CHECK:     %[[PARITY:.*]] = arith.remui %{{.*}}, %c2
//       CHECK:     %[[MINE:.*]] = arith.cmpi eq, %[[PARITY]], %[[INDEX]]
//       CHECK:     scf.if %[[MINE]] {
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[TURN]]
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[FULL]]
//   CHECK-COUNT-2:   wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
//       CHECK:       scf.for
//       CHECK:         nvgpu.mbarrier.try_wait.parity %[[FULL]]
//   CHECK-COUNT-8:     nvvm.wgmma.mma_async
//       CHECK:         nvvm.wgmma.wait.group.sync.aligned 1
//       CHECK:         nvgpu.mbarrier.arrive %[[EMPTY]]
//       CHECK:       nvgpu.mbarrier.arrive %[[TURN]][%[[INDEX]]]
//       CHECK:       nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:       nvgpu.mbarrier.arrive %[[EMPTY]]
//   CHECK-NOT:       memref.load %{{.*}} : memref<128x132xf32
//       CHECK:       vector.store %{{.*}} : memref<1088xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
//       CHECK:       nvvm.bar.warp.sync
//       CHECK:       vector.store %{{.*}} : memref<?x?xbf16>, vector<8xbf16>
//       CHECK:   gpu.return

// With clusters of two, each slot is released by one warpgroup of each CTA.
// CLUSTER-LABEL: gpu.func @plain_gemm0
//  CLUSTER-SAME:   cluster = [2, 1, 1]
//       CLUSTER:   nvgpu.mbarrier.create
//       CLUSTER:   %[[EMPTY:.*]] = nvgpu.mbarrier.create
//       CLUSTER:   nvgpu.mbarrier.init %[[EMPTY]][%{{.*}}], %c2
func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// Column partials: each consumer warpgroup's epilogue has its own scratch
// (one f32 row per warp, 4 x 128 x 4 bytes after the ring, the second
// consumer's 2048 bytes further) and synchronizes on its own named barrier
// (1 + its index) of 128 threads.
// CHECK-LABEL: gpu.func @colsum_gemm0
//  CHECK-SAME:   shared_memory_bytes = 136192 : i64
//       CHECK:   nvvm.setmaxregister  increase 232
//       CHECK:   %[[INDEX:.*]] = arith.subi %{{.*}}, %c1
//       CHECK:   %[[ID:.*]] = arith.addi %[[INDEX]], %c1
//       CHECK:   %[[ID32:.*]] = arith.index_castui %[[ID]] : index to i32
//       CHECK:   %[[OFFSET:.*]] = arith.muli %[[INDEX]], %c2048
//       CHECK:   scf.for
//       CHECK:     nvvm.barrier id = %[[ID32]] number_of_threads = %c128_i32
//       CHECK:     memref.view
//       CHECK:     nvvm.barrier id = %[[ID32]] number_of_threads = %c128_i32
func.func @colsum(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cs: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%cs : memref<?x?xf32>) {
    %c = coda.col_reduce sum %acc tile 128 : f32
    coda.yield %c : !coda.partial<f32>
  }
  return
}

// -----

// Row partials over 256 columns need a 256-column tile: the GEMM keeps the
// warp-specialized schedule, and says so.
// CHECK-LABEL: gpu.func @wide_gemm0
//  CHECK-SAME:   persistent = false
//  CHECK-SAME:   tile = [128, 256, 64]
func.func @wide(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %rs: memref<?x?xf32>) {
  // expected-warning @+1 {{ping-pong schedule not applied}}
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%rs : memref<?x?xf32>) {
    %s = coda.row_reduce sum %acc tile 256 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}

// -----

// A bf16 pair output (SwiGLU): each lane's pair of a column group is one
// element of a 64-element staged row (pair 4j + q), and the rows leave in
// 16-byte stores into the output's 64 pair columns of the tile.
// CHECK-LABEL: gpu.func @swiglu_gemm0
//  CHECK-SAME:   shared_memory_bytes = 149504 : i64
//       CHECK:   nvvm.setmaxregister  increase 232
//       CHECK:   memref.store %{{.*}} : memref<576xbf16, #gpu.address_space<workgroup>>
//       CHECK:   nvvm.bar.warp.sync
//       CHECK:   vector.load %{{.*}} : memref<576xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
//       CHECK:   vector.store %{{.*}} : memref<?x?xbf16>, vector<8xbf16>
//       CHECK:   nvvm.bar.warp.sync
func.func @swiglu(%x: memref<?x?xbf16>, %w: memref<?x?xbf16>, %out: memref<?x?xbf16>) {
  coda.gemm %x, %w transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%out : memref<?x?xbf16>) {
    %a = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %v = arith.mulf %g, %u : f32
      %vb = arith.truncf %v : f32 to bf16
      coda.yield %vb : bf16
    }
    coda.yield %a : !coda.pair<bf16>
  }
  return
}

// -----

// Periodic tables (rotate-half RoPE, pairs 64 apart): for each fragment
// row, the warp copies the table rows of its 8 output rows into shared
// memory (16-byte loads of column c mod P, 128 + 8 floats a row: 4 KB more
// per warp than the plain kernel, 149504 + 8 x 4352 bytes), then each run
// reads its two columns there.
// CHECK-LABEL: gpu.func @rope_gemm0
//  CHECK-SAME:   shared_memory_bytes = 184320 : i64
//       CHECK:   nvvm.setmaxregister  increase 232
//       CHECK:   nvvm.bar.warp.sync
//       CHECK:   arith.remui %{{.*}} : i32
//       CHECK:   vector.load %{{.*}} : memref<?x?xf32>, vector<4xf32>
//       CHECK:   vector.store %{{.*}} : memref<1088xf32, #gpu.address_space<workgroup>>, vector<4xf32>
//       CHECK:   nvvm.bar.warp.sync
//       CHECK:   vector.load %{{.*}} : memref<1088xf32, #gpu.address_space<workgroup>>, vector<2xf32>
func.func @rope(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x?xf32>,
                %q: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x?xf32>)
      outs(%q : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%lo, %hi) = %acc, (%c0, %c1) = %c
        : f32, f32 -> f32 {
      %y0 = arith.mulf %lo, %c0 : f32
      %y1 = arith.mulf %hi, %c1 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    %rb = arith.truncf %r : f32 to bf16
    coda.yield %rb : bf16
  }
  return
}

// -----

// A column input (a bias) staged per warp: in an interior tile, each lane's
// chunk of the tile's 128 columns is loaded before the K loop and stored
// into the warp's buffer after it, with no global load of the bias there.
// CHECK-LABEL: gpu.func @col_bias_gemm0
//       CHECK:   %[[CHUNK:.*]] = scf.if %[[INSIDE:.*]] -> (vector<4xf32>) {
//       CHECK:     vector.load %{{.*}} : memref<?xf32>, vector<4xf32>
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:   scf.if %[[INSIDE]] {
//   CHECK-NOT:     memref<?xf32>
//       CHECK:     vector.store %[[CHUNK]], %{{.*}} : memref<{{.*}}xf32, #gpu.address_space<workgroup>>, vector<4xf32>
func.func @col_bias(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %bias: memref<?xf32>,
                    %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, col %bv = %bias : memref<?xf32>) outs(%y : memref<?x?xbf16>) {
    %x = arith.addf %acc, %bv : f32
    %t = arith.truncf %x : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// An epilogue that writes an interleaved output (SwiGLU's derivative)
// takes an interior copy under ping-pong, and its 16-bit tile inputs,
// which it does not prefetch into registers, enter through slots of their
// own: two per input and warp (4 warps x 2 inputs x 2 slots x 8 rows x 136
// bf16 per consumer, 69632 bytes beside the plain kernel's 149504). Each
// warp copies the first two of its fragment rows with cp.async (16 bytes,
// L2 only) before any row's math, one group per row; a row waits until at
// most the next row's group is in flight (the last row: none), reads its
// slots with ldmatrix and hands them to the row two on. The checked copy
// bounds each copy by the columns and rows left (zero-filled beyond them)
// where the rows are aligned, else copies chunk by chunk.
// CHECK-LABEL: gpu.func @swiglu_backward_gemm0
//  CHECK-SAME:   shared_memory_bytes = 219136
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:   scf.if
// CHECK-COUNT-8:     nvgpu.device_async_copy %{{.*}}, 8 {bypassL1} : memref<?x?xbf16> to memref<1088xbf16, #gpu.address_space<workgroup>>
//       CHECK:     nvvm.cp.async.commit.group
// CHECK-COUNT-8:     nvgpu.device_async_copy %{{.*}}, 8 {bypassL1}
//       CHECK:     nvvm.cp.async.commit.group
//   CHECK-NOT:     nvgpu.ldmatrix
//       CHECK:     nvvm.cp.async.wait.group 1
//       CHECK:     nvvm.bar.warp.sync
// CHECK-COUNT-8:     nvgpu.ldmatrix
//       CHECK:     nvvm.bar.warp.sync
// CHECK-COUNT-8:     nvgpu.device_async_copy %{{.*}}, 8 {bypassL1}
//       CHECK:     nvvm.cp.async.commit.group
//       CHECK:     nvvm.cp.async.wait.group 1
//       CHECK:     nvvm.cp.async.wait.group 1
//       CHECK:     nvvm.cp.async.wait.group 0
//       CHECK:   } else {
//       CHECK:     scf.if
// CHECK-COUNT-4:       nvgpu.device_async_copy %{{.*}}, 8, %{{.*}} {bypassL1}
//       CHECK:     } else {
//       CHECK:       scf.if
//       CHECK:         vector.load %{{.*}} : memref<?x?xbf16>, vector<8xbf16>
//       CHECK:       } else {
//       CHECK:         scf.for
//       CHECK:     nvvm.cp.async.commit.group
func.func @swiglu_backward(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?x?xbf16>,
                           %u: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %gv = %g : memref<?x?xbf16>, tile %uv = %u : memref<?x?xbf16>)
      outs(%y : memref<?x?xbf16>) {
    %gf = arith.extf %gv : bf16 to f32
    %uf = arith.extf %uv : bf16 to f32
    %dg = arith.mulf %acc, %uf : f32
    %du = arith.mulf %acc, %gf : f32
    %e = arith.truncf %dg : f32 to bf16
    %o = arith.truncf %du : f32 to bf16
    %both = coda.interleave %e, %o : bf16
    coda.yield %both : !coda.interleaved<bf16>
  }
  return
}
