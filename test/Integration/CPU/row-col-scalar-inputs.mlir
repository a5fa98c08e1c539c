// RUN: %differential %s | %cpu-runner | FileCheck %s

// Row-vector, column-vector and scalar epilogue inputs: the deferred RMSNorm
// row scale r[m], a weight g[n] and a scalar s: y = acc * r[m] * g[n] + s.

// CHECK: coda-check ok: 1443 elements

func.func @fused(%a: tensor<39x24xf32>, %b: tensor<24x37xf32>, %r: tensor<39xf32>, %g: tensor<37xf32>, %s: f32,
                 %o: tensor<39x37xf32>) -> tensor<39x37xf32> {
  %y = coda.gemm %a, %b : tensor<39x24xf32>, tensor<24x37xf32>
      epilogue(%acc, row %rv = %r : tensor<39xf32>, col %gv = %g : tensor<37xf32>, scalar %sv = %s : f32)
      outs(%o : tensor<39x37xf32>) {
    %0 = arith.mulf %acc, %rv : f32
    %1 = arith.mulf %0, %gv : f32
    %2 = arith.addf %1, %sv : f32
    coda.yield %2 : f32
  }
  return %y : tensor<39x37xf32>
}

func.func @reference(%a: tensor<39x24xf32>, %b: tensor<24x37xf32>, %r: tensor<39xf32>, %g: tensor<37xf32>, %s: f32)
    -> tensor<39x37xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<39x37xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<39x37xf32>) -> tensor<39x37xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<39x24xf32>, tensor<24x37xf32>) outs(%z : tensor<39x37xf32>) -> tensor<39x37xf32>
  %rb = linalg.broadcast ins(%r : tensor<39xf32>) outs(%e : tensor<39x37xf32>) dimensions = [1]
  %gb = linalg.broadcast ins(%g : tensor<37xf32>) outs(%e : tensor<39x37xf32>) dimensions = [0]
  %sb = linalg.fill ins(%s : f32) outs(%e : tensor<39x37xf32>) -> tensor<39x37xf32>
  %0 = linalg.mul ins(%mm, %rb : tensor<39x37xf32>, tensor<39x37xf32>) outs(%e : tensor<39x37xf32>) -> tensor<39x37xf32>
  %1 = linalg.mul ins(%0, %gb : tensor<39x37xf32>, tensor<39x37xf32>) outs(%e : tensor<39x37xf32>) -> tensor<39x37xf32>
  %2 = linalg.add ins(%1, %sb : tensor<39x37xf32>, tensor<39x37xf32>) outs(%e : tensor<39x37xf32>) -> tensor<39x37xf32>
  return %2 : tensor<39x37xf32>
}
