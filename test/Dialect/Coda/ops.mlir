// RUN: coda-opt %s | coda-opt | FileCheck %s
// RUN: coda-opt %s --mlir-print-op-generic | coda-opt | FileCheck %s

// CHECK-LABEL: func @gemm_plain
// CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<64x32xbf16>, tensor<32x96xbf16>
// CHECK-NEXT: epilogue(%[[ACC:.+]])
// CHECK-NEXT: outs(%{{.*}} : tensor<64x96xf32>) {
// CHECK-NEXT: coda.yield %[[ACC]] : f32
func.func @gemm_plain(%a: tensor<64x32xbf16>, %b: tensor<32x96xbf16>, %c: tensor<64x96xf32>) -> tensor<64x96xf32> {
  %0 = coda.gemm %a, %b : tensor<64x32xbf16>, tensor<32x96xbf16>
      epilogue(%acc) outs(%c : tensor<64x96xf32>) {
    coda.yield %acc : f32
  }
  return %0 : tensor<64x96xf32>
}

// CHECK-LABEL: func @gemm_every_access_form
// CHECK: coda.gemm %{{.*}}, %{{.*}} transpose_b : tensor<64x32xf16>, tensor<96x32xf16>
// CHECK-NEXT: epilogue(%[[ACC:.+]], tile %[[T:.+]] = %{{.*}} : tensor<64x96xf16>, row %[[R:.+]] = %{{.*}} : tensor<64xf32>, col %[[C:.+]] = %{{.*}} : tensor<96xf32>, scalar %[[S:.+]] = %{{.*}} : f32)
// CHECK-NEXT: outs(%{{.*}} : tensor<64x96xf16>) {
// CHECK: arith.extf %[[T]] : f16 to f32
// CHECK: arith.mulf %{{.*}}, %[[R]] : f32
// CHECK: arith.addf %{{.*}}, %[[C]] : f32
// CHECK: arith.mulf %{{.*}}, %[[S]] : f32
func.func @gemm_every_access_form(%a: tensor<64x32xf16>, %b: tensor<96x32xf16>, %t: tensor<64x96xf16>,
                                  %r: tensor<64xf32>, %c: tensor<96xf32>, %s: f32, %o: tensor<64x96xf16>) -> tensor<64x96xf16> {
  %0 = coda.gemm %a, %b transpose_b : tensor<64x32xf16>, tensor<96x32xf16>
      epilogue(%acc, tile %tv = %t : tensor<64x96xf16>, row %rv = %r : tensor<64xf32>,
               col %cv = %c : tensor<96xf32>, scalar %sv = %s : f32)
      outs(%o : tensor<64x96xf16>) {
    %te = arith.extf %tv : f16 to f32
    %0 = arith.addf %acc, %te : f32
    %1 = arith.mulf %0, %rv : f32
    %2 = arith.addf %1, %cv : f32
    %3 = arith.mulf %2, %sv : f32
    %4 = arith.truncf %3 : f32 to f16
    coda.yield %4 : f16
  }
  return %0 : tensor<64x96xf16>
}

