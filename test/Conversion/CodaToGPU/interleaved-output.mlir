// RUN: coda-opt %s --coda-to-gpu | FileCheck %s

// An interleaved output (M x 2N) is written per run of a thread's columns
// [c, c + r) at columns [2c, 2c + 2r), even then odd value per column, with
// 2N as the column limit.
// CHECK-LABEL: gpu.func @interleaved_gemm0
//  CHECK-SAME:   role = "interleaved"
// A run is 8 columns: one 16-element store at column 2c when it is whole
// (2c + 16 <= 2N) and aligned.
//       CHECK:   %[[LIMIT:.*]] = arith.muli %arg3, %c2{{.*}} : index
//       CHECK:   %[[COL:.*]] = arith.muli %{{.*}}, %c2{{.*}} : index
//       CHECK:   %[[END:.*]] = arith.addi %[[COL]], %c16{{.*}} : index
//       CHECK:   arith.cmpi ule, %[[END]], %[[LIMIT]] : index
//       CHECK:   %[[V:.*]] = vector.from_elements {{([^,]+, ){15}[^,]+}} : vector<16xbf16>
//       CHECK:   vector.store %[[V]], %arg5[%{{.*}}, %[[COL]]]
func.func @interleaved(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc) outs(%y : memref<?x?xbf16>) {
    %two = arith.constant 2.0 : f32
    %d = arith.mulf %acc, %two : f32
    %e = arith.truncf %acc : f32 to bf16
    %o = arith.truncf %d : f32 to bf16
    %both = coda.interleave %e, %o : bf16
    coda.yield %both : !coda.interleaved<bf16>
  }
  return
}
