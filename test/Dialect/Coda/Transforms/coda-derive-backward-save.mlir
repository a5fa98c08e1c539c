// RUN: coda-opt %s --coda-derive-backward="save=1" | FileCheck %s

// save=1 on a SwiGLU MLP: the forward returns z, then h and the gate and up
// columns of its first accumulator (bf16); the backward takes them after the
// arguments and is four GEMMs: dz Wd with the SwiGLU derivative in its
// epilogue writing dgate / dup interleaved, then dx, dWgu and dWd. Neither
// forward GEMM is recomputed.

// CHECK-LABEL: func.func @mlp(
//  CHECK-SAME:   -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>)
//       CHECK:   %[[H:.*]]:3 = coda.gemm %arg0, %arg1 transpose_b
//       CHECK:     coda.pair_contract
//       CHECK:     %[[G:.*]] = coda.pair_contract (%[[G0:.*]], %[[G1:.*]]) = %{{.*}} : f32 -> !coda.pair<bf16> {
//  CHECK-NEXT:       %[[GB:.*]] = arith.truncf %[[G0]] : f32 to bf16
//  CHECK-NEXT:       coda.yield %[[GB]] : bf16
//       CHECK:     %[[U:.*]] = coda.pair_contract (%[[U0:.*]], %[[U1:.*]]) = %{{.*}} : f32 -> !coda.pair<bf16> {
//  CHECK-NEXT:       %[[UB:.*]] = arith.truncf %[[U1]] : f32 to bf16
//  CHECK-NEXT:       coda.yield %[[UB]] : bf16
//       CHECK:   %[[Z:.*]] = coda.gemm %[[H]]#0, %arg2 transpose_b
//       CHECK:   return %[[Z]], %[[H]]#0, %[[H]]#1, %[[H]]#2

// CHECK-LABEL: func.func @mlp_backward(
//  CHECK-SAME:   %[[X:[^:]*]]: tensor<?x?xbf16>, %[[WGU:[^:]*]]: tensor<?x?xbf16>, %[[WD:[^:]*]]: tensor<?x?xbf16>,
//  CHECK-SAME:   %[[SH:[^:]*]]: tensor<?x?xbf16>, %[[SG:[^:]*]]: tensor<?x?xbf16>, %[[SU:[^:]*]]: tensor<?x?xbf16>,
//  CHECK-SAME:   %[[DZ:[^:]*]]: tensor<?x?xbf16>)
//   CHECK-NOT:   coda.gemm %[[X]], %[[WGU]]
//       CHECK:   %[[DACC:.*]] = coda.gemm %[[DZ]], %[[WD]] :
//  CHECK-NEXT:     epilogue(%[[DH:[^,]*]], tile %[[GV:.*]] = %[[SG]] : tensor<?x?xbf16>, tile %[[UV:.*]] = %[[SU]] : tensor<?x?xbf16>)
//       CHECK:     math.exp
//       CHECK:     %[[BOTH:.*]] = coda.interleave %{{.*}}, %{{.*}} : bf16
//  CHECK-NEXT:     coda.yield %[[BOTH]] : !coda.interleaved<bf16>
//       CHECK:   %[[DX:.*]] = coda.gemm %[[DACC]], %[[WGU]] :
//       CHECK:   %[[DWGU:.*]] = coda.gemm %[[DACC]], %[[X]] transpose_a :
//       CHECK:   %[[DWD:.*]] = coda.gemm %[[DZ]], %[[SH]] transpose_a :
//   CHECK-NOT:   coda.gemm
//       CHECK:   return %[[DX]], %[[DWGU]], %[[DWD]]
func.func @mlp(%x: tensor<?x?xbf16>, %wgu: tensor<?x?xbf16>, %wd: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %tokens = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %rows = tensor.dim %wgu, %c0 : tensor<?x?xbf16>
  %hidden = tensor.dim %wd, %c0 : tensor<?x?xbf16>
  %features = arith.divui %rows, %c2 : index
  %out = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %h = coda.gemm %x, %wgu transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%out : tensor<?x?xbf16>) {
    %p = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %d = arith.addf %one, %e : f32
      %silu = arith.divf %g, %d : f32
      %y = arith.mulf %silu, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %p : !coda.pair<bf16>
  }
  %zE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %z = coda.gemm %h, %wd transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%zE : tensor<?x?xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return %z : tensor<?x?xbf16>
}

// An activation whose output is also a result of the function gets its
// gradient from two places: no accumulator is saved for it, its adjoint GEMM
// recomputes the accumulator; h itself is saved.
// CHECK-LABEL: func.func @two_uses(
//  CHECK-SAME:   -> (tensor<8x16xf32>, tensor<8x6xf32>)
//       CHECK:   coda.gemm %arg0, %arg1 : tensor<8x4xf32>, tensor<4x6xf32>
//  CHECK-NEXT:     epilogue(%{{.*}})
//  CHECK-NEXT:     outs(%{{.*}} : tensor<8x6xf32>)
// CHECK-LABEL: func.func @two_uses_backward(
//  CHECK-SAME:   tensor<8x4xf32>, %{{.*}}: tensor<4x6xf32>, %{{.*}}: tensor<6x16xf32>, %{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<8x6xf32>)
//       CHECK:   coda.gemm %arg0, %arg1 :
func.func @two_uses(%x: tensor<8x4xf32>, %w1: tensor<4x6xf32>, %w2: tensor<6x16xf32>) -> (tensor<8x16xf32>, tensor<8x6xf32>) {
  %hE = tensor.empty() : tensor<8x6xf32>
  %h = coda.gemm %x, %w1 : tensor<8x4xf32>, tensor<4x6xf32> epilogue(%acc) outs(%hE : tensor<8x6xf32>) {
    %t = math.tanh %acc : f32
    coda.yield %t : f32
  }
  %yE = tensor.empty() : tensor<8x16xf32>
  %y = coda.gemm %h, %w2 : tensor<8x6xf32>, tensor<6x16xf32> epilogue(%acc) outs(%yE : tensor<8x16xf32>) {
    coda.yield %acc : f32
  }
  return %y, %h : tensor<8x16xf32>, tensor<8x6xf32>
}
