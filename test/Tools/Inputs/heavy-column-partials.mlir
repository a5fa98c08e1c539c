// Seed 710131 of a generated run, shrunk: two column partial sums of long
// chains of accurate math beside an f32 tile output. Four rows of this math
// per iteration spill in every configuration; one row at a time fits.
func.func @fused(%a: tensor<1x40xf16>, %b: tensor<40x40xf16>, %d0: tensor<1x40xf32>, %d1: tensor<1x40xf32>, %d2: tensor<1x40xf32>)
    -> (tensor<1x40xf32>, tensor<1x40xf32>, tensor<1x40xf32>) {
  %r:3 = coda.gemm %a, %b : tensor<1x40xf16>, tensor<40x40xf16>
      epilogue(%acc)
      outs(%d0, %d1, %d2 : tensor<1x40xf32>, tensor<1x40xf32>, tensor<1x40xf32>) {
    %v1 = arith.truncf %acc : f32 to f16
    %v2 = arith.extf %v1 : f16 to f32
    %v3 = math.absf %acc : f32
    %v4 = arith.constant 0.858 : f32
    %v5 = arith.addf %v3, %v4 : f32
    %v6 = arith.negf %v5 : f32
    %v7 = arith.negf %v6 : f32
    %v8 = math.exp %v7 : f32
    %v9 = arith.constant 1.0 : f32
    %v10 = arith.addf %v9, %v8 : f32
    %v11 = arith.divf %v9, %v10 : f32
    %v12 = arith.mulf %v6, %v11 : f32
    %v13 = arith.minimumf %v12, %v6 : f32
    %v14 = arith.negf %v13 : f32
    %v15 = math.exp %v14 : f32
    %v16 = arith.constant 1.0 : f32
    %v17 = arith.addf %v16, %v15 : f32
    %v18 = arith.divf %v16, %v17 : f32
    %v19 = arith.mulf %v13, %v18 : f32
    %v20 = arith.addf %v19, %v2 : f32
    %v21 = math.tanh %acc : f32
    %v22 = math.exp %v21 : f32
    %v23 = math.tanh %v22 : f32
    %v24 = math.exp %v23 : f32
    %v25 = arith.constant 0.7071067811865476 : f32
    %v26 = arith.constant 0.5 : f32
    %v27 = arith.constant 1.0 : f32
    %v28 = arith.mulf %acc, %v25 : f32
    %v29 = math.erf %v28 : f32
    %v30 = arith.addf %v29, %v27 : f32
    %v31 = arith.mulf %acc, %v26 : f32
    %v32 = arith.mulf %v31, %v30 : f32
    %v33 = arith.constant 1.283 : f32
    %v34 = arith.addf %v32, %v33 : f32
    %v35 = arith.minimumf %v24, %v34 : f32
    %v36 = arith.mulf %v2, %acc : f32
    %v37 = arith.minimumf %v36, %v2 : f32
    %v38 = math.absf %v2 : f32
    %v39 = arith.constant 1.0 : f32
    %v40 = arith.addf %v38, %v39 : f32
    %v41 = math.log %v40 : f32
    %v42 = arith.addf %v41, %v2 : f32
    %v43 = arith.addf %v37, %v42 : f32
    %v44 = coda.col_reduce sum %v35 tile 128 : f32
    %v45 = coda.col_reduce sum %v43 tile 128 : f32
    coda.yield %v20, %v44, %v45 : f32, !coda.partial<f32>, !coda.partial<f32>
  }
  return %r#0, %r#1, %r#2 : tensor<1x40xf32>, tensor<1x40xf32>, tensor<1x40xf32>
}
