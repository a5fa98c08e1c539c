// RUN: coda-opt %s --coda-to-gpu | FileCheck %s

// A `pair` input (the gradient of a pair output, M x N/2) is read once per
// column pair, at pair column blockN / 2 + the thread's pair, clamped to the
// last pair, and both lanes of the pair see that value.
// CHECK-LABEL: gpu.func @pair_input_gemm0
//  CHECK-SAME:   role = "pair"
//       CHECK:   %[[HALF:.*]] = arith.divui %arg3, %c2{{.*}} : index
//       CHECK:   %[[LAST:.*]] = arith.subi %[[HALF]], %c1
//       CHECK:   %[[BASE:.*]] = arith.divui %{{.*}}, %c2
//       CHECK:   %[[COL:.*]] = arith.addi %[[BASE]], %{{.*}}
//       CHECK:   %[[CLAMPED:.*]] = arith.minui %[[COL]], %[[LAST]]
//       CHECK:   memref.load %arg5[%{{.*}}, %[[CLAMPED]]] : memref<?x?xf32>
// Four pairs per thread at 8 columns per thread.
// CHECK-COUNT-3:   memref.load %arg5[
func.func @pair_input(%a: memref<?x?xbf16>, %b: memref<?x?xbf16>, %g: memref<?x?xf32>, %y: memref<?x?xbf16>) {
  coda.gemm %a, %b transpose_b : memref<?x?xbf16>, memref<?x?xbf16>
      epilogue(%acc, pair %gv = %g : memref<?x?xf32>) outs(%y : memref<?x?xbf16>) {
    %m = coda.pair_map (%x0, %x1) = %acc, (%g0, %g1) = %gv : f32, f32 -> f32 {
      %a0 = arith.mulf %x0, %g0 : f32
      %a1 = arith.mulf %x1, %g1 : f32
      coda.yield %a0, %a1 : f32, f32
    }
    %t = arith.truncf %m : f32 to bf16
    coda.yield %t : bf16
  }
  return
}
