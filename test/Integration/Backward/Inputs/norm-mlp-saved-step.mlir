// The training step of norm-mlp-saved.mlir (appended to its derived
// functions): @forward saves h, the gate and up accumulators, z and the
// partials; @backward reads them. The reference runs the recomputing pair.

func.func @fused(%x: tensor<7x8xf32>, %rs: tensor<7xf32>, %wgu: tensor<10x8xf32>, %wd: tensor<8x5xf32>,
                 %dz: tensor<7x8xf32>, %dss: tensor<7xf32>)
    -> (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>) {
  %z, %ss, %h, %g, %u, %zs, %pz = func.call @forward(%x, %rs, %wgu, %wd)
      : (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>)
     -> (tensor<7x8xf32>, tensor<7xf32>, tensor<7x5xf32>, tensor<7x5xf32>, tensor<7x5xf32>,
         tensor<7x8xf32>, tensor<7x2xf32>)
  %dx, %drs, %dwgu, %dwd = func.call @backward(%x, %rs, %wgu, %wd, %h, %g, %u, %zs, %pz, %dz, %dss)
      : (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>, tensor<7x5xf32>,
         tensor<7x5xf32>, tensor<7x5xf32>, tensor<7x8xf32>, tensor<7x2xf32>, tensor<7x8xf32>, tensor<7xf32>)
     -> (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>)
  return %dx, %drs, %dwgu, %dwd : tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>
}

func.func @reference(%x: tensor<7x8xf32>, %rs: tensor<7xf32>, %wgu: tensor<10x8xf32>, %wd: tensor<8x5xf32>,
                     %dz: tensor<7x8xf32>, %dss: tensor<7xf32>)
    -> (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>) {
  %dx, %drs, %dwgu, %dwd = func.call @backward_plain(%x, %rs, %wgu, %wd, %dz, %dss)
      : (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>, tensor<7x8xf32>, tensor<7xf32>)
     -> (tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>)
  return %dx, %drs, %dwgu, %dwd : tensor<7x8xf32>, tensor<7xf32>, tensor<10x8xf32>, tensor<8x5xf32>
}
