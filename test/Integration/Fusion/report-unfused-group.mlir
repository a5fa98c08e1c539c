// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s

// A statistic over groups of a GEMM's row that cannot join its epilogue is
// listed with the reason --coda-fuse-groups fails with.

// Groups of 96 columns: an epilogue statistic takes powers of two.
// CHECK-LABEL: coda fusion report: @width_96
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-group.mlir":[[@LINE+12]]:{{[0-9]+}}) ({{.*}}): reads a coda.gemm's result but stays outside its epilogue: it is not a reduction over groups of 8 to 256 columns (a power of two) of a GEMM result
#id3 = affine_map<(m, g, e) -> (m, g, e)>
#group2 = affine_map<(m, g, e) -> (m, g)>
func.func @width_96(%x: tensor<8x64xbf16>, %w: tensor<192x64xbf16>) -> tensor<8x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x192xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x192xf32>) -> tensor<8x192xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<8x64xbf16>, tensor<192x64xbf16>) outs(%z : tensor<8x192xf32>) -> tensor<8x192xf32>
  %v = tensor.expand_shape %y [[0], [1, 2]] output_shape [8, 2, 96] : tensor<8x192xf32> into tensor<8x2x96xf32>
  %ea = tensor.empty() : tensor<8x2xf32>
  %za = linalg.fill ins(%zero : f32) outs(%ea : tensor<8x2xf32>) -> tensor<8x2xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #group2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<8x2x96xf32>) outs(%za : tensor<8x2xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8x2xf32>
  return %sum : tensor<8x2xf32>
}

// The group's product of its elements: not a sum, maximum or minimum.
// CHECK-LABEL: coda fusion report: @product
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-group.mlir":[[@LINE+11]]:{{[0-9]+}}) ({{.*}}): reads a coda.gemm's result but stays outside its epilogue: it combines with arith.mulf, not a sum, maximum or minimum
func.func @product(%x: tensor<8x64xbf16>, %w: tensor<128x64xbf16>) -> tensor<8x2xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8x128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x128xf32>) -> tensor<8x128xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %w : tensor<8x64xbf16>, tensor<128x64xbf16>) outs(%z : tensor<8x128xf32>) -> tensor<8x128xf32>
  %v = tensor.expand_shape %y [[0], [1, 2]] output_shape [8, 2, 64] : tensor<8x128xf32> into tensor<8x2x64xf32>
  %ea = tensor.empty() : tensor<8x2xf32>
  %za = linalg.fill ins(%one : f32) outs(%ea : tensor<8x2xf32>) -> tensor<8x2xf32>
  %p = linalg.generic {indexing_maps = [#id3, #group2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<8x2x64xf32>) outs(%za : tensor<8x2xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.mulf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8x2xf32>
  return %p : tensor<8x2xf32>
}
