// RUN: coda-opt %s -split-input-file -verify-diagnostics

func.func @unknown_access_form(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %r: tensor<64xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+2 {{unknown access form 'rows', expected one of tile, row, col, scalar}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, rows %x = %r : tensor<64xf32>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @missing_epilogue_keyword(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{expected 'epilogue'}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> outs(%o : tensor<64x96xf32>) {
    coda.yield
  }
  return
}

// -----

func.func @pair_operand_type_count(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{expects one type per operand (1), got 2}}
    %y = coda.pair_map (%x0, %x1) = %acc : f32, f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @unknown_reduction_kind(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x1xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x1xf32>) {
    // expected-error @+2 {{expected ::mlir::coda::ReductionKind to be one of: sum, max, logsumexp}}
    // expected-error @+1 {{failed to parse Coda_ReductionKindAttr parameter 'value' which is to be a `::mlir::coda::ReductionKind`}}
    %p = coda.row_reduce mean %acc tile 96 : f32
    coda.yield %p : !coda.partial<f32>
  }
  return
}

// -----

func.func @undefined_operand(%a: tensor<64x32xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{use of undeclared SSA value name}}
  %0 = coda.gemm %a, %nope : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}
