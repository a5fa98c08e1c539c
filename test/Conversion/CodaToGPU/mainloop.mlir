// RUN: coda-opt %s --coda-to-gpu="tile-n=128 schedule=single" --split-input-file | FileCheck %s

// The structure of a kernel: host descriptors and launch; in the kernel the
// mbarrier ring, TMA loads, WGMMA over 128-byte swizzled tiles and the
// epilogue over the shared-memory accumulator tile.

// CHECK-LABEL: func.func @nt
// The descriptors' bytes, read back from where the CUDA runtime wrappers
// encode them, are launch arguments (host copies allocated at entry).
//       CHECK:   %[[RSLOT:.*]] = llvm.alloca %{{.*}} x !llvm.array<16 x i64> {alignment = 64 : i64}
//       CHECK:   %[[LSLOT:.*]] = llvm.alloca %{{.*}} x !llvm.array<16 x i64> {alignment = 64 : i64}
//       CHECK:   %[[M:.*]] = memref.dim %arg0, %c0
//       CHECK:   %[[K:.*]] = memref.dim %arg0, %c1
//       CHECK:   %[[N:.*]] = memref.dim %arg1, %c0
//       CHECK:   %[[LMAP:.*]] = nvgpu.tma.create.descriptor %{{.*}} box[%c128{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
//       CHECK:   %[[LPTR:.*]] = builtin.unrealized_conversion_cast %[[LMAP]]
//       CHECK:   llvm.call @mgpuMemcpy(%[[LSLOT]], %[[LPTR]], %{{.*}}, %{{.*}})
//       CHECK:   llvm.call @mgpuStreamSynchronize
//       CHECK:   %[[LBYTES:.*]] = llvm.load %[[LSLOT]] : !llvm.ptr -> !llvm.array<16 x i64>
//       CHECK:   nvgpu.tma.create.descriptor %{{.*}} box[%c128{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
//       CHECK:   %[[RBYTES:.*]] = llvm.load %[[RSLOT]] : !llvm.ptr -> !llvm.array<16 x i64>
//       CHECK:   %[[GX:.*]] = arith.ceildivui %[[N]], %c128
//       CHECK:   %[[GY:.*]] = arith.ceildivui %[[M]], %c128
//       CHECK:   gpu.launch_func @coda_kernels::@nt_gemm0 blocks in (%[[GX]], %[[GY]], %{{.*}}) threads in (%c128{{.*}}, %{{.*}}, %{{.*}}) dynamic_shared_memory_size %c132096_i32 args(%[[LBYTES]] : !llvm.array<16 x i64>, %[[RBYTES]] : !llvm.array<16 x i64>, %[[M]] : index, %[[N]] : index, %[[K]] : index, %arg2 : memref<?xf32>, %arg3 : memref<?x512xbf16>)
//   CHECK-NOT:   coda.gemm

