// The training step of mlp-residual.mlir with save=1 (appended to its
// derived functions): @forward saves h and the first GEMM's accumulator,
// @backward reads them.

func.func @fused(%x: tensor<7x5xf32>, %w1: tensor<6x5xf32>, %w2: tensor<9x6xf32>,
                 %r: tensor<7x9xf32>, %s: tensor<7xf32>, %b: tensor<9xf32>, %dy: tensor<7x9xf32>)
    -> (tensor<7x5xf32>, tensor<6x5xf32>, tensor<9x6xf32>, tensor<7x9xf32>, tensor<7xf32>, tensor<9xf32>) {
  %y, %h, %acc = func.call @forward(%x, %w1, %w2, %r, %s, %b)
      : (tensor<7x5xf32>, tensor<6x5xf32>, tensor<9x6xf32>, tensor<7x9xf32>, tensor<7xf32>, tensor<9xf32>)
     -> (tensor<7x9xf32>, tensor<7x6xf32>, tensor<7x6xf32>)
  %dx, %dw1, %dw2, %dr, %ds, %db = func.call @backward(%x, %w1, %w2, %r, %s, %b, %h, %acc, %dy)
      : (tensor<7x5xf32>, tensor<6x5xf32>, tensor<9x6xf32>, tensor<7x9xf32>, tensor<7xf32>, tensor<9xf32>,
         tensor<7x6xf32>, tensor<7x6xf32>, tensor<7x9xf32>)
     -> (tensor<7x5xf32>, tensor<6x5xf32>, tensor<9x6xf32>, tensor<7x9xf32>, tensor<7xf32>, tensor<9xf32>)
  return %dx, %dw1, %dw2, %dr, %ds, %db
      : tensor<7x5xf32>, tensor<6x5xf32>, tensor<9x6xf32>, tensor<7x9xf32>, tensor<7xf32>, tensor<9xf32>
}
