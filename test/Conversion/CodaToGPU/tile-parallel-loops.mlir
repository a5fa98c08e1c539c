// RUN: coda-opt %s --coda-tile-parallel-loops --canonicalize --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-tile-parallel-loops --gpu-map-parallel-loops --convert-parallel-loops-to-gpu --canonicalize --split-input-file | FileCheck %s --check-prefix=LAUNCH
// RUN: not coda-opt %s --coda-tile-parallel-loops=tile-size=0 --split-input-file 2>&1 | FileCheck %s --check-prefix=INVALID

// A weight scaled by gamma, rows x columns, row-major: the columns (the
// innermost dimension) are tiled by 128, the rows by 1, so that a block's
// 128 threads walk one row's consecutive columns.
// CHECK-LABEL: func @scale_columns
// (Canonicalized, the tile's unit row loop merges into the outer loop.)
// CHECK: scf.parallel (%{{.+}}, %{{.+}}, %{{.+}}) = (%c0, %c0, %c0) to (%c2048, %c4096, %c128) step (%c1, %c128, %c1)
// LAUNCH-LABEL: func @scale_columns
// LAUNCH: gpu.launch blocks({{.*}}) in ({{.*}} = %c2048, {{.*}} = %c32, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1)
func.func @scale_columns(%w: memref<2048x4096xbf16>, %g: memref<4096xbf16>, %o: memref<2048x4096xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = arith.constant 2048 : index
  %cols = arith.constant 4096 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%rows, %cols) step (%c1, %c1) {
    %a = memref.load %w[%i, %j] : memref<2048x4096xbf16>
    %b = memref.load %g[%j] : memref<4096xbf16>
    %p = arith.mulf %a, %b : bf16
    memref.store %p, %o[%i, %j] : memref<2048x4096xbf16>
    scf.reduce
  }
  return
}

// -----

// A [T, 1] column: its one column is not tiled; its rows are.
// CHECK-LABEL: func @column
// CHECK: scf.parallel (%{{.+}}, %{{.+}}) = (%c0, %c0) to (%c1000, %c128) step (%c128, %c1)
// LAUNCH-LABEL: func @column
// LAUNCH: gpu.launch blocks({{.*}}) in ({{.*}} = %c8, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1)
func.func @column(%o: memref<1000x1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = arith.constant 1000 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%rows, %c1) step (%c1, %c1) {
    memref.store %zero, %o[%i, %j] : memref<1000x1xf32>
    scf.reduce
  }
  return
}

// -----

// Three parallel dimensions (an elementwise scale over tokens x heads x
// 128): the tile's 128 iterations map to the threads along x, never along z
// (which takes at most 64).
// LAUNCH-LABEL: func @scale_heads
// LAUNCH: gpu.launch blocks({{.*}}) in ({{.*}} = %c512, {{.*}} = %c8, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c128, {{.*}} = %c1, {{.*}} = %c1)
func.func @scale_heads(%x: memref<512x8x128xf32>, %s: memref<512x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c128 = arith.constant 128 : index
  %c512 = arith.constant 512 : index
  scf.parallel (%t, %h, %d) = (%c0, %c0, %c0) to (%c512, %c8, %c128) step (%c1, %c1, %c1) {
    %v = memref.load %x[%t, %h, %d] : memref<512x8x128xf32>
    %w = memref.load %s[%t, %h] : memref<512x8xf32>
    %p = arith.mulf %v, %w : f32
    memref.store %p, %x[%t, %h, %d] : memref<512x8x128xf32>
    scf.reduce
  }
  return
}

// -----

// INVALID: tile-size must be positive, got 0
func.func @any() {
  return
}
