// RUN: coda-opt %s -split-input-file -verify-diagnostics

func.func @mixed_tensors_and_memrefs(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: memref<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects all shaped operands to be tensors like lhs, got 'memref<64x96xf32>'}}
  coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : memref<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @lhs_rank(%a: tensor<32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects lhs of rank 2 (M x K) or 3 (B x M x K), got rank 1}}
  %0 = coda.gemm %a, %b : tensor<32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @rhs_rank(%a: tensor<64x32xf32>, %b: tensor<2x32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects rhs of rank 2, got rank 3}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<2x32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @operand_element_types_differ(%a: tensor<64x32xbf16>, %b: tensor<32x96xf16>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects lhs and rhs of one element type, got 'bf16' and 'f16'}}
  %0 = coda.gemm %a, %b : tensor<64x32xbf16>, tensor<32x96xf16> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @unsupported_operand_element_type(%a: tensor<64x32xi8>, %b: tensor<32x96xi8>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects operands of bf16, f16, f32, f8E4M3FN or f8E5M2, got 'i8'}}
  %0 = coda.gemm %a, %b : tensor<64x32xi8>, tensor<32x96xi8> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @contraction_size_mismatch(%a: tensor<64x32xf32>, %b: tensor<16x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects rhs (K x N) of shape 32x96, got 16x96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<16x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

// A weight stored N x K (as nn.Linear keeps it) without transpose_b: the
// note names the fix.
func.func @rhs_needs_transpose_b(%a: tensor<64x32xf32>, %b: tensor<96x32xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+2 {{'coda.gemm' op expects rhs (K x N) of shape 32x32, got 96x32}}
  // expected-note @+1 {{lhs 64x32 and rhs 96x32 agree on K in the other layout: add transpose_b}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<96x32xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @transposed_contraction_size_mismatch(%a: tensor<64x32xf32>, %b: tensor<96x16xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects rhs (N x K, transpose_b) of shape 96x32, got 96x16}}
  %0 = coda.gemm %a, %b transpose_b : tensor<64x32xf32>, tensor<96x16xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @batch_mismatch(%a: tensor<2x64x32xf32>, %b: tensor<3x32x96xf32>, %o: tensor<2x64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects rhs (K x N) of shape 2x32x96, got 3x32x96}}
  %0 = coda.gemm %a, %b : tensor<2x64x32xf32>, tensor<3x32x96xf32> epilogue(%acc) outs(%o : tensor<2x64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @access_form_count(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %r: tensor<64xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects one access form per epilogue input, got 0 forms for 1 inputs}}
  %0 = "coda.gemm"(%a, %b, %r, %o) <{input_forms = [], operandSegmentSizes = array<i32: 1, 1, 1, 1>}> ({
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }) : (tensor<64x32xf32>, tensor<32x96xf32>, tensor<64xf32>, tensor<64x96xf32>) -> tensor<64x96xf32>
  return
}

// -----

func.func @scalar_form_on_tensor(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %s: tensor<64xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (scalar) to be an integer, index or float, got 'tensor<64xf32>'}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, scalar %x = %s : tensor<64xf32>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @vector_form_on_scalar(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %s: f32, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (tile) to be a shaped value, got 'f32'}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, tile %x = %s : f32) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @input_of_complex(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %c: tensor<96xcomplex<f32>>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (col) to hold integers or floats, got 'complex<f32>'}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, col %x = %c : tensor<96xcomplex<f32>>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @tile_input_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %t: tensor<64x95xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (tile) of shape 64x96, got 64x95}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, tile %x = %t : tensor<64x95xf32>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @row_input_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %r: tensor<96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (row) of shape 64, got 96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, row %x = %r : tensor<96xf32>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @col_input_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %c: tensor<64xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (col) of shape 96, got 64}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, col %x = %c : tensor<64xf32>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @batched_row_input_shape(%a: tensor<2x64x32xf32>, %b: tensor<32x96xf32>, %r: tensor<64xf32>, %o: tensor<2x64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (row) of shape 2x64, got 64}}
  %0 = coda.gemm %a, %b : tensor<2x64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, row %x = %r : tensor<64xf32>) outs(%o : tensor<2x64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @no_output(%a: memref<64x32xf32>, %b: memref<32x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects at least one output}}
  coda.gemm %a, %b : memref<64x32xf32>, memref<32x96xf32> epilogue(%acc) outs() {
    coda.yield
  }
  return
}