// CHECK-LABEL: func @gemm_batched
// CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<2x64x32xf32>, tensor<32x96xf32>
// CHECK-NEXT: epilogue(%{{.*}}, row %{{.*}} = %{{.*}} : tensor<2x64xf32>)
func.func @gemm_batched(%a: tensor<2x64x32xf32>, %b: tensor<32x96xf32>, %r: tensor<2x64xf32>, %o: tensor<2x64x96xf32>) -> tensor<2x64x96xf32> {
  %0 = coda.gemm %a, %b : tensor<2x64x32xf32>, tensor<32x96xf32>
      epilogue(%acc, row %rv = %r : tensor<2x64xf32>) outs(%o : tensor<2x64x96xf32>) {
    %0 = arith.mulf %acc, %rv : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<2x64x96xf32>
}

// CHECK-LABEL: func @gemm_on_memrefs
// CHECK: coda.gemm %{{.*}}, %{{.*}} : memref<?x32xbf16>, memref<32x?xbf16>
// CHECK-NEXT: epilogue(%{{.*}})
// CHECK-NEXT: outs(%{{.*}} : memref<?x?xbf16>) {
func.func @gemm_on_memrefs(%a: memref<?x32xbf16>, %b: memref<32x?xbf16>, %o: memref<?x?xbf16>) {
  coda.gemm %a, %b : memref<?x32xbf16>, memref<32x?xbf16>
      epilogue(%acc) outs(%o : memref<?x?xbf16>) {
    %0 = arith.truncf %acc : f32 to bf16
    coda.yield %0 : bf16
  }
  return
}

// CHECK-LABEL: func @gemm_fp8_operands
// CHECK: coda.gemm %{{.*}}, %{{.*}} transpose_b : tensor<64x32xf8E4M3FN>, tensor<96x32xf8E4M3FN>
func.func @gemm_fp8_operands(%a: tensor<64x32xf8E4M3FN>, %b: tensor<96x32xf8E4M3FN>, %o: tensor<64x96xbf16>) -> tensor<64x96xbf16> {
  %0 = coda.gemm %a, %b transpose_b : tensor<64x32xf8E4M3FN>, tensor<96x32xf8E4M3FN>
      epilogue(%acc) outs(%o : tensor<64x96xbf16>) {
    %0 = arith.truncf %acc : f32 to bf16
    coda.yield %0 : bf16
  }
  return %0 : tensor<64x96xbf16>
}

// CHECK-LABEL: func @positions
// CHECK: %[[M:.+]] = coda.row_index
// CHECK: %[[N:.+]] = coda.col_index
// CHECK: arith.cmpi ule, %[[N]], %[[M]] : index
func.func @positions(%a: tensor<64x32xf32>, %b: tensor<32x64xf32>, %o: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x64xf32>
      epilogue(%acc) outs(%o : tensor<64x64xf32>) {
    %m = coda.row_index
    %n = coda.col_index
    %keep = arith.cmpi ule, %n, %m : index
    %ninf = arith.constant 0xFF800000 : f32
    %0 = arith.select %keep, %acc, %ninf : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<64x64xf32>
}

// CHECK-LABEL: func @block_reductions
// CHECK: %[[RS:.+]] = coda.row_reduce sum %{{.*}} tile 64 : f32
// CHECK: %[[RM:.+]] = coda.row_reduce max %{{.*}} tile 128 : f32
// CHECK: %[[RL:.+]] = coda.row_reduce logsumexp %{{.*}} tile 32 : f32
// CHECK: %[[CS:.+]] = coda.col_reduce sum %{{.*}} tile 16 : f32
// CHECK: %[[CM:.+]] = coda.col_reduce max %{{.*}} tile 64 : f32
// CHECK: coda.yield %[[RS]], %[[RM]], %[[RL]], %[[CS]], %[[CM]] : !coda.partial<f32>, !coda.partial<f32>, !coda.partial<f32>, !coda.partial<f32>, !coda.partial<f32>
func.func @block_reductions(%a: tensor<64x32xf32>, %b: tensor<32x200xf32>,
    %o0: tensor<64x4xf32>, %o1: tensor<64x2xf32>, %o2: tensor<64x7xf32>, %o3: tensor<4x200xf32>, %o4: tensor<1x200xf32>)
    -> (tensor<64x4xf32>, tensor<64x2xf32>, tensor<64x7xf32>, tensor<4x200xf32>, tensor<1x200xf32>) {
  %0:5 = coda.gemm %a, %b : tensor<64x32xf32>, tensor<32x200xf32>
      epilogue(%acc) outs(%o0, %o1, %o2, %o3, %o4 : tensor<64x4xf32>, tensor<64x2xf32>, tensor<64x7xf32>, tensor<4x200xf32>, tensor<1x200xf32>) {
    %0 = coda.row_reduce sum %acc tile 64 : f32
    %1 = coda.row_reduce max %acc tile 128 : f32
    %2 = coda.row_reduce logsumexp %acc tile 32 : f32
    %3 = coda.col_reduce sum %acc tile 16 : f32
    %4 = coda.col_reduce max %acc tile 64 : f32
    coda.yield %0, %1, %2, %3, %4 : !coda.partial<f32>, !coda.partial<f32>, !coda.partial<f32>, !coda.partial<f32>, !coda.partial<f32>
  }
  return %0#0, %0#1, %0#2, %0#3, %0#4 : tensor<64x4xf32>, tensor<64x2xf32>, tensor<64x7xf32>, tensor<4x200xf32>, tensor<1x200xf32>
}

// CHECK-LABEL: func @cross_entropy_partials
// CHECK: epilogue(%[[ACC:.+]], row %[[T:.+]] = %{{.*}} : tensor<64xi64>)
// CHECK: coda.row_reduce logsumexp %[[ACC]] tile 128 : f32
// CHECK: coda.row_select %[[ACC]] at %[[T]] : f32, i64
// CHECK: coda.yield %{{.*}}, %{{.*}} : !coda.partial<f32>, !coda.row<f32>
func.func @cross_entropy_partials(%a: tensor<64x32xbf16>, %w: tensor<1000x32xbf16>, %t: tensor<64xi64>,
                                  %lse0: tensor<64x8xf32>, %pick0: tensor<64xf32>) -> (tensor<64x8xf32>, tensor<64xf32>) {
  %lse, %pick = coda.gemm %a, %w transpose_b : tensor<64x32xbf16>, tensor<1000x32xbf16>
      epilogue(%acc, row %target = %t : tensor<64xi64>) outs(%lse0, %pick0 : tensor<64x8xf32>, tensor<64xf32>) {
    %0 = coda.row_reduce logsumexp %acc tile 128 : f32
    %1 = coda.row_select %acc at %target : f32, i64
    coda.yield %0, %1 : !coda.partial<f32>, !coda.row<f32>
  }
  return %lse, %pick : tensor<64x8xf32>, tensor<64xf32>
}

// CHECK-LABEL: func @rotary
// CHECK: %[[Y:.+]] = coda.pair_map (%[[X0:.+]], %[[X1:.+]]) = %{{.*}}, (%[[C0:.+]], %[[C1:.+]]) = %{{.*}}, (%[[S0:.+]], %[[S1:.+]]) = %{{.*}} : f32, f32, f32 -> f32 {
// CHECK: arith.mulf %[[X0]], %[[C0]] : f32
// CHECK: coda.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK: arith.truncf %[[Y]] : f32 to bf16
func.func @rotary(%a: tensor<64x32xbf16>, %w: tensor<128x32xbf16>, %cos: tensor<64x128xf32>, %sin: tensor<64x128xf32>,
                  %o: tensor<64x128xbf16>) -> tensor<64x128xbf16> {
  %0 = coda.gemm %a, %w transpose_b : tensor<64x32xbf16>, tensor<128x32xbf16>
      epilogue(%acc, tile %c = %cos : tensor<64x128xf32>, tile %s = %sin : tensor<64x128xf32>)
      outs(%o : tensor<64x128xbf16>) {
    %y = coda.pair_map (%x0, %x1) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %s : f32, f32, f32 -> f32 {
      %0 = arith.mulf %x0, %c0 : f32
      %1 = arith.mulf %x1, %s0 : f32
      %2 = arith.subf %0, %1 : f32
      %3 = arith.mulf %x1, %c1 : f32
      %4 = arith.mulf %x0, %s1 : f32
      %5 = arith.addf %3, %4 : f32
      coda.yield %2, %5 : f32, f32
    }
    %t = arith.truncf %y : f32 to bf16
    coda.yield %t : bf16
  }
  return %0 : tensor<64x128xbf16>
}

// CHECK-LABEL: func @swiglu
// CHECK: %[[H:.+]] = coda.pair_contract (%[[G:.+]], %[[U:.+]]) = %{{.*}} : f32 -> !coda.pair<bf16> {
// CHECK: math.exp
// CHECK: coda.yield %{{.*}} : bf16
// CHECK: coda.yield %[[H]] : !coda.pair<bf16>
func.func @swiglu(%x: tensor<64x32xbf16>, %w: tensor<32x256xbf16>, %r: tensor<64xf32>, %o: tensor<64x128xbf16>) -> tensor<64x128xbf16> {
  %0 = coda.gemm %x, %w : tensor<64x32xbf16>, tensor<32x256xbf16>
      epilogue(%acc, row %rstd = %r : tensor<64xf32>) outs(%o : tensor<64x128xbf16>) {
    %scaled = arith.mulf %acc, %rstd : f32
    %h = coda.pair_contract (%g, %u) = %scaled : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %neg = arith.negf %g : f32
      %e = math.exp %neg : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      %yb = arith.truncf %y : f32 to bf16
      coda.yield %yb : bf16
    }
    coda.yield %h : !coda.pair<bf16>
  }
  return %0 : tensor<64x128xbf16>
}

// CHECK-LABEL: func @rotate_half
// CHECK: epilogue(%{{.*}}, periodic %{{.*}} = %{{.*}} : tensor<64x8xf32>, periodic %{{.*}} = %{{.*}} : tensor<64x8xf32>)
// CHECK: coda.pair_map stride 4 (%{{.*}}, %{{.*}}) = %{{.*}}, (%{{.*}}, %{{.*}}) = %{{.*}}, (%{{.*}}, %{{.*}}) = %{{.*}} : f32, f32, f32 -> f32 {
// CHECK: coda.pair_contract stride 4 (%{{.*}}, %{{.*}}) = %{{.*}} : f32 -> !coda.pair<f32> {
func.func @rotate_half(%a: tensor<64x32xf32>, %w: tensor<32x32xf32>, %cos: tensor<64x8xf32>, %sin: tensor<64x8xf32>,
                       %o: tensor<64x32xf32>, %h: tensor<64x16xf32>) -> (tensor<64x32xf32>, tensor<64x16xf32>) {
  %0:2 = coda.gemm %a, %w : tensor<64x32xf32>, tensor<32x32xf32>
      epilogue(%acc, periodic %c = %cos : tensor<64x8xf32>, periodic %s = %sin : tensor<64x8xf32>)
      outs(%o, %h : tensor<64x32xf32>, tensor<64x16xf32>) {
    %y = coda.pair_map stride 4 (%x0, %x1) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %s : f32, f32, f32 -> f32 {
      %0 = arith.mulf %x0, %c0 : f32
      %1 = arith.mulf %x1, %s0 : f32
      %2 = arith.subf %0, %1 : f32
      %3 = arith.mulf %x1, %c1 : f32
      %4 = arith.mulf %x0, %s1 : f32
      %5 = arith.addf %3, %4 : f32
      coda.yield %2, %5 : f32, f32
    }
    %p = coda.pair_contract stride 4 (%x0, %x1) = %acc : f32 -> !coda.pair<f32> {
      %0 = arith.addf %x0, %x1 : f32
      coda.yield %0 : f32
    }
    coda.yield %y, %p : f32, !coda.pair<f32>
  }
  return %0#0, %0#1 : tensor<64x32xf32>, tensor<64x16xf32>
}

// CHECK-LABEL: func @finish
// CHECK: coda.reduce_partials sum row %{{.*}} : tensor<64x4xf32> outs(%{{.*}} : tensor<64xf32>)
// CHECK: coda.reduce_partials logsumexp row %{{.*}} : tensor<2x64x8xf32> outs(%{{.*}} : tensor<2x64xf32>)
// CHECK: coda.reduce_partials max col %{{.*}} : memref<4x200xf32> outs(%{{.*}} : memref<200xf32>)
func.func @finish(%p: tensor<64x4xf32>, %i: tensor<64xf32>, %q: tensor<2x64x8xf32>, %j: tensor<2x64xf32>,
                  %c: memref<4x200xf32>, %k: memref<200xf32>) -> (tensor<64xf32>, tensor<2x64xf32>) {
  %0 = coda.reduce_partials sum row %p : tensor<64x4xf32> outs(%i : tensor<64xf32>)
  %1 = coda.reduce_partials logsumexp row %q : tensor<2x64x8xf32> outs(%j : tensor<2x64xf32>)
  coda.reduce_partials max col %c : memref<4x200xf32> outs(%k : memref<200xf32>)
  return %0, %1 : tensor<64xf32>, tensor<2x64xf32>
}

// CHECK-LABEL: func private @types
// CHECK-SAME: !coda.partial<f32>, !coda.pair<bf16>, !coda.row<f16>, !coda.grouped<f32>
func.func private @types(!coda.partial<f32>, !coda.pair<bf16>, !coda.row<f16>, !coda.grouped<f32>)

// CHECK-LABEL: func.func @transposed_lhs
// CHECK: coda.gemm %{{.*}}, %{{.*}} transpose_a transpose_b : tensor<32x64xbf16>, tensor<96x32xbf16>
func.func @transposed_lhs(%a: tensor<32x64xbf16>, %b: tensor<96x32xbf16>, %o: tensor<64x96xbf16>) -> tensor<64x96xbf16> {
  %0 = coda.gemm %a, %b transpose_a transpose_b : tensor<32x64xbf16>, tensor<96x32xbf16>
      epilogue(%acc) outs(%o : tensor<64x96xbf16>) {
    %t = arith.truncf %acc : f32 to bf16
    coda.yield %t : bf16
  }
  return %0 : tensor<64x96xbf16>
}

// CHECK-LABEL: func.func @group_statistics
// CHECK: coda.group_reduce max %{{.*}} row group 128 : f32 -> f32
// CHECK: coda.group_reduce argmax %{{.*}} col group 64 : f32 -> index
// CHECK: coda.group_value %{{.*}} row group 128 : f32
// CHECK: coda.yield %{{.*}}, %{{.*}}, %{{.*}} : f8E4M3FN, !coda.grouped<f32>, index
func.func @group_statistics(%a: tensor<64x32xbf16>, %b: tensor<32x256xbf16>, %o: tensor<64x256xf8E4M3FN>,
                            %s: tensor<64x2xf32>, %i: tensor<64x256xindex>)
    -> (tensor<64x256xf8E4M3FN>, tensor<64x2xf32>, tensor<64x256xindex>) {
  %0:3 = coda.gemm %a, %b : tensor<64x32xbf16>, tensor<32x256xbf16>
      epilogue(%acc) outs(%o, %s, %i : tensor<64x256xf8E4M3FN>, tensor<64x2xf32>, tensor<64x256xindex>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs row group 128 : f32 -> f32
    %first = coda.group_reduce argmax %acc col group 64 : f32 -> index
    %q = arith.divf %acc, %amax : f32
    %code = arith.truncf %q : f32 to f8E4M3FN
    %scale = coda.group_value %amax row group 128 : f32
    coda.yield %code, %scale, %first : f8E4M3FN, !coda.grouped<f32>, index
  }
  return %0#0, %0#1, %0#2 : tensor<64x256xf8E4M3FN>, tensor<64x2xf32>, tensor<64x256xindex>
}

// CHECK-LABEL: func.func @transposed_copy
// CHECK: coda.group_reduce max %{{.*}} col group 128 : f32 -> f32
// CHECK: %[[T:.*]] = coda.transpose %{{.*}} : f8E4M3FN
// CHECK: coda.group_value %{{.*}} col group 128 : f32
// CHECK: coda.yield %[[T]], %{{.*}} : !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
func.func @transposed_copy(%a: tensor<256x32xbf16>, %b: tensor<32x64xbf16>, %o: tensor<64x256xf8E4M3FN>,
                           %s: tensor<2x64xf32>) -> (tensor<64x256xf8E4M3FN>, tensor<2x64xf32>) {
  %0:2 = coda.gemm %a, %b : tensor<256x32xbf16>, tensor<32x64xbf16>
      epilogue(%acc) outs(%o, %s : tensor<64x256xf8E4M3FN>, tensor<2x64xf32>) {
    %abs = math.absf %acc : f32
    %amax = coda.group_reduce max %abs col group 128 : f32 -> f32
    %q = arith.divf %acc, %amax : f32
    %code = arith.truncf %q : f32 to f8E4M3FN
    %t = coda.transpose %code : f8E4M3FN
    %scale = coda.group_value %amax col group 128 : f32
    coda.yield %t, %scale : !coda.transposed<f8E4M3FN>, !coda.grouped<f32>
  }
  return %0#0, %0#1 : tensor<64x256xf8E4M3FN>, tensor<2x64xf32>
}
