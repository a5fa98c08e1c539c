// RUN: coda-opt %s --coda-to-gpu="schedule=warp-specialized tile-n=256" --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-to-gpu --split-input-file | FileCheck %s --check-prefix=PARTIALS

// Warp-specialized mainloop: warpgroup 0 keeps the TMA ring full (waiting on
// each slot's `empty` barrier), warpgroups 1 and 2 each run WGMMA over 64
// rows and release slots; only the consumers run the epilogue, synchronized
// by a named barrier of 256 threads.

// CHECK-LABEL: func.func @ws
//       CHECK:   gpu.launch_func @coda_kernels::@ws_gemm0 blocks in ({{.*}}) threads in (%c384{{.*}}, %{{.*}}, %{{.*}}) dynamic_shared_memory_size %c197632_i32
//       CHECK: gpu.func @ws_gemm0
//  CHECK-SAME:   block = [384, 1, 1]
//  CHECK-SAME:   shared_memory_bytes = 197632 : i64, stages = 4 : i64, tile = [128, 256, 64], transpose_a = false, transpose_b = true, warp_specialized = true
//       CHECK:   %[[FULL:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
//       CHECK:   %[[EMPTY:.*]] = nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
//       CHECK:   nvgpu.mbarrier.init %[[FULL]]{{.*}}, %c1
//       CHECK:   nvgpu.mbarrier.init %[[EMPTY]]{{.*}}, %c2
// The warpgroup index, warp-uniform, picks the role.
//       CHECK:   gpu.shuffle  idx
// The producer.
//       CHECK:   scf.if
//   CHECK-NOT:     nvvm.setmaxregister
//       CHECK:     scf.for
//       CHECK:       scf.if
//       CHECK:         nvgpu.mbarrier.try_wait.parity %[[EMPTY]]
//       CHECK:       nvgpu.mbarrier.arrive.expect_tx %[[FULL]]{{.*}}, %c49152
//       CHECK:       nvgpu.tma.async.load
//       CHECK:       nvgpu.tma.async.load
// The consumers.
//       CHECK:   scf.if
//       CHECK:     scf.for
//       CHECK:       nvgpu.mbarrier.try_wait.parity %[[FULL]]
// CHECK-COUNT-4:     nvvm.wgmma.mma_async {{.*}}<m = 64, n = 256, k = 16>
//       CHECK:       nvvm.wgmma.commit.group.sync.aligned
//       CHECK:       nvvm.wgmma.wait.group.sync.aligned 1
//       CHECK:       nvgpu.mbarrier.arrive %[[EMPTY]]
//       CHECK:     nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
//       CHECK:     vector.store
//       CHECK:   gpu.return
func.func @ws(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// Row partials over 128 columns inside a 256-column tile: each CTA writes two
// per row, from 16 lanes each.
// PARTIALS-LABEL: gpu.func @partials_gemm0
//  PARTIALS-SAME:   name = "output0", partial_tile = 128 : i64, rank = 2 : i64, role = "row_partials"
//  PARTIALS-SAME:   tile = [128, 256, 64]
//       PARTIALS:   arith.divui %{{.*}}, %c16
//       PARTIALS:   gpu.shuffle  xor %{{.*}}, %c8_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
//       PARTIALS:   gpu.shuffle  xor %{{.*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
//   PARTIALS-NOT:   gpu.shuffle  xor %{{.*}}, %c16_i32
func.func @partials(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %p: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%p : memref<?x?xf32>) {
    %s = coda.row_reduce sum %acc tile 128 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return
}