// -----

func.func @epilogue_argument_count(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %r: tensor<64xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects the epilogue to take the accumulator and one argument per epilogue input (2 arguments), got 1}}
  %0 = "coda.gemm"(%a, %b, %r, %o) <{input_forms = [#coda<access row>], operandSegmentSizes = array<i32: 1, 1, 1, 1>}> ({
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }) : (tensor<64x32xf32>, tensor<32x96xf32>, tensor<64xf32>, tensor<64x96xf32>) -> tensor<64x96xf32>
  return
}

// -----

func.func @accumulator_not_f32(%a: tensor<64x32xf16>, %b: tensor<32x96xf16>, %o: tensor<64x96xf16>) {
  // expected-error @+1 {{'coda.gemm' op expects the accumulator argument to be f32, got 'f16'}}
  %0 = "coda.gemm"(%a, %b, %o) <{input_forms = [], operandSegmentSizes = array<i32: 1, 1, 0, 1>}> ({
  ^bb0(%acc: f16):
    coda.yield %acc : f16
  }) : (tensor<64x32xf16>, tensor<32x96xf16>, tensor<64x96xf16>) -> tensor<64x96xf16>
  return
}

// -----

func.func @epilogue_argument_type(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %r: tensor<64xbf16>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue argument #1 to be 'bf16' (the element of input #0), got 'f32'}}
  %0 = "coda.gemm"(%a, %b, %r, %o) <{input_forms = [#coda<access row>], operandSegmentSizes = array<i32: 1, 1, 1, 1>}> ({
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }) : (tensor<64x32xf32>, tensor<32x96xf32>, tensor<64xbf16>, tensor<64x96xf32>) -> tensor<64x96xf32>
  return
}

// -----

func.func @foreign_op_in_epilogue(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'tensor.empty' op is not allowed in a coda.gemm epilogue: it may hold only arith and math ops and coda epilogue ops}}
    %t = tensor.empty() : tensor<4xf32>
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @foreign_op_in_pair_region(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      // expected-error @+1 {{'tensor.empty' op is not allowed in a pairwise region: it may hold only arith and math ops and coda.yield}}
      %t = tensor.empty() : tensor<4xf32>
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @vector_value_in_epilogue(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'arith.constant' op produces a value of type 'vector<4xf32>' in an epilogue, which computes on scalars only}}
    %v = arith.constant dense<1.0> : vector<4xf32>
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @partial_used_in_arithmetic(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x1xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x1xf32>) {
    %p = coda.row_reduce sum %acc tile 96 : f32
    %true = arith.constant true
    // expected-error @+1 {{'arith.select' op uses '!coda.partial<f32>', which only the coda.gemm terminator may yield}}
    %q = arith.select %true, %p, %p : !coda.partial<f32>
    coda.yield %q : !coda.partial<f32>
  }
  return
}

// -----

func.func @pairs_over_odd_columns(%a: tensor<64x32xf32>, %b: tensor<32x95xf32>, %o: tensor<64x95xf32>) {
  // expected-error @+1 {{'coda.gemm' op has pairwise epilogue ops over columns (n, n + 1) in blocks of 2, but N = 95 is not a multiple of 2}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x95xf32> epilogue(%acc) outs(%o : tensor<64x95xf32>) {
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @yield_count(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>, %p: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects the epilogue to yield one value per output (2), got 1}}
  %0:2 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o, %p : tensor<64x96xf32>, tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @output_element_type(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xbf16>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 to hold 'f32', the type the epilogue yields for it, got 'bf16'}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xbf16>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @tile_output_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x48xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (tile) of shape 64x96, got 64x48}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x48xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @row_partials_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x3xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (row partials, tile 64) of shape 64x2, got 64x3}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x3xf32>) {
    %p = coda.row_reduce sum %acc tile 64 : f32
    coda.yield %p : !coda.partial<f32>
  }
  return
}

