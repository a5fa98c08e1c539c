// RUN: coda-opt %s --coda-derive-backward --split-input-file | FileCheck %s

// A GEMM whose epilogue only rounds: no adjoint GEMM; dX = dY W (rhs N x K,
// so K x N' without transpose_b), dW = dY^T X (dY read transposed, as
// stored: transpose_a).
// CHECK-LABEL: func.func @plain_backward(
//  CHECK-SAME:   %[[X:.*]]: tensor<8x4xbf16>, %[[W:.*]]: tensor<6x4xbf16>, %[[DY:.*]]: tensor<8x6xbf16>) -> (tensor<8x4xbf16>, tensor<6x4xbf16>)
//   CHECK-NOT:   coda.gemm %[[X]]
//       CHECK:   %[[DX:.*]] = coda.gemm %[[DY]], %[[W]] : tensor<8x6xbf16>, tensor<6x4xbf16>
//       CHECK:     arith.truncf
//   CHECK-NOT:   linalg.transpose
//       CHECK:   %[[DW:.*]] = coda.gemm %[[DY]], %[[X]] transpose_a : tensor<8x6xbf16>, tensor<8x4xbf16>
//       CHECK:   return %[[DX]], %[[DW]]
func.func @plain(%x: tensor<8x4xbf16>, %w: tensor<6x4xbf16>) -> tensor<8x6xbf16> {
  %e = tensor.empty() : tensor<8x6xbf16>
  %y = coda.gemm %x, %w transpose_b : tensor<8x4xbf16>, tensor<6x4xbf16>
      epilogue(%acc) outs(%e : tensor<8x6xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return %y : tensor<8x6xbf16>
}

// -----

// tanh(acc) * s[m] + r: the adjoint GEMM recomputes acc (rhs K x N here),
// reads dY as a tile, and yields dAcc (bf16, the operands' type), r's
// gradient as a tile and s's as row partials (8 columns -> 1 partial of 128),
// finished by coda.reduce_partials. The epsilon-like scalar gets none.
// CHECK-LABEL: func.func @act_backward(
//  CHECK-SAME:   %[[X:.*]]: tensor<8x4xbf16>, %[[W:.*]]: tensor<4x8xbf16>, %[[S:.*]]: tensor<8xf32>, %[[R:.*]]: tensor<8x8xf32>, %[[C:.*]]: f32, %[[DY:.*]]: tensor<8x8xf32>) -> (tensor<8x4xbf16>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8x8xf32>)
//       CHECK:   %[[ADJ:.*]]:3 = coda.gemm %[[X]], %[[W]] : tensor<8x4xbf16>, tensor<4x8xbf16>
//  CHECK-NEXT:     epilogue(%{{.*}}, scalar %{{.*}} = %[[C]] : f32, tile %[[DYV:.*]] = %[[DY]] : tensor<8x8xf32>)
//  CHECK-NEXT:     outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<8x8xbf16>, tensor<8x1xf32>, tensor<8x8xf32>)
//       CHECK:     math.tanh
//       CHECK:     %[[RS:.*]] = coda.row_reduce sum %{{.*}} tile 128 : f32
//       CHECK:     coda.yield %{{.*}}, %[[RS]], %[[DYV]] : bf16, !coda.partial<f32>, f32
//       CHECK:   %[[DS:.*]] = coda.reduce_partials sum row %[[ADJ]]#1
//       CHECK:   %[[DX:.*]] = coda.gemm %[[ADJ]]#0, %[[W]] transpose_b
//       CHECK:   %[[DW:.*]] = coda.gemm %[[X]], %[[ADJ]]#0 transpose_a : tensor<8x4xbf16>, tensor<8x8xbf16>
//       CHECK:   return %[[DX]], %[[DW]], %[[DS]], %[[ADJ]]#2
func.func @act(%x: tensor<8x4xbf16>, %w: tensor<4x8xbf16>, %s: tensor<8xf32>, %r: tensor<8x8xf32>, %c: f32) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<8x8xf32>
  %y = coda.gemm %x, %w : tensor<8x4xbf16>, tensor<4x8xbf16>
      epilogue(%acc, row %sv = %s : tensor<8xf32>, tile %rv = %r : tensor<8x8xf32>, scalar %cv = %c : f32)
      outs(%e : tensor<8x8xf32>) {
    %a = arith.mulf %acc, %cv : f32
    %t = math.tanh %a : f32
    %m = arith.mulf %t, %sv : f32
    %o = arith.addf %m, %rv : f32
    coda.yield %o : f32
  }
  return %y : tensor<8x8xf32>
}

// -----

