// RUN: coda-opt %s --coda-to-gpu="schedule=cooperative" --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-to-gpu="schedule=cooperative" --split-input-file | FileCheck %s --check-prefix=PARTIALS
// RUN: coda-opt %s --coda-to-gpu="schedule=cooperative" --split-input-file | FileCheck %s --check-prefix=INTERIOR
// RUN: coda-opt %s --coda-to-gpu="schedule=cooperative" --split-input-file | FileCheck %s --check-prefix=PERIOD

// Cooperative kernel: persistent CTAs of 384 threads with launch bounds (so
// that ptxas honours setmaxnreg); warpgroup 0 branches to a block of its own
// that gives registers up and streams every tile's k-tiles, the consumers'
// block takes them, runs the K loop (the first WGMMA of a tile writes its
// accumulators without reading them) and the epilogue straight from the
// fragments: no shared-memory accumulator tile, only the 4-slot ring and,
// beside it, each consumer warp's staging buffer of 8 rows x 256 bf16
// (196608 + 8 x 4224 bytes + 1024 of alignment slack). In edge tiles a
// warp's lanes write their column pairs of 8 rows into it, then every lane
// stores 16 bytes of one row at a time.

// CHECK-LABEL: func.func @plain
//       CHECK:   %[[GRID:.*]] = arith.minui %{{.*}}, %c132
//       CHECK:   gpu.launch_func  @coda_kernels::@plain_gemm0 blocks in (%[[GRID]], %c1{{.*}}, %c1{{.*}}) threads in (%c384{{.*}}, %{{.*}}, %{{.*}})  dynamic_shared_memory_size %c231424_i32
//       CHECK: gpu.func @plain_gemm0
//  CHECK-SAME:   persistent = true, schedule = "cooperative", shared_memory_bytes = 231424 : i64, stages = 4 : i64, tile = [128, 256, 64]
//  CHECK-SAME:   nvvm.maxntid = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32
//       CHECK:   cf.cond_br %{{.*}}, ^[[PRODUCER:bb[0-9]+]], ^[[CONSUMER:bb[0-9]+]]
//       CHECK: ^[[PRODUCER]]:
//       CHECK:   nvvm.setmaxregister  decrease 40
//       CHECK:   scf.for
//       CHECK:     nvgpu.tma.async.load
//       CHECK:   gpu.return
//       CHECK: ^[[CONSUMER]]:
//       CHECK:   nvvm.setmaxregister  increase 232
//       CHECK:   scf.for
//       CHECK:     llvm.inline_asm has_side_effects {{.*}}wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
//       CHECK:     scf.for
//       CHECK:       nvvm.wgmma.mma_async
//       CHECK:     nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:     llvm.extractvalue
//   CHECK-NOT:     memref.load %{{.*}} : memref<128x260xf32
//       CHECK:     vector.store %{{.*}} : memref<2112xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
//       CHECK:     nvvm.bar.warp.sync
//       CHECK:     vector.load %{{.*}} : memref<2112xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
//       CHECK:     vector.store %{{.*}} : memref<?x?xbf16>, vector<8xbf16>
//       CHECK:     nvvm.bar.warp.sync
//       CHECK:   gpu.return
// A tile inside the output whose operands start and step 16-byte aligned
// takes an epilogue with no bounds or alignment test, and leaves through TMA
// stores: per row of each quad, once the stores issued from the warp's
// buffer have read it, 8 stmatrix of 4 chunks each put the warp's 8 rows
// into the buffer in TMA's 128-byte swizzle; after a proxy fence lane 0
// stores its 4 boxes of 8 x 64 (predicated, no branch) and the warp commits
// them as one bulk group. The output's store descriptor is the kernel's
// last parameter. Edge tiles take the checked copy; after its last tile each
// thread waits for its bulk groups.
// INTERIOR-LABEL: gpu.func @plain_gemm0({{.*}}%arg5: memref<?x?xbf16>, %arg6: !llvm.array<16 x i64>)
//  INTERIOR-SAME:   {access = "store", box = [64, 8], dtype = "bf16", {{.*}}name = "output0_tensormap", {{.*}}operand = "output0", shape = [-1, -1], source = 2 : i64
//       INTERIOR:   llvm.store %arg6, %[[OMAP:.*]] : !llvm.array<16 x i64>, !llvm.ptr
//       INTERIOR:   nvvm.wgmma.wait.group.sync.aligned 0
//       INTERIOR:   arith.cmpi ule, %{{.*}}, %arg2 : index
//       INTERIOR:   arith.cmpi ule, %{{.*}}, %arg3 : index
//       INTERIOR:   memref.extract_strided_metadata %arg5
//       INTERIOR:   arith.remui %{{.*}}, %c16
//       INTERIOR:   scf.if %{{.*}} {
//   INTERIOR-NOT:     scf.if
//   INTERIOR-NOT:     vector.store
//       INTERIOR:     nvvm.cp.async.bulk.wait_group 0 {read}
// INTERIOR-COUNT-8:   nvvm.stmatrix {{.*}}layout = #nvvm.mma_layout<row>, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>
//       INTERIOR:     nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
//       INTERIOR:     nvvm.bar.warp.sync
// INTERIOR-COUNT-4:   nvvm.cp.async.bulk.tensor.global.shared.cta %[[OMAP]], {{.*}}, predicate =
//       INTERIOR:     nvvm.cp.async.bulk.commit.group
//   INTERIOR-NOT:     vector.store
//       INTERIOR:     nvvm.cp.async.bulk.wait_group 0 {read}
// INTERIOR-COUNT-8:   nvvm.stmatrix
//       INTERIOR:     nvvm.fence.proxy
// INTERIOR-COUNT-4:   nvvm.cp.async.bulk.tensor.global.shared.cta %[[OMAP]], {{.*}}, predicate =
//       INTERIOR:     nvvm.cp.async.bulk.commit.group
//  INTERIOR-NEXT:   } else {
//       INTERIOR:     arith.cmpi ult
//       INTERIOR:     scf.if
//       INTERIOR:       vector.store %{{.*}} : memref<?x?xbf16>, vector<8xbf16>
//       INTERIOR:     } else {
//       INTERIOR:       scf.for
//       INTERIOR:         memref.load %{{.*}} : memref<2112xbf16, #gpu.address_space<workgroup>>
//       INTERIOR:         memref.store %{{.*}} : memref<?x?xbf16>
//       INTERIOR:   nvvm.cp.async.bulk.wait_group 0{{$}}
//       INTERIOR:   gpu.return
func.func @plain(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// Row partials from fragments: a lane holds parts of both 128-column
// partials of its two rows; the four lanes of a quad combine (xor 1, 2).
// Column partials combine the 8 lanes of a column (xor 4, 8, 16), then the 8
// consumer warps through a scratch beside the ring.
// Without a tile output the epilogue has one copy, the checked one.
// INTERIOR-LABEL: gpu.func @partials_gemm0
//   INTERIOR-NOT:   arith.remui %{{.*}}, %c16
//       INTERIOR:   gpu.return
// PARTIALS-LABEL: gpu.func @partials_gemm0
//       PARTIALS:   gpu.shuffle  xor %{{.*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
//       PARTIALS:   gpu.shuffle  xor %{{.*}}, %c2_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
//   PARTIALS-NOT:   gpu.shuffle  xor %{{.*}}, %c8_i32
//       PARTIALS:   gpu.shuffle  xor %{{.*}}, %c4_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
//       PARTIALS:   gpu.shuffle  xor %{{.*}}, %c8_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
//       PARTIALS:   gpu.shuffle  xor %{{.*}}, %c16_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
//       PARTIALS:   memref.store %{{.*}} : memref<8x256xf32, #gpu.address_space<workgroup>>
//       PARTIALS:   nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
func.func @partials(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %p: memref<?x?xf32>, %c: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%p, %c : memref<?x?xf32>, memref<?x?xf32>) {
    %s = coda.row_reduce sum %acc tile 128 : f32
    %t = coda.col_reduce sum %acc tile 128 : f32
    coda.yield %s, %t : !coda.partial<f32>, !coda.partial<f32>
  }
  return
}