// -----

func.func @column_partials_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (column partials, tile 16) of shape 4x96, got 64x96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %p = coda.col_reduce max %acc tile 16 : f32
    coda.yield %p : !coda.partial<f32>
  }
  return
}

// -----

func.func @pair_output_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (one value per column pair) of shape 64x48, got 64x96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<f32> {
      %y = arith.mulf %g, %u : f32
      coda.yield %y : f32
    }
    coda.yield %h : !coda.pair<f32>
  }
  return
}

// -----

func.func @interleaved_output_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (two values per element) of shape 64x192, got 64x96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %both = coda.interleave %acc, %acc : f32
    coda.yield %both : !coda.interleaved<f32>
  }
  return
}

// -----

func.func @transposed_output_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xbf16>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (transposed, N x M) of shape 96x64, got 64x96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xbf16>) {
    %v = arith.truncf %acc : f32 to bf16
    %t = coda.transpose %v : bf16
    coda.yield %t : !coda.transposed<bf16>
  }
  return
}

// -----

func.func @transposed_not_yielded(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %t = coda.transpose %acc : f32
    // expected-error @+1 {{'arith.addf' op operand #0 must be floating-point-like, but got '!coda.transposed<f32>'}}
    %u = arith.addf %t, %t : !coda.transposed<f32>
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @row_output_shape(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %t: tensor<64xi32>, %o: tensor<96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (one value per row) of shape 64, got 96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, row %target = %t : tensor<64xi32>) outs(%o : tensor<96xf32>) {
    %s = coda.row_select %acc at %target : f32, i32
    coda.yield %s : !coda.row<f32>
  }
  return
}

// -----

func.func @reduction_tile_not_positive(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x1xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x1xf32>) {
    // expected-error @+1 {{'coda.row_reduce' op attribute 'tile' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
    %p = coda.row_reduce sum %acc tile 0 : f32
    coda.yield %p : !coda.partial<f32>
  }
  return
}

// -----

func.func @reduction_outside_gemm(%x: f32) {
  // expected-error @+1 {{'coda.row_reduce' op expects parent op 'coda.gemm'}}
  %p = coda.row_reduce sum %x tile 64 : f32
  return
}

// -----

func.func @column_index_in_pair_region(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      // expected-error @+1 {{'coda.col_index' op expects parent op 'coda.gemm'}}
      %n = coda.col_index
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @select_with_float_column(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %t: tensor<64xf32>, %o: tensor<64xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, row %target = %t : tensor<64xf32>) outs(%o : tensor<64xf32>) {
    // expected-error @+1 {{'coda.row_select' op operand #1 must be signless integer or index, but got 'f32'}}
    %s = coda.row_select %acc at %target : f32, f32
    coda.yield %s : !coda.row<f32>
  }
  return
}

// -----

func.func @pair_op_without_results(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_map' op expects at least one result}}
    "coda.pair_map"(%acc) ({
    ^bb0(%x0: f32, %x1: f32):
      coda.yield
    }) : (f32) -> ()
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @pair_op_without_operands(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_map' op expects at least one operand}}
    %y = "coda.pair_map"() ({
      %c = arith.constant 1.0 : f32
      coda.yield %c, %c : f32, f32
    }) : () -> f32
    coda.yield %y : f32
  }
  return
}

// -----

func.func @pair_region_argument_count(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_map' op expects two region arguments (even, odd column) per operand (2), got 1}}
    %y = "coda.pair_map"(%acc) ({
    ^bb0(%x0: f32):
      coda.yield %x0, %x0 : f32, f32
    }) : (f32) -> f32
    coda.yield %y : f32
  }
  return
}

// -----

