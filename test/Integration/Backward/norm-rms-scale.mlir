// RUN: coda-opt %s --coda-derive-backward="function=forward name=backward tile=4" --coda-derive-backward="function=forward_plain name=backward_plain tile=4" | sed -e '/^module {$/d' -e '/^}$/d' > %t.derived.mlir
// RUN: cat %t.derived.mlir %S/Inputs/norm-rms-scale-check.mlir | %differential | %cpu-runner | FileCheck %s
// RUN: FileCheck %s --check-prefix=DERIVED < %t.derived.mlir

// A row scale declared the RMSNorm row scale of x (coda.rms_scale_of): rs =
// rsqrt(mean(x^2) + eps), computed by the caller from sums of squares
// another GEMM emitted. The derivative through rs joins x's gradient,
// dx += x drs rs^3 (-1 / H), inside the GEMM forming dx (after rs's last
// use: its gradient is complete), and rs gets no gradient of its own. The
// Llama MLP of norm-mlp-saved.mlir, checked against the derivation without
// the attribute (dx, drs, dWgu, dWd) plus that term written out.
// Gradients: dx, dWgu, dWd.

// CHECK-COUNT-3: coda-check ok

// dx = dAcc Wgu + the residual's gradient + x drs rs^3 k, k = -1 / 8.
// DERIVED-LABEL: func.func @backward(
//  DERIVED-SAME:   %[[X:[^:]*]]: tensor<7x8xf32>, %[[RS:[^:]*]]: tensor<7xf32>,
//  DERIVED-SAME:   -> (tensor<7x8xf32>, tensor<10x8xf32>, tensor<8x5xf32>)
//       DERIVED:   %[[K:.*]] = arith.constant -1.250000e-01 : f32
//       DERIVED:   %[[DRS:.*]] = coda.reduce_partials sum row
//       DERIVED:   coda.gemm
//  DERIVED-NEXT:     epilogue(%[[ACC:[a-z0-9_]+]], tile %{{[a-z0-9_]+}} = %{{[^ ]+}} : tensor<7x8xf32>, tile %[[XV:[a-z0-9_]+]] = %[[X]] : tensor<7x8xf32>, row %[[DV:[a-z0-9_]+]] = %[[DRS]] : tensor<7xf32>, row %[[RV:[a-z0-9_]+]] = %[[RS]] : tensor<7xf32>, scalar %[[KV:[a-z0-9_]+]] = %[[K]] : f32)
//  DERIVED-NEXT:     outs({{.*}}coda.role = "grad:gemm0.lhs"
//       DERIVED:     %[[R2:.*]] = arith.mulf %[[RV]], %[[RV]]
//       DERIVED:     %[[R3:.*]] = arith.mulf %[[R2]], %[[RV]]
//       DERIVED:     %[[DK:.*]] = arith.mulf %[[DV]], %[[KV]]
//       DERIVED:     %[[C:.*]] = arith.mulf %[[DK]], %[[R3]]
//       DERIVED:     %[[T:.*]] = arith.mulf %[[XV]], %[[C]]
//       DERIVED:     arith.addf %{{.*}}, %[[T]]
//       DERIVED:   return
// DERIVED-LABEL: func.func @backward_plain(

func.func @forward(%x: tensor<7x8xf32>, %rs: tensor<7xf32> {coda.rms_scale_of = 0 : i64}, %wgu: tensor<10x8xf32>,
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

// The same forward without the attribute: rs differentiated as an input.
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
