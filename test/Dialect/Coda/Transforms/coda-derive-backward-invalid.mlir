// RUN: coda-opt %s --coda-derive-backward --split-input-file --verify-diagnostics

// An epilogue op without a derivative rule that a gradient reaches.
func.func @no_rule(%x: tensor<8x4xf32>, %w: tensor<6x4xf32>) -> tensor<8x6xf32> {
  %e = tensor.empty() : tensor<8x6xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc) outs(%e : tensor<8x6xf32>) {
    // expected-error @below {{'math.sin' op has no derivative rule in --coda-derive-backward}}
    %s = math.sin %acc : f32
    coda.yield %s : f32
  }
  return %y : tensor<8x6xf32>
}

// -----

// Ops the backward cannot see through.
func.func @other_op(%x: tensor<8x4xf32>, %w: tensor<4x6xf32>, %v: tensor<6x6xf32>) -> tensor<8x6xf32> {
  %e = tensor.empty() : tensor<8x6xf32>
  // expected-error @below {{'linalg.matmul' op is not differentiated by --coda-derive-backward}}
  %y = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x6xf32>) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %z = coda.gemm %y, %v transpose_b : tensor<8x6xf32>, tensor<6x6xf32>
      epilogue(%acc) outs(%e : tensor<8x6xf32>) {
    coda.yield %acc : f32
  }
  return %z : tensor<8x6xf32>
}

// -----

// Partials must be finished in the function.
func.func @unfinished(%x: tensor<8x4xf32>, %w: tensor<6x4xf32>) -> tensor<8x1xf32> {
  %e = tensor.empty() : tensor<8x1xf32>
  // expected-error @below {{partials output 0 must be finished by one coda.reduce_partials of the same kind and axis to be differentiated}}
  %p = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc) outs(%e : tensor<8x1xf32>) {
    %s = coda.row_reduce sum %acc tile 128 : f32
    coda.yield %s : !coda.partial<f32>
  }
  return %p : tensor<8x1xf32>
}

// -----

// Max partials (ties make the gradient ambiguous) are not differentiated.
func.func @max(%x: tensor<8x4xf32>, %w: tensor<6x4xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8x1xf32>
  %v = tensor.empty() : tensor<8xf32>
  %p = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc) outs(%e : tensor<8x1xf32>) {
    %s = coda.row_reduce max %acc tile 128 : f32
    coda.yield %s : !coda.partial<f32>
  }
  // expected-error @below {{max partials are not differentiated by --coda-derive-backward}}
  %m = coda.reduce_partials max row %p : tensor<8x1xf32> outs(%v : tensor<8xf32>)
  return %m : tensor<8xf32>
}

// -----

// A table read as a periodic input is a constant to the derivative; it
// cannot also be differentiated elsewhere.
// expected-error @below {{--coda-derive-backward: argument 2 is read as a scalar or periodic epilogue input (a constant to the derivative) and also differentiated}}
func.func @mixed(%x: tensor<8x4xf32>, %w: tensor<8x4xf32>, %t: tensor<8x4xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e = tensor.empty() : tensor<8x8xf32>
  %a = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<8x4xf32>
      epilogue(%acc, periodic %tv = %t : tensor<8x4xf32>) outs(%e : tensor<8x8xf32>) {
    %s = arith.mulf %acc, %tv : f32
    coda.yield %s : f32
  }
  %b = coda.gemm %t, %w transpose_b : tensor<8x4xf32>, tensor<8x4xf32>
      epilogue(%acc) outs(%e : tensor<8x8xf32>) {
    coda.yield %acc : f32
  }
  return %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Interleaved outputs (a backward's own layout) are not differentiated.
func.func @interleaved_output(%x: tensor<8x4xf32>, %w: tensor<6x4xf32>) -> tensor<8x12xf32> {
  %e = tensor.empty() : tensor<8x12xf32>
  // expected-error @below {{'coda.gemm' op interleaved output 0 is not differentiated by --coda-derive-backward}}
  %y = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc) outs(%e : tensor<8x12xf32>) {
    %both = coda.interleave %acc, %acc : f32
    coda.yield %both : !coda.interleaved<f32>
  }
  return %y : tensor<8x12xf32>
}

// -----

// A float input read per column pair would need its gradient summed per
// pair: not derived.
func.func @pair_input(%x: tensor<8x4xf32>, %w: tensor<6x4xf32>, %p: tensor<8x3xf32>) -> tensor<8x6xf32> {
  %e = tensor.empty() : tensor<8x6xf32>
  // expected-error @below {{'coda.gemm' op pair input 0 is not differentiated by --coda-derive-backward}}
  %y = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<6x4xf32>
      epilogue(%acc, pair %pv = %p : tensor<8x3xf32>) outs(%e : tensor<8x6xf32>) {
    %m = coda.pair_map (%a0, %a1) = %acc, (%p0, %p1) = %pv : f32, f32 -> f32 {
      %b0 = arith.mulf %a0, %p0 : f32
      %b1 = arith.mulf %a1, %p1 : f32
      coda.yield %b0, %b1 : f32, f32
    }
    coda.yield %m : f32
  }
  return %y : tensor<8x6xf32>
}

// -----

// A statistic of groups whose value a pairwise op reads: the gradient
// reaching the statistic passes through the pair op's adjoint, which a group
// statistic cannot reduce.
func.func @group_then_pair(%x: tensor<8x4xf32>, %w: tensor<16x4xf32>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<8x4xf32>, tensor<16x4xf32>
      epilogue(%acc) outs(%e : tensor<8x16xf32>) {
    %sq = arith.mulf %acc, %acc : f32
    // expected-error @below {{'coda.group_reduce' op is not differentiated by --coda-derive-backward: the gradient reaching it passes through a pairwise op}}
    %s = coda.group_reduce sum %sq row group 8 : f32 -> f32
    %n = arith.mulf %acc, %s : f32
    %m = coda.pair_map (%a0, %a1) = %n : f32 -> f32 {
      %b0 = arith.subf %a0, %a1 : f32
      coda.yield %b0, %a1 : f32, f32
    }
    coda.yield %m : f32
  }
  return %y : tensor<8x16xf32>
}
