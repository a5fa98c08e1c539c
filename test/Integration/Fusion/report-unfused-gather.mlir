// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s

// A per-row gather from a GEMM's result that cannot become a row_select in
// its epilogue is listed with the reason the gather fusion fails with: here
// two elements per row (a margin between two picked logits), where one
// row_select picks one.

// CHECK-LABEL: coda fusion report: @gather_twice
// CHECK: left: linalg.generic at loc("{{.*}}report-unfused-gather.mlir":[[@LINE+8]]:{{[0-9]+}}) (260 B): reads a coda.gemm's result but stays outside its epilogue: it gathers more than one element per row

func.func @gather_twice(%a: tensor<13x5xf32>, %b: tensor<5x7xf32>, %t: tensor<13xi64>, %u: tensor<13xi64>) -> tensor<13xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x7xf32>) -> tensor<13x7xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<13x5xf32>, tensor<5x7xf32>) outs(%z : tensor<13x7xf32>) -> tensor<13x7xf32>
  %r0 = tensor.empty() : tensor<13xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%t, %u : tensor<13xi64>, tensor<13xi64>) outs(%r0 : tensor<13xf32>) {
  ^bb0(%ti: i64, %ui: i64, %o: f32):
    %m = linalg.index 0 : index
    %j = arith.index_cast %ti : i64 to index
    %k = arith.index_cast %ui : i64 to index
    %x = tensor.extract %mm[%m, %j] : tensor<13x7xf32>
    %y = tensor.extract %mm[%m, %k] : tensor<13x7xf32>
    %s = arith.subf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<13xf32>
  return %r : tensor<13xf32>
}
