// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=CHECK-FUSED

// Bias, GELU (tanh), a residual and a row scale after a GEMM, as separate
// linalg ops, with the pre-activation also returned (an extra tile output).
// 13 x 7 output: no tile divides it.

// CHECK: coda-check ok: 91 elements
// CHECK: coda-check ok: 91 elements

// CHECK-FUSED-LABEL: func.func @reference
// CHECK-FUSED: %[[G:.+]]:2 = coda.gemm
// CHECK-FUSED-NEXT: epilogue(%{{.*}}, col %{{.*}} = %{{.*}} : tensor<7xf32>, tile %{{.*}} = %{{.*}} : tensor<13x7xf32>, row %{{.*}} = %{{.*}} : tensor<13xf32>)
// CHECK-FUSED-NOT: linalg.generic
// CHECK-FUSED: return %[[G]]#{{[01]}}, %[[G]]#{{[01]}}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %bias: tensor<7xf32>, %res: tensor<13x7xf32>, %s: tensor<13xf32>)
    -> (tensor<13x7xf32>, tensor<13x7xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %bb = linalg.broadcast ins(%bias : tensor<7xf32>) outs(%e : tensor<13x7xf32>) dimensions = [0]
  %pre = linalg.add ins(%mm, %bb : tensor<13x7xf32>, tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %gelu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pre : tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) {
  ^bb0(%x: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %k0 = arith.constant 0.7978845608 : f32
    %k1 = arith.constant 0.044715 : f32
    %x2 = arith.mulf %x, %x : f32
    %x3 = arith.mulf %x2, %x : f32
    %t0 = arith.mulf %k1, %x3 : f32
    %t1 = arith.addf %x, %t0 : f32
    %t2 = arith.mulf %k0, %t1 : f32
    %t3 = math.tanh %t2 : f32
    %t4 = arith.addf %one, %t3 : f32
    %t5 = arith.mulf %half, %x : f32
    %g = arith.mulf %t5, %t4 : f32
    linalg.yield %g : f32
  } -> tensor<13x7xf32>
  %withRes = linalg.add ins(%gelu, %res : tensor<13x7xf32>, tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %out = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%withRes, %s : tensor<13x7xf32>, tensor<13xf32>) outs(%e : tensor<13x7xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %m = arith.mulf %x, %r : f32
    linalg.yield %m : f32
  } -> tensor<13x7xf32>
  return %out, %pre : tensor<13x7xf32>, tensor<13x7xf32>
}
