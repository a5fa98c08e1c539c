// RUN: coda-opt %s -split-input-file -verify-diagnostics

// One case per rule of coda.group_reduce and coda.group_value.

func.func @row_group_wider_than_a_tile(%a: tensor<64x32xf32>, %b: tensor<32x512xf32>, %o: tensor<64x512xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x512xf32> epilogue(%acc) outs(%o : tensor<64x512xf32>) {
    // expected-error @+2 {{'coda.group_reduce' op groups of 1 x 512 cannot lie inside one output tile}}
    // expected-note @+1 {{use a power of two from 8 to 256 columns; a statistic over a whole row wider than one tile is coda.row_reduce with coda.reduce_partials}}
    %m = coda.group_reduce max %acc row group 512 : f32 -> f32
    coda.yield %m : f32
  }
  return
}

// -----

func.func @row_group_not_a_power_of_two(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+2 {{'coda.group_reduce' op groups of 1 x 96 cannot lie inside one output tile}}
    // expected-note @+1 {{use a power of two from 8 to 256 columns}}
    %m = coda.group_reduce sum %acc row group 96 : f32 -> f32
    coda.yield %m : f32
  }
  return
}

// -----

func.func @row_group_narrower_than_a_thread(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+2 {{'coda.group_reduce' op groups of 1 x 4 cannot lie inside one output tile}}
    // expected-note @+1 {{use a power of two from 8 to 256 columns}}
    %m = coda.group_reduce sum %acc row group 4 : f32 -> f32
    coda.yield %m : f32
  }
  return
}

// -----

func.func @column_group_taller_than_a_tile(%a: tensor<512x32xf32>, %b: tensor<32x96xf32>, %o: tensor<512x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<512x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<512x96xf32>) {
    // expected-error @+2 {{'coda.group_reduce' op groups of 256 x 1 cannot lie inside one output tile}}
    // expected-note @+1 {{use a power of two from 8 to 128 rows; a statistic over a whole column is coda.col_reduce with coda.reduce_partials}}
    %m = coda.group_reduce max %acc col group 256 : f32 -> f32
    coda.yield %m : f32
  }
  return
}

// -----

func.func @argmax_not_an_index(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.group_reduce' op expects a argmax result of type 'index', got 'f32'}}
    %m = coda.group_reduce argmax %acc row group 32 : f32 -> f32
    coda.yield %m : f32
  }
  return
}

// -----

func.func @statistic_of_another_type(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    // expected-error @+1 {{'coda.group_reduce' op expects a sum result of type 'f32', got 'f16'}}
    %m = coda.group_reduce sum %acc row group 32 : f32 -> f16
    %e = arith.extf %m : f16 to f32
    coda.yield %e : f32
  }
  return
}

// -----

func.func @statistic_of_a_pairwise_value(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %r = coda.pair_map (%x0, %x1) = %acc : f32 -> f32 {
      coda.yield %x1, %x0 : f32, f32
    }
    // expected-error @+1 {{'coda.group_reduce' op reduces a value computed by a pairwise op (coda.pair_map), which a group statistic cannot read}}
    %m = coda.group_reduce sum %r row group 32 : f32 -> f32
    coda.yield %m : f32
  }
  return
}

// -----

func.func @statistic_of_another_groups_statistic(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x96xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x96xf32>) {
    %m = coda.group_reduce max %acc row group 16 : f32 -> f32
    %d = arith.subf %acc, %m : f32
    // expected-error @+1 {{'coda.group_reduce' op reduces a value computed from a statistic of 1 x 16 groups; it may read statistics of its own 1 x 32 groups only}}
    %s = coda.group_reduce sum %d row group 32 : f32 -> f32
    coda.yield %s : f32
  }
  return
}

// -----

func.func @group_value_of_the_accumulator(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x3xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x3xf32>) {
    %m = coda.group_reduce max %acc row group 32 : f32 -> f32
    %x = arith.divf %acc, %m : f32
    // expected-error @+1 {{'coda.group_value' op writes a value that is not the same over each 1 x 32 group: it depends on the accumulator (it may depend on statistics of its own groups, row and scalar inputs, and constants)}}
    %v = coda.group_value %x row group 32 : f32
    coda.yield %v : !coda.grouped<f32>
  }
  return
}

// -----

func.func @group_value_of_a_column_input(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %c: tensor<96xf32>, %o: tensor<64x3xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, col %w = %c : tensor<96xf32>) outs(%o : tensor<64x3xf32>) {
    %m = coda.group_reduce max %acc row group 32 : f32 -> f32
    %x = arith.mulf %m, %w : f32
    // expected-error @+1 {{'coda.group_value' op writes a value that is not the same over each 1 x 32 group: it depends on input #0 (col)}}
    %v = coda.group_value %x row group 32 : f32
    coda.yield %v : !coda.grouped<f32>
  }
  return
}

// -----

func.func @group_value_of_the_column_index(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x3xi64>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x3xi64>) {
    %n = coda.col_index
    %i = arith.index_cast %n : index to i64
    // expected-error @+1 {{'coda.group_value' op writes a value that is not the same over each 1 x 32 group: it depends on coda.col_index}}
    %v = coda.group_value %i row group 32 : i64
    coda.yield %v : !coda.grouped<i64>
  }
  return
}

// -----

func.func @group_value_of_other_groups(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x3xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x3xf32>) {
    %m = coda.group_reduce max %acc col group 32 : f32 -> f32
    // expected-error @+1 {{'coda.group_value' op writes a value that is not the same over each 1 x 32 group: it depends on a statistic of 32 x 1 groups}}
    %v = coda.group_value %m row group 32 : f32
    coda.yield %v : !coda.grouped<f32>
  }
  return
}

// -----

func.func @group_output_of_the_wrong_shape(%a: tensor<64x32xf32>, %b: tensor<32x200xf32>, %o: tensor<64x1xf32>) {
  // expected-error @+1 {{'coda.gemm' op expects output #0 (one value per 1 x 128 group) of shape 64x2, got 64x1}}
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x200xf32> epilogue(%acc) outs(%o : tensor<64x1xf32>) {
    %m = coda.group_reduce max %acc row group 128 : f32 -> f32
    %v = coda.group_value %m row group 128 : f32
    coda.yield %v : !coda.grouped<f32>
  }
  return
}

// -----

func.func @group_value_used_in_the_epilogue(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %o: tensor<64x3xf32>) {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x96xf32> epilogue(%acc) outs(%o : tensor<64x3xf32>) {
    %m = coda.group_reduce max %acc row group 32 : f32 -> f32
    %v = coda.group_value %m row group 32 : f32
    %true = arith.constant true
    // expected-error @+1 {{'arith.select' op uses '!coda.grouped<f32>', which only the coda.gemm terminator may yield}}
    %w = arith.select %true, %v, %v : !coda.grouped<f32>
    coda.yield %w : !coda.grouped<f32>
  }
  return
}