// A value used twice gets the sum of its gradients: the second dX GEMM adds
// the first one's result in its epilogue. An argument nothing reads gets
// zeros. exp's rule gives 0 where the gradient is 0 (no 0 * inf when exp
// overflows).
// CHECK-LABEL: func.func @shared_backward(
//       CHECK:     %[[E:.*]] = math.exp
//       CHECK:     %[[Z:.*]] = arith.cmpf oeq, %[[G:.*]], %[[ZERO0:.*]] : f32
//       CHECK:     %[[P:.*]] = arith.mulf %[[G]], %[[E]] : f32
//       CHECK:     arith.select %[[Z]], %[[ZERO0]], %[[P]] : f32
//       CHECK:   %[[DXB:.*]] = coda.gemm %{{.*}}, %{{.*}} : tensor<8x6xf32>, tensor<6x4xf32>
//       CHECK:   coda.gemm %{{.*}}, %{{.*}} : tensor<8x6xf32>, tensor<6x4xf32>
//  CHECK-NEXT:     epilogue(%[[ACC:.*]], tile %[[PREV:.*]] = %[[DXB]] : tensor<8x4xf32>)
//       CHECK:     arith.addf %[[ACC]], %[[PREV]] : f32
//   CHECK-NOT:   linalg.add
//       CHECK:   %[[ZERO:.*]] = linalg.fill
//       CHECK:   return %{{.*}}, %{{.*}}, %{{.*}}, %[[ZERO]]
func.func @shared(%x: tensor<8x4xf32>, %wa: tensor<6x4xf32>, %wb: tensor<6x4xf32>, %unused: tensor<3xf32>)
    -> (tensor<8x6xf32>, tensor<8x6xf32>) {
  %e = tensor.empty() : tensor<8x6xf32>
  %a = coda.gemm %x, %wa transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc) outs(%e : tensor<8x6xf32>) {
    coda.yield %acc : f32
  }
  %b = coda.gemm %x, %wb transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc) outs(%e : tensor<8x6xf32>) {
    %t = math.exp %acc : f32
    coda.yield %t : f32
  }
  return %a, %b : tensor<8x6xf32>, tensor<8x6xf32>
}

// -----

// SwiGLU over interleaved gate/up columns: the adjoint reads the bf16
// gradient per pair and yields dgate, dup through a pair_map. (GPU suite:
// @swiglu_backward_adjoint in test/GPU/cases/primitives.mlir is this
// adjoint GEMM; keep them in step.)
// CHECK-LABEL: func.func @swiglu_backward(
//       CHECK:   coda.gemm
//  CHECK-NEXT:     epilogue(%{{.*}}, pair %{{.*}} = %{{.*}} : tensor<?x?xbf16>)
//       CHECK:     %[[X:.*]] = arith.mulf
//       CHECK:     coda.pair_map (%[[X0:.*]], %[[X1:.*]]) = %[[X]], (%[[G0:.*]], %{{.*}}) = %{{.*}} : f32, bf16 -> f32 {
//       CHECK:       %[[N:.*]] = arith.negf %[[X0]]
//       CHECK:       %[[E:.*]] = math.exp %[[N]]
//       CHECK:       %[[DEN:.*]] = arith.addf %[[E]]
//       CHECK:       %[[SILU:.*]] = arith.divf %[[X0]], %[[DEN]]
//       CHECK:       %[[GF:.*]] = arith.extf %[[G0]]
//       CHECK:       %[[GU:.*]] = arith.mulf %[[GF]], %[[X1]]
//       CHECK:       %[[DUP:.*]] = arith.mulf %[[GF]], %[[SILU]]
//       CHECK:       %[[S:.*]] = arith.divf %[[ONE:.*]], %[[DEN]]
//       CHECK:       %[[C:.*]] = arith.subf %[[ONE]], %[[S]]
//       CHECK:       %[[T:.*]] = math.fma %[[X0]], %[[C]], %[[ONE]]
//       CHECK:       %[[SLOPE:.*]] = arith.mulf %[[T]], %[[S]]
//       CHECK:       %[[DGATE:.*]] = arith.mulf %[[GU]], %[[SLOPE]]
//       CHECK:       coda.yield %[[DGATE]], %[[DUP]] : f32, f32
//       CHECK:     coda.row_reduce sum
func.func @swiglu(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %scale: tensor<?xf32>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %b, %c0 : tensor<?x?xbf16>
  %h2 = arith.divui %n, %c2 : index
  %out = tensor.empty(%m, %h2) : tensor<?x?xbf16>
  %h = coda.gemm %a, %b transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc, row %r = %scale : tensor<?xf32>) outs(%out : tensor<?x?xbf16>) {
    %x = arith.mulf %acc, %r : f32
    %hh = coda.pair_contract (%g, %u) = %x : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %d = arith.addf %one, %e : f32
      %sg = arith.divf %g, %d : f32
      %y = arith.mulf %sg, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %hh : !coda.pair<bf16>
  }
  return %h : tensor<?x?xbf16>
}

