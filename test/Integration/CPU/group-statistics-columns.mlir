// RUN: %differential %s | %cpu-runner | FileCheck %s

// Groups of 32 x 1 down the columns, M = 45 (a ragged last group of 13
// rows): each value divided by its group's absolute maximum, and that
// maximum written once per group (a 128 x 1 quantization's shape, smaller).

// CHECK: coda-check ok: 1080 elements
// CHECK: coda-check ok: 48 elements

func.func @fused(%a: tensor<45x10xf32>, %b: tensor<10x24xf32>)
    -> (tensor<45x24xf32>, tensor<2x24xf32>) {
  %e = tensor.empty() : tensor<45x24xf32>
  %g = tensor.empty() : tensor<2x24xf32>
  %scaled, %amax = coda.gemm %a, %b : tensor<45x10xf32>, tensor<10x24xf32>
      epilogue(%acc) outs(%e, %g : tensor<45x24xf32>, tensor<2x24xf32>) {
    %abs = math.absf %acc : f32
    %mx = coda.group_reduce max %abs col group 32 : f32 -> f32
    %s = arith.divf %acc, %mx : f32
    %mv = coda.group_value %mx col group 32 : f32
    coda.yield %s, %mv : f32, !coda.grouped<f32>
  }
  return %scaled, %amax : tensor<45x24xf32>, tensor<2x24xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#group = affine_map<(m, n) -> (m floordiv 32, n)>

func.func @reference(%a: tensor<45x10xf32>, %b: tensor<10x24xf32>)
    -> (tensor<45x24xf32>, tensor<2x24xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<45x24xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<45x24xf32>) -> tensor<45x24xf32>
  %y = linalg.matmul ins(%a, %b : tensor<45x10xf32>, tensor<10x24xf32>) outs(%z : tensor<45x24xf32>) -> tensor<45x24xf32>
  %ge = tensor.empty() : tensor<2x24xf32>
  %gn = linalg.fill ins(%ninf : f32) outs(%ge : tensor<2x24xf32>) -> tensor<2x24xf32>
  %amax = linalg.generic {indexing_maps = [#id, #group], iterator_types = ["reduction", "parallel"]}
      ins(%y : tensor<45x24xf32>) outs(%gn : tensor<2x24xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %abs = math.absf %x : f32
    %m = arith.maximumf %acc, %abs : f32
    linalg.yield %m : f32
  } -> tensor<2x24xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #group, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %amax : tensor<45x24xf32>, tensor<2x24xf32>) outs(%e : tensor<45x24xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %s = arith.divf %x, %m : f32
    linalg.yield %s : f32
  } -> tensor<45x24xf32>
  return %scaled, %amax : tensor<45x24xf32>, tensor<2x24xf32>
}
