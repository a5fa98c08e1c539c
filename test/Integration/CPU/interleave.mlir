// RUN: %differential %s | %cpu-runner | FileCheck %s

// Two values per element into an M x 2N output: column 2n gets silu(acc),
// column 2n + 1 gets acc * r[m]; against the two products computed apart
// and interleaved by strided inserts.

// CHECK: coda-check ok: 260 elements

func.func @fused(%x: tensor<13x6xf32>, %w: tensor<6x10xf32>, %r: tensor<13xf32>, %o: tensor<13x20xf32>) -> tensor<13x20xf32> {
  %y = coda.gemm %x, %w : tensor<13x6xf32>, tensor<6x10xf32>
      epilogue(%acc, row %rv = %r : tensor<13xf32>) outs(%o : tensor<13x20xf32>) {
    %one = arith.constant 1.0 : f32
    %n = arith.negf %acc : f32
    %e = math.exp %n : f32
    %d = arith.addf %one, %e : f32
    %silu = arith.divf %acc, %d : f32
    %s = arith.mulf %acc, %rv : f32
    %both = coda.interleave %silu, %s : f32
    coda.yield %both : !coda.interleaved<f32>
  }
  return %y : tensor<13x20xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>

func.func @reference(%x: tensor<13x6xf32>, %w: tensor<6x10xf32>, %r: tensor<13xf32>) -> tensor<13x20xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x10xf32>) -> tensor<13x10xf32>
  %acc = linalg.matmul ins(%x, %w : tensor<13x6xf32>, tensor<6x10xf32>) outs(%z : tensor<13x10xf32>) -> tensor<13x10xf32>
  %silu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : tensor<13x10xf32>) outs(%e : tensor<13x10xf32>) {
  ^bb0(%a: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %a : f32
    %ex = math.exp %n : f32
    %d = arith.addf %one, %ex : f32
    %q = arith.divf %one, %d : f32
    %v = arith.mulf %a, %q : f32
    linalg.yield %v : f32
  } -> tensor<13x10xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %r : tensor<13x10xf32>, tensor<13xf32>) outs(%e : tensor<13x10xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %v = arith.mulf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<13x10xf32>
  %o = tensor.empty() : tensor<13x20xf32>
  %even = tensor.insert_slice %silu into %o[0, 0] [13, 10] [1, 2] : tensor<13x10xf32> into tensor<13x20xf32>
  %both = tensor.insert_slice %scaled into %even[0, 1] [13, 10] [1, 2] : tensor<13x10xf32> into tensor<13x20xf32>
  return %both : tensor<13x20xf32>
}
