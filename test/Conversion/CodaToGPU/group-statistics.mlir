// RUN: coda-opt %s --coda-to-gpu | FileCheck %s --check-prefixes=CHECK,SHARED
// RUN: coda-opt %s --coda-to-gpu=schedule=cooperative | FileCheck %s --check-prefixes=CHECK,FRAGMENTS

// A 1 x 128 group's maximum: each thread combines its slots of the group,
// then a butterfly of shuffles the lanes that hold it (16 lanes of 8
// columns in the shared-tile epilogue, a quad in WGMMA's fragments); the
// group's first lane writes its scale.

// CHECK-LABEL: gpu.func @quantize_gemm0
// SHARED: math.absf
// SHARED: arith.maximumf
// SHARED: gpu.shuffle  xor %{{.*}}, %c8_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
// SHARED: gpu.shuffle  xor %{{.*}}, %c4_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
// SHARED: gpu.shuffle  xor %{{.*}}, %c2_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
// SHARED: gpu.shuffle  xor %{{.*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
// SHARED: arith.divf
// SHARED: scf.if
// SHARED: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xf32>

// FRAGMENTS: gpu.shuffle  xor %{{.*}}, %c1_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
// FRAGMENTS: gpu.shuffle  xor %{{.*}}, %c2_i32{{[_0-9]*}}, %c32_i32{{[_0-9]*}} : f32
// FRAGMENTS: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xf32>
func.func @quantize(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %q: memref<?x?xf8E4M3FN>, %s: memref<?x?xf32>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%q, %s : memref<?x?xf8E4M3FN>, memref<?x?xf32>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %fmax = arith.constant 448.0 : f32
    %scale = arith.divf %amax, %fmax : f32
    %x = arith.divf %acc, %scale : f32
    %code = arith.truncf %x : f32 to f8E4M3FN
    %sv = coda.group_value %scale row group 128 : f32
    coda.yield %code, %sv : f8E4M3FN, !coda.grouped<f32>
  }
  return
}
