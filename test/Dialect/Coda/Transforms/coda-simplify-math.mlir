// RUN: coda-opt %s --coda-simplify-math --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-fuse --split-input-file | FileCheck %s --check-prefix=FUSE

// An RMSNorm's square as PyTorch writes it (x.pow(2)) in an epilogue: a
// product, not libdevice's general power; other constant exponents take
// their cheap forms, and an exponent that has none stays.
// CHECK-LABEL: func @epilogue_square
// CHECK: epilogue(%[[ACC:[a-z0-9_]+]])
// CHECK-NOT: math.powf
// CHECK: %[[SQ:.+]] = arith.mulf %[[ACC]], %[[ACC]] : f32
// CHECK: math.sqrt %[[ACC]] : f32
// CHECK: math.rsqrt %[[ACC]] : f32
// CHECK: math.powf %[[ACC]], %{{.+}} : f32
// CHECK: coda.row_reduce sum %[[SQ]]
func.func @epilogue_square(%a: tensor<64x32xbf16>, %b: tensor<96x32xbf16>,
                           %o: tensor<64x96xf32>, %p: tensor<64x1xf32>)
    -> (tensor<64x96xf32>, tensor<64x1xf32>) {
  %0:2 = coda.gemm %a, %b transpose_b : tensor<64x32xbf16>, tensor<96x32xbf16>
      epilogue(%acc) outs(%o, %p : tensor<64x96xf32>, tensor<64x1xf32>) {
    %two = arith.constant 2.0 : f32
    %half = arith.constant 0.5 : f32
    %mhalf = arith.constant -0.5 : f32
    %other = arith.constant 2.5 : f32
    %sq = math.powf %acc, %two : f32
    %r = math.powf %acc, %half : f32
    %ir = math.powf %acc, %mhalf : f32
    %k = math.powf %acc, %other : f32
    %s0 = arith.addf %r, %ir : f32
    %s1 = arith.addf %s0, %k : f32
    %part = coda.row_reduce sum %sq tile 96 : f32
    coda.yield %s1, %part : f32, !coda.partial<f32>
  }
  return %0#0, %0#1 : tensor<64x96xf32>, tensor<64x1xf32>
}

// -----

// In linalg, as imported: coda-fuse simplifies before it fuses, so the
// residual + norm statistic's epilogue squares with a product.
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
// FUSE-LABEL: func @residual_norm_statistic
// FUSE: coda.gemm
// FUSE-NOT: math.powf
// FUSE: arith.mulf %[[V:[a-z0-9_]+]], %[[V]] : f32
// FUSE: coda.row_reduce sum
// FUSE: coda.yield
// FUSE-NOT: math.powf
func.func @residual_norm_statistic(%a: tensor<64x32xf32>, %b: tensor<32x96xf32>, %res: tensor<64x96xf32>)
    -> (tensor<64x96xf32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<64x96xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<64x96xf32>) -> tensor<64x96xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x96xf32>) outs(%z : tensor<64x96xf32>) -> tensor<64x96xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %res : tensor<64x96xf32>, tensor<64x96xf32>) outs(%e : tensor<64x96xf32>) {
  ^bb0(%v: f32, %r: f32, %out: f32):
    %s = arith.addf %v, %r : f32
    linalg.yield %s : f32
  } -> tensor<64x96xf32>
  %re = tensor.empty() : tensor<64xf32>
  %rz = linalg.fill ins(%zero : f32) outs(%re : tensor<64xf32>) -> tensor<64xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<64x96xf32>) outs(%rz : tensor<64xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %p = math.powf %v, %two : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %h, %ss : tensor<64x96xf32>, tensor<64xf32>
}
