// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=CHECK-FUSED

// LayerNorm is not a pure row and column scaling ((x - mean) * r * gamma +
// beta): its normalized activations must not be folded into the next GEMM.
// The projection's GELU still joins the epilogue, and the whole program still
// computes what the original does.

// CHECK: coda-check ok: 60 elements

// CHECK-FUSED-LABEL: func.func @reference
// CHECK-FUSED: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK-FUSED: coda.gemm
// CHECK-FUSED-NOT: row %
// CHECK-FUSED: math.tanh

#id = affine_map<(m, k) -> (m, k)>
#row = affine_map<(m, k) -> (m)>
#col = affine_map<(m, k) -> (k)>

func.func @reference(%x: tensor<6x8xf32>, %gamma: tensor<8xf32>, %beta: tensor<8xf32>, %w: tensor<10x8xf32>) -> tensor<6x10xf32> {
  %zero = arith.constant 0.0 : f32
  %rE = tensor.empty() : tensor<6xf32>
  %r0 = linalg.fill ins(%zero : f32) outs(%rE : tensor<6xf32>) -> tensor<6xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<6x8xf32>) outs(%r0 : tensor<6xf32>) {
  ^bb0(%v: f32, %a: f32):
    %s = arith.addf %v, %a : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  %var = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %sum : tensor<6x8xf32>, tensor<6xf32>) outs(%r0 : tensor<6xf32>) {
  ^bb0(%v: f32, %s: f32, %a: f32):
    %k = arith.constant 8.0 : f32
    %mean = arith.divf %s, %k : f32
    %d = arith.subf %v, %mean : f32
    %d2 = arith.mulf %d, %d : f32
    %q = arith.divf %d2, %k : f32
    %acc = arith.addf %q, %a : f32
    linalg.yield %acc : f32
  } -> tensor<6xf32>
  %e = tensor.empty() : tensor<6x8xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %var, %gamma, %beta : tensor<6x8xf32>, tensor<6xf32>, tensor<6xf32>, tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %s: f32, %vr: f32, %g: f32, %b: f32, %o: f32):
    %k = arith.constant 8.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %s, %k : f32
    %d = arith.subf %v, %mean : f32
    %ve = arith.addf %vr, %eps : f32
    %r = math.rsqrt %ve : f32
    %n = arith.mulf %d, %r : f32
    %gn = arith.mulf %n, %g : f32
    %out = arith.addf %gn, %b : f32
    linalg.yield %out : f32
  } -> tensor<6x8xf32>
  %zE = tensor.empty() : tensor<6x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%zE : tensor<6x10xf32>) -> tensor<6x10xf32>
  %wtE = tensor.empty() : tensor<8x10xf32>
  %wt = linalg.transpose ins(%w : tensor<10x8xf32>) outs(%wtE : tensor<8x10xf32>) permutation = [1, 0]
  %mm = linalg.matmul ins(%y, %wt : tensor<6x8xf32>, tensor<8x10xf32>) outs(%z : tensor<6x10xf32>) -> tensor<6x10xf32>
  %act = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<6x10xf32>) outs(%zE : tensor<6x10xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  } -> tensor<6x10xf32>
  return %act : tensor<6x10xf32>
}
