// RUN: coda-opt %s --coda-derive-backward="function=forward name=backward tile=4 save=1" --coda-derive-backward="function=forward_plain name=backward_plain tile=4" | sed -e '/^module {$/d' -e '/^}$/d' > %t.derived.mlir
// RUN: cat %t.derived.mlir %S/Inputs/norm-mlp-saved-step.mlir | %differential | %cpu-runner | FileCheck %s
// RUN: FileCheck %s --check-prefix=SAVED < %t.derived.mlir

// A Llama MLP with its RMSNorm deferred and its residual: the gate/up GEMM
// reads the un-normalized residual stream x and scales its accumulator by
// the norm's row scale rs inside the SwiGLU contraction (gamma is folded
// into Wgu); the down GEMM adds the residual x and emits the row sums of
// squares of its result for the next norm. With save=1 nothing is
// recomputed: the down GEMM's adjoint reads its saved output z in place of
// h Wd^T + x (the sums of squares' derivative 2 z dss needs nothing else),
// so it reads no product; the GEMM producing dh = dAcc Wd evaluates the
// SwiGLU derivative from the saved gate / up accumulators and the row
// scale's gradient as row partials. Checked against the recomputing
// derivation (save=0) of the same forward, itself checked against textbook
// gradients by rmsnorm-deferred.mlir and mlp-residual.mlir.
// Gradients: dx, drs, dWgu, dWd.

// CHECK-COUNT-4: coda-check ok

// Five GEMMs: the down GEMM's adjoint (its epilogue alone: the saved z, dz
// and dss), dh with the SwiGLU and row-scale derivatives, dx, dWgu, dWd.
// SAVED-LABEL: func.func @backward(
// SAVED-COUNT-5: coda.gemm
// SAVED-NOT: coda.gemm
// SAVED: return
// SAVED-LABEL: func.func @backward_plain(

func.func @forward(%x: tensor<7x8xf32>, %rs: tensor<7xf32>, %wgu: tensor<10x8xf32>,
                   %wd: tensor<8x5xf32>) -> (tensor<7x8xf32>, tensor<7xf32>) {
  %hE = tensor.empty() : tensor<7x5xf32>
  %h = coda.gemm %x, %wgu transpose_b : tensor<7x8xf32>, tensor<10x8xf32>
      epilogue(%acc, row %r = %rs : tensor<7xf32>) outs(%hE : tensor<7x5xf32>) {
    %p = coda.pair_contract (%ga, %ua) = %acc, (%r0, %r1) = %r : f32, f32 -> !coda.pair<f32> {
      %one = arith.constant 1.0 : f32
      %g = arith.mulf %ga, %r0 : f32
      %u = arith.mulf %ua, %r1 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      coda.yield %y : f32
    }
    coda.yield %p : !coda.pair<f32>
  }
  %zE = tensor.empty() : tensor<7x8xf32>
  %pE = tensor.empty() : tensor<7x2xf32>
  %sE = tensor.empty() : tensor<7xf32>
  %z, %pz = coda.gemm %h, %wd transpose_b : tensor<7x5xf32>, tensor<8x5xf32>
      epilogue(%acc, tile %xv = %x : tensor<7x8xf32>) outs(%zE, %pE : tensor<7x8xf32>, tensor<7x2xf32>) {
    %v = arith.addf %acc, %xv : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 4 : f32
    coda.yield %v, %part : f32, !coda.partial<f32>
  }
  %ss = coda.reduce_partials sum row %pz : tensor<7x2xf32> outs(%sE : tensor<7xf32>)
  return %z, %ss : tensor<7x8xf32>, tensor<7xf32>
}

// The same forward, derived without saving.
func.func @forward_plain(%x: tensor<7x8xf32>, %rs: tensor<7xf32>, %wgu: tensor<10x8xf32>,
                         %wd: tensor<8x5xf32>) -> (tensor<7x8xf32>, tensor<7xf32>) {
  %hE = tensor.empty() : tensor<7x5xf32>
  %h = coda.gemm %x, %wgu transpose_b : tensor<7x8xf32>, tensor<10x8xf32>
      epilogue(%acc, row %r = %rs : tensor<7xf32>) outs(%hE : tensor<7x5xf32>) {
    %p = coda.pair_contract (%ga, %ua) = %acc, (%r0, %r1) = %r : f32, f32 -> !coda.pair<f32> {
      %one = arith.constant 1.0 : f32
      %g = arith.mulf %ga, %r0 : f32
      %u = arith.mulf %ua, %r1 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      coda.yield %y : f32
    }
    coda.yield %p : !coda.pair<f32>
  }
  %zE = tensor.empty() : tensor<7x8xf32>
  %pE = tensor.empty() : tensor<7x2xf32>
  %sE = tensor.empty() : tensor<7xf32>
  %z, %pz = coda.gemm %h, %wd transpose_b : tensor<7x5xf32>, tensor<8x5xf32>
      epilogue(%acc, tile %xv = %x : tensor<7x8xf32>) outs(%zE, %pE : tensor<7x8xf32>, tensor<7x2xf32>) {
    %v = arith.addf %acc, %xv : f32
    %sq = arith.mulf %v, %v : f32
    %part = coda.row_reduce sum %sq tile 4 : f32
    coda.yield %v, %part : f32, !coda.partial<f32>
  }
  %ss = coda.reduce_partials sum row %pz : tensor<7x2xf32> outs(%sE : tensor<7xf32>)
  return %z, %ss : tensor<7x8xf32>, tensor<7xf32>
}
