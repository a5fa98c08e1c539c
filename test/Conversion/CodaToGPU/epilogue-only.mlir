// RUN: coda-opt %s --canonicalize --coda-to-gpu="schedule=cooperative" --canonicalize --split-input-file | FileCheck %s --check-prefixes=CHECK,COOP
// RUN: coda-opt %s --canonicalize --coda-to-gpu="schedule=ping-pong" --canonicalize --split-input-file | FileCheck %s --check-prefixes=CHECK,PP
// RUN: coda-opt %s --canonicalize --coda-to-gpu="schedule=cooperative cluster-m=2" --canonicalize --split-input-file | FileCheck %s --check-prefix=CLUSTER

// A GEMM whose epilogue does not read the accumulator (RoPE's adjoint once
// the table gradients nobody reads are dropped) becomes its epilogue alone:
// no operand tile is loaded, no WGMMA issued; the tile input is still read.
// The kernel is the register schedule's epilogue and nothing else: one tile
// per CTA (the grid covers the tiles, not the SMs), every thread an epilogue
// thread (the cooperative schedule's two warpgroups, ping-pong's one), no
// ring in shared memory, no mbarrier, no register reallocation. With no K
// loop to hide loads under, the tile input is not loaded into registers in
// the fragment layout ahead of the epilogue (4 bytes a lane) but copied
// into the pipelined slots with 16-byte cp.async, two fragment rows ahead.
// COOP: gpu.func @rope_adjoint_gemm0
// COOP-SAME: block = [256, 1, 1]
// COOP-SAME: grid = ["ceildiv(N, 256)", "ceildiv(M, 128)", "1"]
// COOP-SAME: persistent = false, schedule = "cooperative", shared_memory_bytes = 102400 : i64, stages = 0
// COOP-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// PP: gpu.func @rope_adjoint_gemm0
// PP-SAME: block = [128, 1, 1]
// PP-SAME: grid = ["ceildiv(N, 128)", "ceildiv(M, 128)", "1"]
// PP-SAME: persistent = false, schedule = "ping_pong", shared_memory_bytes = 27136 : i64, stages = 0
// PP-SAME: nvvm.maxntid = array<i32: 128, 1, 1>
// CHECK-NOT: setmaxnreg
// CHECK-NOT: mbarrier
// CHECK-NOT: wgmma.mma_async
// CHECK-NOT: nvgpu.tma.async.load
// CHECK: %[[BY:.*]] = gpu.block_id  y
// CHECK: %[[GX:.*]] = gpu.grid_dim  x
// CHECK: %[[ROW:.*]] = arith.muli %[[BY]], %[[GX]]
// CHECK: %[[BX:.*]] = gpu.block_id  x
// CHECK: arith.addi %[[ROW]], %[[BX]]
// CHECK-NOT: setmaxnreg
// CHECK-NOT: mbarrier
// CHECK: nvgpu.device_async_copy {{.*}} {bypassL1}
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: vector.load {{.*}} #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: gpu.return
// A cluster asked for keeps the persistent kernel (its CTAs run in step).
// CLUSTER: gpu.func @rope_adjoint_gemm0
// CLUSTER-SAME: persistent = true
// CLUSTER-SAME: stages = 4
func.func @rope_adjoint(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x128xbf16>,
                        %dy: memref<?x?xbf16>, %dx: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xbf16>, tile %d = %dy : memref<?x?xbf16>)
      outs(%dx : memref<?x?xbf16>) {
    %dv = arith.extf %d : bf16 to f32
    %r:2 = coda.pair_map stride 64 (%x0, %x1) = %acc, (%c0, %c1) = %c, (%d0, %d1) = %dv
        : f32, bf16, f32 -> f32, f32 {
      %e0 = arith.extf %c0 : bf16 to f32
      %e1 = arith.extf %c1 : bf16 to f32
      %g0 = arith.mulf %d0, %e0 : f32
      %g1 = arith.mulf %d1, %e1 : f32
      %t0 = arith.mulf %d0, %x0 : f32
      %t1 = arith.mulf %d1, %x1 : f32
      coda.yield %g0, %g1, %t0, %t1 : f32, f32, f32, f32
    }
    %t = arith.truncf %r#0 : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// The same epilogue reading the accumulator keeps the mainloop.
// CHECK-LABEL: gpu.func @rope_forward_gemm0
// CHECK: nvgpu.tma.async.load
// CHECK: wgmma.mma_async
func.func @rope_forward(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x128xbf16>,
                        %dx: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xbf16>)
      outs(%dx : memref<?x?xbf16>) {
    %r = coda.pair_map stride 64 (%x0, %x1) = %acc, (%c0, %c1) = %c : f32, bf16 -> f32 {
      %e0 = arith.extf %c0 : bf16 to f32
      %g0 = arith.mulf %x0, %e0 : f32
      %g1 = arith.mulf %x1, %e0 : f32
      coda.yield %g0, %g1 : f32, f32
    }
    %t = arith.truncf %r : f32 to bf16
    coda.yield %t : bf16
  }
  return
}