// -----

// A bf16 tile output beside column partials: the staging buffers (32 KB)
// do not fit after the ring and the partials' scratch, so the tile output
// is stored from the fragments (4-byte pairs); an f32 tile output is never
// staged.
// PARTIALS-LABEL: gpu.func @wide_outputs_gemm0
//  PARTIALS-SAME:   shared_memory_bytes = 205824 : i64
//   PARTIALS-NOT:   memref<2112xbf16, #gpu.address_space<workgroup>>
//       PARTIALS:   vector.store %{{.*}} : memref<?x?xbf16>, vector<2xbf16>
//       PARTIALS:   gpu.return
// PARTIALS-LABEL: gpu.func @f32_output_gemm0
//  PARTIALS-SAME:   shared_memory_bytes = 197632 : i64
//   PARTIALS-NOT:   #gpu.address_space<workgroup>>, vector<2xf32>
//       PARTIALS:   vector.store %{{.*}} : memref<?x?xf32>, vector<2xf32>
//       PARTIALS:   gpu.return
func.func @wide_outputs(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>, %c: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y, %c : memref<?x?xbf16>, memref<?x?xf32>) {
    %t = arith.truncf %acc : f32 to bf16
    %s = coda.col_reduce sum %acc tile 128 : f32
    coda.yield %t, %s : bf16, !coda.partial<f32>
  }
  return
}
func.func @f32_output(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

// A 16-bit tile input in an interior tile is loaded straight into the
// fragment layout: the lane's two columns of each 8-column group of each of
// its rows, 64 four-byte loads, issued in the K loop's prologue, four after
// each of the first 16 k-tiles' WGMMAs (not before them: the tensor cores
// would wait while the loads enter the memory pipeline; not all at once:
// they would arrive beside the operand tiles in one burst), those k-tiles
// peeled out of the loop; after the loop the epilogue computes with them
// without a global load or the staging buffer. A tile at the edge enters
// through the buffer: per row of each quad, 8 chunks of 16 bytes into it,
// then each lane reads its 32 pairs as 8 ldmatrix of four 8 x 8 matrices.
// CHECK-LABEL: gpu.func @residual_gemm0
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 1
//   CHECK-NOT:   scf.for
//       CHECK:   %[[P0:.*]]:4 = scf.if %{{.*}} -> (vector<2xbf16>, vector<2xbf16>, vector<2xbf16>, vector<2xbf16>)
// CHECK-COUNT-4:   vector.load %{{.*}} {alignment = 4 : i64} : memref<?x?xbf16>, vector<2xbf16>
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   %[[P1:.*]]:4 = scf.if %{{.*}} -> (vector<2xbf16>,
// CHECK-COUNT-14:   = scf.if %{{.*}} -> (vector<2xbf16>,
//   CHECK-NOT:   = scf.if %{{.*}} -> (vector<2xbf16>
//       CHECK:   scf.for
//       CHECK:   nvvm.wgmma.mma_async
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 0
//       CHECK:   scf.if
//   CHECK-NOT:     memref<?x?xbf16>, vector<
//   CHECK-NOT:     nvgpu.ldmatrix
//       CHECK:     vector.extract %[[P0]]#0[0] : bf16 from vector<2xbf16>
//       CHECK:     vector.extract %[[P0]]#0[1] : bf16 from vector<2xbf16>
//       CHECK:     vector.extract %[[P1]]#0[0] : bf16 from vector<2xbf16>
//       CHECK:     arith.extf %{{.*}} : bf16 to f32
//       CHECK:   } else {
//       CHECK:     nvvm.bar.warp.sync
//   CHECK-NOT:   memref<2112xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK-COUNT-8:   nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<2112xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
//       CHECK:   nvvm.bar.warp.sync
//       CHECK:   arith.extf %{{.*}} : bf16 to f32
//       CHECK:   vector.store %{{.*}} : memref<2112xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
func.func @residual(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %r: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, tile %rv = %r : memref<?x?xbf16>) outs(%y : memref<?x?xbf16>) {
    %rf = arith.extf %rv : bf16 to f32
    %s = arith.addf %acc, %rf : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  return
}

// -----

// A periodic table of static period 128 (RoPE's head dim) in a 256-wide
// tile: lane q's columns 8j + 2q and 8j + 2q + 128 read the same table
// columns, (8j mod 128) + 2q, with no remainder. An interior tile reads each
// of a row's 16 distinct pairs once (two rows per thread: 32 reads, not 64),
// 8-byte vectors; an edge tile reads them element by element.
// PERIOD-LABEL: gpu.func @rope_static_gemm0
//   PERIOD-NOT:   memref<?x128xf32>, vector<2xf32>
// PERIOD-COUNT-32: vector.load %{{.*}} {alignment = 8 : i64} : memref<?x128xf32>, vector<2xf32>
//   PERIOD-NOT:   vector.load %{{.*}} : memref<?x128xf32>
//       PERIOD:   memref.load %{{.*}} : memref<?x128xf32>
//   PERIOD-NOT:   vector.load %{{.*}} : memref<?x128xf32>
//       PERIOD:   gpu.return
func.func @rope_static(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %cos: memref<?x128xf32>,
                       %q: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, periodic %c = %cos : memref<?x128xf32>)
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

// A column input (a bias): its rows (1 KiB per warp) do not fit beside the
// ring, the tile staging buffers and the alignment slack (231424 bytes of
// dynamic shared memory, 96 of static mbarriers, the limit 232448), so they
// are not staged. In an interior tile each lane loads its two columns of the
// tile's first 24 8-column groups into the fragment layout before the K loop
// (48 registers, kColumnPrefetchRegisters), one or two after each of the
// first 16 k-tiles' WGMMAs, and reads global memory for the last 8 groups
// only.
// CHECK-LABEL: func.func @col_bias
//       CHECK:   dynamic_shared_memory_size %c231424_i32
// CHECK-LABEL: gpu.func @col_bias_gemm0
//   CHECK-NOT:   memref<256xf32, #gpu.address_space<workgroup>>
//       CHECK:   %[[B0:.*]] = scf.if %{{.*}} -> (vector<2xf32>) {
//       CHECK:   vector.load %{{.*}} {alignment = 8 : i64} : memref<?xf32>, vector<2xf32>
//       CHECK:   %[[B1:.*]]:2 = scf.if %{{.*}} -> (vector<2xf32>, vector<2xf32>)
// CHECK-COUNT-14:   = scf.if %{{.*}} -> (vector<2xf32>
//   CHECK-NOT:   = scf.if %{{.*}} -> (vector<2xf32>
//       CHECK:   nvvm.wgmma.wait.group.sync.aligned 0
//   CHECK-NOT:   memref<256xf32, #gpu.address_space<workgroup>>
//       CHECK:   scf.if
//   CHECK-NOT:     memref<?xf32>, vector<2xf32>
//       CHECK:     vector.extract %[[B0]][0] : f32 from vector<2xf32>
//   CHECK-NOT:     memref<?xf32>, vector<2xf32>
//       CHECK:     vector.extract %[[B0]][1] : f32 from vector<2xf32>
//   CHECK-NOT:     memref<?xf32>, vector<2xf32>
//       CHECK:     vector.extract %[[B1]]#1[0] : f32 from vector<2xf32>
// CHECK-COUNT-8:   vector.load %{{.*}} {alignment = 8 : i64} : memref<?xf32>, vector<2xf32>
//   CHECK-NOT:   memref<256xf32, #gpu.address_space<workgroup>>
//       CHECK:   gpu.return
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
