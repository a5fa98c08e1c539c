// RUN: %differential %s | %cpu-runner | FileCheck %s

// Elementwise epilogues: column bias, then GELU (tanh), SiLU, ReLU, sigmoid
// and tanh as five tile outputs of one GEMM, against separate linalg ops.

// CHECK-COUNT-5: coda-check ok: 1140 elements

func.func @fused(%a: tensor<30x20xf32>, %b: tensor<20x38xf32>, %bias: tensor<38xf32>,
                 %o0: tensor<30x38xf32>, %o1: tensor<30x38xf32>, %o2: tensor<30x38xf32>,
                 %o3: tensor<30x38xf32>, %o4: tensor<30x38xf32>)
    -> (tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>) {
  %r:5 = coda.gemm %a, %b : tensor<30x20xf32>, tensor<20x38xf32>
      epilogue(%acc, col %c = %bias : tensor<38xf32>)
      outs(%o0, %o1, %o2, %o3, %o4 : tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>) {
    %one = arith.constant 1.0 : f32
    %half = arith.constant 0.5 : f32
    %zero = arith.constant 0.0 : f32
    %k0 = arith.constant 0.7978845608 : f32
    %k1 = arith.constant 0.044715 : f32
    %x = arith.addf %acc, %c : f32
    // gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    %x2 = arith.mulf %x, %x : f32
    %x3 = arith.mulf %x2, %x : f32
    %t0 = arith.mulf %k1, %x3 : f32
    %t1 = arith.addf %x, %t0 : f32
    %t2 = arith.mulf %k0, %t1 : f32
    %t3 = math.tanh %t2 : f32
    %t4 = arith.addf %one, %t3 : f32
    %t5 = arith.mulf %half, %x : f32
    %gelu = arith.mulf %t5, %t4 : f32
    // silu(x) = x * sigmoid(x)
    %nx = arith.negf %x : f32
    %e = math.exp %nx : f32
    %den = arith.addf %one, %e : f32
    %sig = arith.divf %one, %den : f32
    %silu = arith.mulf %x, %sig : f32
    %relu = arith.maximumf %x, %zero : f32
    %tanh = math.tanh %x : f32
    coda.yield %gelu, %silu, %relu, %sig, %tanh : f32, f32, f32, f32, f32
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%a: tensor<30x20xf32>, %b: tensor<20x38xf32>, %bias: tensor<38xf32>)
    -> (tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %c3 = arith.constant 3.0 : f32
  %e = tensor.empty() : tensor<30x38xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<30x20xf32>, tensor<20x38xf32>) outs(%z : tensor<30x38xf32>) -> tensor<30x38xf32>
  %bb = linalg.broadcast ins(%bias : tensor<38xf32>) outs(%e : tensor<30x38xf32>) dimensions = [0]
  %x = linalg.add ins(%mm, %bb : tensor<30x38xf32>, tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  // GELU (tanh form), with x^3 through powf.
  %gelu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) {
  ^bb0(%v: f32, %out: f32):
    %c = arith.constant 0.7978845608 : f32
    %k = arith.constant 0.044715 : f32
    %h = arith.constant 0.5 : f32
    %v3 = math.powf %v, %c3 : f32
    %u0 = arith.mulf %v3, %k : f32
    %u1 = arith.addf %u0, %v : f32
    %u = arith.mulf %u1, %c : f32
    %th = math.tanh %u : f32
    %p = arith.addf %th, %one : f32
    %hv = arith.mulf %v, %h : f32
    %g = arith.mulf %hv, %p : f32
    linalg.yield %g : f32
  } -> tensor<30x38xf32>
  %nx = linalg.negf ins(%x : tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %ex = linalg.exp ins(%nx : tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %ones = linalg.fill ins(%one : f32) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %den = linalg.add ins(%ex, %ones : tensor<30x38xf32>, tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %sig = linalg.reciprocal ins(%den : tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %silu = linalg.mul ins(%x, %sig : tensor<30x38xf32>, tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %relu = linalg.max ins(%x, %z : tensor<30x38xf32>, tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  %tanh = linalg.tanh ins(%x : tensor<30x38xf32>) outs(%e : tensor<30x38xf32>) -> tensor<30x38xf32>
  return %gelu, %silu, %relu, %sig, %tanh : tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>, tensor<30x38xf32>
}