// -----

// A column input that only decides a select (a per-column flag) has no
// gradient: the adjoint GEMM yields dAcc alone, and the flag's gradient is
// zeros.
// CHECK-LABEL: func.func @flag_backward(
//       CHECK:   %[[ADJ:.*]] = coda.gemm
//  CHECK-NEXT:     epilogue(%{{.*}}, col %{{.*}}, tile %{{.*}})
//  CHECK-NEXT:     outs(%{{.*}} : tensor<8x6xf32>)
//   CHECK-NOT:     coda.col_reduce
//       CHECK:   %[[ZERO:.*]] = linalg.fill
//       CHECK:   return %{{.*}}, %{{.*}}, %[[ZERO]]
func.func @flag(%x: tensor<8x4xf32>, %w: tensor<6x4xf32>, %f: tensor<6xf32>) -> tensor<8x6xf32> {
  %e = tensor.empty() : tensor<8x6xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc, col %fv = %f : tensor<6xf32>) outs(%e : tensor<8x6xf32>) {
    %half = arith.constant 0.5 : f32
    %on = arith.cmpf ogt, %fv, %half : f32
    %t = math.tanh %acc : f32
    %o = arith.select %on, %t, %acc : f32
    coda.yield %o : f32
  }
  return %y : tensor<8x6xf32>
}

// -----

// A bf16 column input (a bias): its gradient is reduced as f32 column
// partials, finished into f32 and rounded to the input's type for the
// function's result.
// CHECK-LABEL: func.func @bias_backward(
//  CHECK-SAME:   -> (tensor<8x4xbf16>, tensor<6x4xbf16>, tensor<6xbf16>)
//       CHECK:   coda.col_reduce sum
//       CHECK:   %[[DB:.*]] = coda.reduce_partials sum col %{{.*}} : tensor<1x6xf32> outs(%{{.*}} : tensor<6xf32>)
//       CHECK:   %[[ROUNDED:.*]] = linalg.generic
//  CHECK-SAME:     ins(%[[DB]] : tensor<6xf32>) outs(%{{.*}} : tensor<6xbf16>)
//       CHECK:     arith.truncf %{{.*}} : f32 to bf16
//       CHECK:   return %{{.*}}, %{{.*}}, %[[ROUNDED]]
func.func @bias(%x: tensor<8x4xbf16>, %w: tensor<6x4xbf16>, %b: tensor<6xbf16>) -> tensor<8x6xbf16> {
  %e = tensor.empty() : tensor<8x6xbf16>
  %y = coda.gemm %x, %w transpose_b : tensor<8x4xbf16>, tensor<6x4xbf16>
      epilogue(%acc, col %bv = %b : tensor<6xbf16>) outs(%e : tensor<8x6xbf16>) {
    %bf = arith.extf %bv : bf16 to f32
    %s = arith.addf %acc, %bf : f32
    %t = math.tanh %s : f32
    %o = arith.truncf %t : f32 to bf16
    coda.yield %o : bf16
  }
  return %y : tensor<8x6xbf16>
}

// -----

// silu(x) = x / (1 + exp(-x)) takes its closed derivative
// s (1 + x (1 - s)), s = 1 / (1 + exp(-x)); an op that allows approximate
// functions passes `afn` to the arithmetic of its rule (in GPU kernels
// approximate divisions: --coda-fast-math-to-nvvm); other flags stay with
// the forward op.
// CHECK-LABEL: func.func @silu_approx_backward
//       CHECK:   epilogue(%[[X:[^,]*]], tile %[[G:[^ ]*]] =
//       CHECK:   %[[ONE:.*]] = arith.constant 1.0
//       CHECK:   %[[N:.*]] = arith.negf %[[X]] : f32
//       CHECK:   %[[EXP:.*]] = math.exp %[[N]] fastmath<afn> : f32
//       CHECK:   %[[DEN:.*]] = arith.addf %[[EXP]], %[[ONE]] : f32
//       CHECK:   %[[GF:.*]] = arith.extf %[[G]] : bf16 to f32
//       CHECK:   %[[S:.*]] = arith.divf %[[ONE]], %[[DEN]] fastmath<afn> : f32
//       CHECK:   %[[C:.*]] = arith.subf %[[ONE]], %[[S]] fastmath<afn> : f32
//       CHECK:   %[[T:.*]] = math.fma %[[X]], %[[C]], %[[ONE]] fastmath<afn> : f32
//       CHECK:   %[[SLOPE:.*]] = arith.mulf %[[T]], %[[S]] fastmath<afn> : f32
//       CHECK:   %[[DX:.*]] = arith.mulf %[[GF]], %[[SLOPE]] fastmath<afn> : f32
//       CHECK:   arith.truncf %[[DX]] : f32 to bf16
//   CHECK-NOT:   coda.yield
//   CHECK-NOT:   math.exp
//       CHECK:   coda.yield
func.func @silu_approx(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %e = tensor.empty(%m, %n) : tensor<?x?xbf16>
  %y = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%e : tensor<?x?xbf16>) {
    %one = arith.constant 1.0 : f32
    %neg = arith.negf %acc : f32
    %ex = math.exp %neg fastmath<afn> : f32
    %den = arith.addf %ex, %one : f32
    %s = arith.divf %acc, %den fastmath<arcp,afn> : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  return %y : tensor<?x?xbf16>
}

