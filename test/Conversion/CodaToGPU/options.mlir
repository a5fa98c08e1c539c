// RUN: not coda-opt %s --coda-to-gpu=stages=8 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not coda-opt %s --coda-to-gpu=stages=1 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: coda-opt %s --coda-to-gpu="tile-m=128 tile-n=256 schedule=single" | FileCheck %s --check-prefix=WIDE
// RUN: coda-opt %s --coda-to-gpu="tile-m=128 tile-n=256" | FileCheck %s --check-prefix=WS

// SMEM: error: 'coda.gemm' op kernel needs 394384 bytes of shared memory (at most 232448); use fewer stages or a smaller tile
// STAGES: error: 'coda.gemm' op the TMA ring needs at least 2 stages, got 1
// A 128 x 256 tile would need 256 accumulator registers per thread: tile M
// drops to 64.
// WIDE: tile = [64, 256, 64], transpose_a = false, transpose_b = true, warp_specialized = false
// Warp-specialized, each consumer warpgroup holds 64 rows: the full tile.
// WS: tile = [128, 256, 64], transpose_a = false, transpose_b = true, warp_specialized = true

func.func @f(%a: memref<?x64xbf16>, %b: memref<256x64xbf16>, %y: memref<?x256xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x64xbf16>, memref<256x64xbf16>
      epilogue(%acc) outs(%y : memref<?x256xf32>) {
    coda.yield %acc : f32
  }
  return
}