func.func @pair_region_argument_type(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_map' op expects region argument #1 to have the type of operand #0 ('f32'), got 'f16'}}
    %y = "coda.pair_map"(%acc) ({
    ^bb0(%x0: f32, %x1: f16):
      coda.yield %x0, %x0 : f32, f32
    }) : (f32) -> f32
    coda.yield %y : f32
  }
  return
}

// -----

func.func @pair_map_yield_count(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_map' op expects the region to yield two values (even, odd column) per result (2), got 1}}
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x0 : f32
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @pair_map_sink_result(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x48xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x48xf32>) {
    // expected-error @+1 {{'coda.pair_map' op expects scalar results, got '!coda.pair<f32>'}}
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> !coda.pair<f32> {
      coda.yield %x0, %x1 : f32, f32
    }
    coda.yield %y : !coda.pair<f32>
  }
  return
}

// -----

func.func @pair_map_yield_type(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_map' op expects yielded value #1 to have the type of result #0 ('f32'), got 'f16'}}
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      %h = arith.truncf %x1 : f32 to f16
      coda.yield %x0, %h : f32, f16
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @pair_operand_not_scalar(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x1xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x1xf32>) {
    %p = coda.row_reduce sum %acc tile 96 : f32
    // expected-error @+1 {{'coda.pair_map' op expects scalar operands, got '!coda.partial<f32>'}}
    %y = coda.pair_map (%x0, %x1) = %p : !coda.partial<f32> -> f32 {
      %c = arith.constant 1.0 : f32
      coda.yield %c, %c : f32, f32
    }
    coda.yield %p : !coda.partial<f32>
  }
  return
}

// -----

func.func @pair_contract_yield_count(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x48xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x48xf32>) {
    // expected-error @+1 {{'coda.pair_contract' op expects the region to yield one value per result (1), got 2}}
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<f32> {
      coda.yield %g, %u : f32, f32
    }
    coda.yield %h : !coda.pair<f32>
  }
  return
}

// -----

func.func @pair_contract_yield_type(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x48xbf16>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x48xbf16>) {
    // expected-error @+1 {{'coda.pair_contract' op expects yielded value #0 to be 'bf16' (result #0 is '!coda.pair<bf16>'), got 'f32'}}
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> !coda.pair<bf16> {
      %y = arith.mulf %g, %u : f32
      coda.yield %y : f32
    }
    coda.yield %h : !coda.pair<bf16>
  }
  return
}

// -----

func.func @pair_contract_plain_result(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_contract' op result #0 must be variadic of one value per column pair, bound for an M x N/2 output, but got 'f32'}}
    %h = coda.pair_contract (%g, %u) = %acc : f32 -> f32 {
      coda.yield %g : f32
    }
    coda.yield %h : f32
  }
  return
}

// -----

func.func @finish_mixes_tensors_and_memrefs(%p: tensor<64x4xf32>, %i: memref<64xf32>) {
  // expected-error @+1 {{'coda.reduce_partials' op expects partials and init to be both tensors or both memrefs}}
  coda.reduce_partials sum row %p : tensor<64x4xf32> outs(%i : memref<64xf32>)
  return
}

// -----

func.func @finish_partials_rank(%p: tensor<64xf32>, %i: tensor<1xf32>) {
  // expected-error @+1 {{'coda.reduce_partials' op expects partials of rank 2 or 3 (with a batch dimension), got rank 1}}
  %0 = coda.reduce_partials sum row %p : tensor<64xf32> outs(%i : tensor<1xf32>)
  return
}

// -----

func.func @finish_element_types(%p: tensor<64x4xf32>, %i: tensor<64xf16>) {
  // expected-error @+1 {{'coda.reduce_partials' op expects partials and init of one float element type, got 'f32' and 'f16'}}
  %0 = coda.reduce_partials sum row %p : tensor<64x4xf32> outs(%i : tensor<64xf16>)
  return
}

// -----

func.func @finish_init_shape(%p: tensor<4x96xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{'coda.reduce_partials' op expects init (the partials without their tile dimension) of shape 96, got 4}}
  %0 = coda.reduce_partials max col %p : tensor<4x96xf32> outs(%i : tensor<4xf32>)
  return
}