//       CHECK: gpu.module @coda_kernels
//       CHECK:   gpu.func @nt_gemm0(%[[LARG:.*]]: !llvm.array<16 x i64>, %[[RARG:.*]]: !llvm.array<16 x i64>, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?x512xbf16>) kernel
//  CHECK-SAME:     coda.kernel = {block = [128, 1, 1], cluster = [1, 1, 1], function = "nt", grid = ["ceildiv(N, 128)", "ceildiv(M, 128)", "1"]
//  CHECK-SAME:     shared_memory_bytes = 132096 : i64, stages = 4 : i64, tile = [128, 128, 64], transpose_a = false, transpose_b = true, warp_specialized = false}
//  CHECK-SAME:     coda.tensormap_params
//  CHECK-SAME:     known_block_size = array<i32: 128, 1, 1>
// Each descriptor parameter's address (--coda-tensormap-params makes it the
// parameter's own).
//       CHECK:     %[[LADDR:.*]] = llvm.alloca %{{.*}} x !llvm.array<16 x i64> {alignment = 64 : i64}
//       CHECK:     llvm.store %[[LARG]], %[[LADDR]]
//       CHECK:     %[[RADDR:.*]] = llvm.alloca %{{.*}} x !llvm.array<16 x i64> {alignment = 64 : i64}
//       CHECK:     llvm.store %[[RARG]], %[[RADDR]]
//       CHECK:     nvgpu.mbarrier.create -> <memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
//       CHECK:     nvgpu.mbarrier.init
//       CHECK:     nvvm.fence.mbarrier.init
//       CHECK:     gpu.barrier
//       CHECK:     nvgpu.tma.prefetch.descriptor
//       CHECK:     nvgpu.mbarrier.arrive.expect_tx %{{.*}}[%{{.*}}], %c32768
//       CHECK:     nvgpu.tma.async.load
//       CHECK:     nvgpu.tma.async.load
//       CHECK:     scf.for
//       CHECK:       nvgpu.mbarrier.try_wait.parity
//       CHECK:       nvvm.wgmma.fence.aligned
// Two m64 halves x four k16 steps, rhs K-major (col layout).
// CHECK-COUNT-8:     nvvm.wgmma.mma_async {{.*}}<m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
//       CHECK:       nvvm.wgmma.commit.group.sync.aligned
//       CHECK:       nvvm.wgmma.wait.group.sync.aligned 1
//       CHECK:       gpu.barrier
//       CHECK:     nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:     llvm.extractvalue
//       CHECK:     memref.store %{{.*}}, %{{.*}} : memref<128x132xf32, #gpu.address_space<workgroup>>
// The epilogue: each thread reads 8 accumulator columns of a row as one
// vector, the row input at the clamped row, and stores 8 bf16 (16 bytes) at
// once when they are in bounds and aligned, else element by element.
//       CHECK:     scf.for
//       CHECK:       vector.load %{{.*}} {alignment = 16 : i64} : memref<128x132xf32, #gpu.address_space<workgroup>>, vector<8xf32>
//       CHECK:       memref.load %{{.*}} : memref<?xf32>
// CHECK-COUNT-8:     arith.mulf
//       CHECK:       memref.extract_aligned_pointer_as_index
//       CHECK:       scf.if
//       CHECK:         vector.from_elements {{.*}} : vector<8xbf16>
//       CHECK:         vector.store %{{.*}} {alignment = 16 : i64} : memref<?x512xbf16>, vector<8xbf16>
//       CHECK:       } else {
// CHECK-COUNT-8:       memref.store %{{.*}} : memref<?x512xbf16>
//       CHECK:     gpu.return
func.func @nt(%a: memref<?x256xbf16>, %b: memref<512x256xbf16>, %r: memref<?xf32>, %y: memref<?x512xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x256xbf16>, memref<512x256xbf16>
      epilogue(%acc, row %rv = %r : memref<?xf32>) outs(%y : memref<?x512xbf16>) {
    %s = arith.mulf %acc, %rv : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// rhs K x N is loaded in 64-column chunks (each a 64 x 64 box) and read
// MN-major (row layout); f16 operands.

// CHECK-LABEL: func.func @nn
//       CHECK:   nvgpu.tma.create.descriptor %{{.*}} box[%c64{{.*}}, %c64{{.*}}] : memref<*xf16> -> <tensor = memref<64x64xf16, #gpu.address_space<workgroup>>
//       CHECK: gpu.func @nn_gemm0
//  CHECK-SAME:   transpose_b = false
//       CHECK:   nvgpu.tma.async.load {{.*}} -> memref<128x64xf16, #gpu.address_space<workgroup>>
//       CHECK:   nvgpu.tma.async.load {{.*}} -> memref<64x64xf16, #gpu.address_space<workgroup>>
//       CHECK:   nvgpu.tma.async.load {{.*}} -> memref<64x64xf16, #gpu.address_space<workgroup>>
//       CHECK:   nvvm.wgmma.mma_async {{.*}}A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
func.func @nn(%a: memref<?x?xf16>, %b: memref<?x?xf16>, %y: memref<?x?xf32>) {
  coda.gemm %a, %b : memref<?x?xf16>, memref<?x?xf16>
      epilogue(%acc) outs(%y : memref<?x?xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

// A row reduction's tile sets tile N; above 128 columns tile M halves so that
// the accumulator fits one warpgroup's registers.

// CHECK-LABEL: gpu.func @wide_gemm0
//  CHECK-SAME:   tile = [64, 256, 64]
//       CHECK:   nvvm.wgmma.mma_async {{.*}}<m = 64, n = 256, k = 16>
func.func @wide(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>, %p: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y, %p : memref<?x?xbf16>, memref<?x?xf32>) {
    %m = coda.row_reduce max %acc tile 256 : f32
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t, %m : bf16, !coda.partial<f32>
  }
  return
}