// -----

// Any other quotient takes the quotient rule, its arithmetic with the
// division's `afn`; a denominator used beside silu's division still passes
// its own gradient on through exp (the guarded product with exp(-x)).
// CHECK-LABEL: func.func @quotient_approx_backward
//       CHECK:   %[[EXP:.*]] = math.exp %{{.*}} fastmath<afn> : f32
//       CHECK:   %[[DEN:.*]] = arith.addf %[[EXP]]
//       CHECK:   %[[Y:.*]] = arith.divf %{{.*}}, %[[DEN]] fastmath<arcp,afn> : f32
//       CHECK:   arith.divf %{{.*}}, %[[DEN]] fastmath<afn> : f32
//       CHECK:   %[[P:.*]] = arith.mulf %{{.*}}, %[[Y]] fastmath<afn> : f32
//       CHECK:   arith.divf %[[P]], %[[DEN]] fastmath<afn> : f32
//       CHECK:   arith.mulf %{{.*}}, %[[EXP]] fastmath<afn> : f32
// CHECK-LABEL: func.func @shared_denominator_backward
//       CHECK:   math.fma
//       CHECK:   %[[Z:.*]] = arith.cmpf oeq
//       CHECK:   arith.select %[[Z]]
func.func @quotient_approx(%x: tensor<?x?xbf16>, %w: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x?xbf16>
  %n = tensor.dim %w, %c0 : tensor<?x?xbf16>
  %e = tensor.empty(%m, %n) : tensor<?x?xbf16>
  %y = coda.gemm %x, %w transpose_b : tensor<?x?xbf16>, tensor<?x?xbf16>
      epilogue(%acc) outs(%e : tensor<?x?xbf16>) {
    %two = arith.constant 2.0 : f32
    %neg = arith.negf %acc : f32
    %ex = math.exp %neg fastmath<afn> : f32
    %den = arith.addf %ex, %two : f32
    %s = arith.divf %acc, %den fastmath<arcp,afn> : f32
    %t = arith.truncf %s : f32 to bf16
    coda.yield %t : bf16
  }
  return %y : tensor<?x?xbf16>
}
func.func @shared_denominator(%x: tensor<?x?xf32>, %w: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x?xf32>
  %n = tensor.dim %w, %c0 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<?x?xf32>, tensor<?x?xf32>
      epilogue(%acc) outs(%e : tensor<?x?xf32>) {
    %one = arith.constant 1.0 : f32
    %neg = arith.negf %acc : f32
    %ex = math.exp %neg : f32
    %den = arith.addf %one, %ex : f32
    %s = arith.divf %acc, %den : f32
    %t = arith.addf %s, %den : f32
    coda.yield %t : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

// A log-sum-exp's summands get the gradient times their softmax weight
// exp(v - lse), an exponential that allows approximation as the forward's
// does on the GPU.
// CHECK-LABEL: func.func @logsumexp_backward
//       CHECK:   coda.gemm
//       CHECK:     epilogue(%[[ACC:[^,]*]], {{.*}}row %[[LSE:[^ ]*]] =
//       CHECK:     %[[D:.*]] = arith.subf %[[ACC]], %[[LSE]] : f32
//       CHECK:     %[[W:.*]] = math.exp %[[D]] fastmath<afn> : f32
//       CHECK:     arith.mulf %{{.*}}, %[[W]] : f32
func.func @logsumexp(%x: tensor<8x4xf32>, %w: tensor<256x4xf32>) -> tensor<8xf32> {
  %pE = tensor.empty() : tensor<8x2xf32>
  %vE = tensor.empty() : tensor<8xf32>
  %lp = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<256x4xf32>
      epilogue(%acc) outs(%pE : tensor<8x2xf32>) {
    %l = coda.row_reduce logsumexp %acc tile 128 : f32
    coda.yield %l : !coda.partial<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<8x2xf32> outs(%vE : tensor<8xf32>)
  return %lse : tensor<8xf32>
}
