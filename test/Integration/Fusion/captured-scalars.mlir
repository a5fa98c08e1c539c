// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=CHECK-FUSED

// Runtime scalars captured in elementwise bodies, as torch-mlir lowers
// aten.mul.Scalar and aten.add.Tensor's alpha when the scalar is not a
// constant (a temperature or a loss scale passed in): each scalar becomes a
// scalar epilogue input of the GEMM instead of keeping the elementwise ops
// outside it. 13 x 7 outputs (no tile divides them) and one row.

// CHECK: coda-check ok: 91 elements
// CHECK: coda-check ok: 7 elements

// CHECK-FUSED-LABEL: func.func @reference_tokens
// CHECK-FUSED-SAME: %[[SCALE:[a-z0-9]+]]: f32, %[[ALPHA:[a-z0-9]+]]: f32
// CHECK-FUSED: %[[G:.+]] = coda.gemm
// CHECK-FUSED-NEXT: epilogue(%{{.*}}, tile %{{.*}} = %{{.*}} : tensor<13x7xf32>, scalar %{{.*}} = %[[SCALE]] : f32, scalar %{{.*}} = %[[ALPHA]] : f32)
// CHECK-FUSED-NOT: linalg.generic
// CHECK-FUSED: return %[[G]]
// CHECK-FUSED-LABEL: func.func @reference_one
// CHECK-FUSED: coda.gemm
// CHECK-FUSED-NOT: linalg.generic
// CHECK-FUSED: return

#id = affine_map<(m, n) -> (m, n)>

func.func @reference_tokens(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %res: tensor<13x7xf32>,
                            %scale: f32, %alpha: f32) -> tensor<13x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  // aten.mul.Scalar(mm, scale)
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
  } -> tensor<13x7xf32>
  // aten.add.Tensor(scaled, res, alpha = alpha)
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scaled, %res : tensor<13x7xf32>, tensor<13x7xf32>) outs(%e : tensor<13x7xf32>) {
  ^bb0(%x: f32, %r: f32, %o: f32):
    %t = arith.mulf %r, %alpha : f32
    %y = arith.addf %x, %t : f32
    linalg.yield %y : f32
  } -> tensor<13x7xf32>
  return %sum : tensor<13x7xf32>
}

// A scalar read from a 0-d tensor before the product (torch-mlir's
// aten.mul.Tensor with a 0-d operand after its scalar extraction), in a
// tanh-softcap: cap * tanh(x / cap).
func.func @reference_one(%a: tensor<1x9xf32>, %b: tensor<9x7xf32>, %cap: tensor<f32>) -> tensor<1x7xf32> {
  %c = tensor.extract %cap[] : tensor<f32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x7xf32>) -> tensor<1x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<1x9xf32>, tensor<9x7xf32>) outs(%z : tensor<1x7xf32>) -> tensor<1x7xf32>
  %capped = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<1x7xf32>) outs(%e : tensor<1x7xf32>) {
  ^bb0(%x: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %c1 = arith.addf %c, %one : f32
    %d = arith.divf %x, %c1 : f32
    %t = math.tanh %d : f32
    %y = arith.mulf %c1, %t : f32
    linalg.yield %y : f32
  } -> tensor<1x7xf32>
  return %capped : tensor<1x7xf32>
}
