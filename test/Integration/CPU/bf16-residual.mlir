// RUN: coda-opt %s --coda-test-differential-main="rtol=0 atol=0" | %cpu-runner | FileCheck %s

// bf16 operands and residual, a bf16 tile output and an f32 copy of the
// pre-rounding value. The unfused program rounds at the same points, so the
// two must agree exactly.

// CHECK: coda-check ok: 2208 elements, max abs error 0
// CHECK: coda-check ok: 2208 elements, max abs error 0

func.func @fused(%a: tensor<48x40xbf16>, %w: tensor<46x40xbf16>, %res: tensor<48x46xbf16>,
                 %o: tensor<48x46xbf16>, %h: tensor<48x46xf32>) -> (tensor<48x46xbf16>, tensor<48x46xf32>) {
  %y, %hf = coda.gemm %a, %w transpose_b : tensor<48x40xbf16>, tensor<46x40xbf16>
      epilogue(%acc, tile %r = %res : tensor<48x46xbf16>)
      outs(%o, %h : tensor<48x46xbf16>, tensor<48x46xf32>) {
    %rf = arith.extf %r : bf16 to f32
    %x = arith.addf %acc, %rf : f32
    %xb = arith.truncf %x : f32 to bf16
    coda.yield %xb, %x : bf16, f32
  }
  return %y, %hf : tensor<48x46xbf16>, tensor<48x46xf32>
}

#id = affine_map<(m, n) -> (m, n)>

func.func @reference(%a: tensor<48x40xbf16>, %w: tensor<46x40xbf16>, %res: tensor<48x46xbf16>)
    -> (tensor<48x46xbf16>, tensor<48x46xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<48x46xf32>
  %eb = tensor.empty() : tensor<48x46xbf16>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<48x46xf32>) -> tensor<48x46xf32>
  %wt0 = tensor.empty() : tensor<40x46xbf16>
  %wt = linalg.transpose ins(%w : tensor<46x40xbf16>) outs(%wt0 : tensor<40x46xbf16>) permutation = [1, 0]
  %mm = linalg.matmul ins(%a, %wt : tensor<48x40xbf16>, tensor<40x46xbf16>) outs(%z : tensor<48x46xf32>) -> tensor<48x46xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %res : tensor<48x46xf32>, tensor<48x46xbf16>) outs(%e : tensor<48x46xf32>) {
  ^bb0(%m: f32, %r: bf16, %out: f32):
    %rf = arith.extf %r : bf16 to f32
    %s = arith.addf %m, %rf : f32
    linalg.yield %s : f32
  } -> tensor<48x46xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<48x46xf32>) outs(%eb : tensor<48x46xbf16>) {
  ^bb0(%v: f32, %out: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<48x46xbf16>
  return %y, %h : tensor<48x46xbf16>, tensor<48x46xf32>
}