// -----

func.func @results_do_not_match_tensor_outputs(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expected the number of tensor results (2) to be equal to the number of output tensors (1)}}
  %0:2 = "coda.gemm"(%a, %b, %o) <{input_forms = [], operandSegmentSizes = array<i32: 1, 1, 0, 1>}> ({
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }) : (tensor<64x32xf32>, tensor<32x96xf32>, tensor<64x96xf32>) -> (tensor<64x96xf32>, tensor<64x96xf32>)
  return
}

// -----

func.func @finish_result_on_memrefs(%p: memref<4x2xf32>, %i: memref<4xf32>) {
  // expected-error @+2 {{'coda.reduce_partials' op inferred type(s)  are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{'coda.reduce_partials' op failed to infer returned types}}
  %0 = "coda.reduce_partials"(%p, %i) <{kind = #coda<reduction sum>, axis = #coda<axis row>}> : (memref<4x2xf32>, memref<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @periodic_input_not_dividing(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %t: tensor<64x36xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects the period of epilogue input #0 (periodic) (its last dimension, 36) to divide N = 96}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, periodic %x = %t : tensor<64x36xf32>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @periodic_input_rows(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %t: tensor<32x32xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (periodic) of shape 64x32, got 32x32}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, periodic %x = %t : tensor<32x32xf32>) outs(%o : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return
}

// -----

func.func @pair_strides_differ(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>, %h: tensor<64x48xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects every pairwise op of the epilogue to use one stride, got 1 and 2}}
  %0:2 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o, %h : tensor<64x96xf32>, tensor<64x48xf32>) {
    %y = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    %p = coda.pair_contract stride 2 (%x0, %x1) = %acc : f32 -> !coda.pair<f32> {
      coda.yield %x0 : f32
    }
    coda.yield %y, %p : f32, !coda.pair<f32>
  }
  return
}

// -----

func.func @pair_blocks_do_not_tile_n(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  // expected-error @+1 {{'coda.gemm' op has pairwise epilogue ops over columns (n, n + 64) in blocks of 128, but N = 96 is not a multiple of 128}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %y = coda.pair_map stride 64 (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @pair_stride_not_positive(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.pair_map' op attribute 'stride' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
    %y = coda.pair_map stride 0 (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    coda.yield %y : f32
  }
  return
}

// -----

func.func @pair_input_without_pairs(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %g: tensor<4x3xf32>, %o: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'coda.gemm' op expects pairwise ops in the epilogue to read epilogue input #0 (pair) at their pairs}}
  %y = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32> epilogue(%acc, pair %gv = %g : tensor<4x3xf32>) outs(%o : tensor<4x6xf32>) {
    %s = arith.mulf %acc, %gv : f32
    coda.yield %s : f32
  }
  return %y : tensor<4x6xf32>
}

// -----

func.func @pair_input_shape(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %g: tensor<4x6xf32>, %o: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'coda.gemm' op expects epilogue input #0 (pair) of shape 4x3, got 4x6}}
  %y = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32> epilogue(%acc, pair %gv = %g : tensor<4x6xf32>) outs(%o : tensor<4x6xf32>) {
    %m = coda.pair_map (%x0, %x1) = %acc, (%g0, %g1) = %gv : f32, f32 -> f32 {
      coda.yield %g0, %x1 : f32, f32
    }
    coda.yield %m : f32
  }
  return %y : tensor<4x6xf32>
}

// -----

func.func @transposed_lhs_shape(%a: tensor<8x4xf32>, %b: tensor<4x6xf32>, %o: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+2 {{'coda.gemm' op expects rhs (K x N) of shape 8x6, got 4x6}}
  // expected-note @+1 {{lhs 8x4 and rhs 4x6 agree on K in the other layout: drop transpose_a}}
  %y = coda.gemm %a, %b transpose_a : tensor<8x4xf32>, tensor<4x6xf32> epilogue(%acc) outs(%o : tensor<4x6xf32>) {
    coda.yield %acc : f32
  }
  return %y : tensor<4x6xf32>
}
