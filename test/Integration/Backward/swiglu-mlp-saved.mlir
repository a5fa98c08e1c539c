// RUN: coda-opt %s --coda-derive-backward="function=forward name=backward save=1" | sed -e '/^module {$/d' -e '/^}$/d' > %t.derived.mlir
// RUN: cat %t.derived.mlir %S/Inputs/swiglu-mlp-saved-check.mlir | %differential | %cpu-runner | FileCheck %s

// The MLP's backward with saved accumulators (save=1): the forward also
// returns h and the gate and up columns of the first GEMM's accumulator;
// the GEMM that produces dh = dz Wd computes the SwiGLU derivative in its
// epilogue from them and writes dgate / dup interleaved (dAcc), so the
// backward is four GEMMs and recomputes nothing. Against the textbook
// gradients (Inputs/swiglu-mlp-saved-check.mlir, which runs @forward and
// then @backward as a training step would).
// Gradients: dx, dWgu, dWd.

// CHECK-COUNT-3: coda-check ok

func.func @forward(%x: tensor<12x8xf32>, %wgu: tensor<10x8xf32>, %wd: tensor<6x5xf32>) -> tensor<12x6xf32> {
  %hE = tensor.empty() : tensor<12x5xf32>
  %h = coda.gemm %x, %wgu transpose_b : tensor<12x8xf32>, tensor<10x8xf32>
      epilogue(%acc) outs(%hE : tensor<12x5xf32>) {
    %p = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<f32> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      coda.yield %y : f32
    }
    coda.yield %p : !coda.pair<f32>
  }
  %zE = tensor.empty() : tensor<12x6xf32>
  %z = coda.gemm %h, %wd transpose_b : tensor<12x5xf32>, tensor<6x5xf32>
      epilogue(%acc) outs(%zE : tensor<12x6xf32>) {
    coda.yield %acc : f32
  }
  return %z : tensor<12x6xf32>
}
