// RUN: %differential %s | %cpu-runner | FileCheck %s

// RoPE as a Llama QKV epilogue computes it without tables: the angle of pair
// j at token m is pos[m] * inv_freq[j]. Positions arrive as a row input,
// inverse frequencies (repeated for both columns of a pair) as a column input,
// cos/sin are evaluated in the epilogue and the pair rotated after the
// deferred norm scale. Against torch-style precomputed cos/sin tables and
// rotate-by-partner over the projected q.

// CHECK: coda-check ok: 1008 elements

func.func @fused(%x: tensor<21x16xf32>, %w: tensor<48x16xf32>, %r: tensor<21xf32>, %pos: tensor<21xf32>,
                 %freq: tensor<48xf32>, %o: tensor<21x48xf32>) -> tensor<21x48xf32> {
  %q = coda.gemm %x, %w transpose_b : tensor<21x16xf32>, tensor<48x16xf32>
      epilogue(%acc, row %rv = %r : tensor<21xf32>, row %p = %pos : tensor<21xf32>, col %f = %freq : tensor<48xf32>)
      outs(%o : tensor<21x48xf32>) {
    %s = arith.mulf %acc, %rv : f32
    %angle = arith.mulf %p, %f : f32
    %c = math.cos %angle : f32
    %sn = math.sin %angle : f32
    %y = coda.pair_map (%x0, %x1) = %s, (%c0, %c1) = %c, (%s0, %s1) = %sn : f32, f32, f32 -> f32 {
      %0 = arith.mulf %x0, %c0 : f32
      %1 = arith.mulf %x1, %s0 : f32
      %y0 = arith.subf %0, %1 : f32
      %2 = arith.mulf %x1, %c0 : f32
      %3 = arith.mulf %x0, %s0 : f32
      %y1 = arith.addf %2, %3 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    coda.yield %y : f32
  }
  return %q : tensor<21x48xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%x: tensor<21x16xf32>, %w: tensor<48x16xf32>, %r: tensor<21xf32>, %pos: tensor<21xf32>,
                     %freq: tensor<48xf32>) -> tensor<21x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<21x48xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<21x48xf32>) -> tensor<21x48xf32>
  // Normalize rows, then project.
  %xe = tensor.empty() : tensor<21x16xf32>
  %xn = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %r : tensor<21x16xf32>, tensor<21xf32>) outs(%xe : tensor<21x16xf32>) {
  ^bb0(%v: f32, %s: f32, %out: f32):
    %m = arith.mulf %v, %s : f32
    linalg.yield %m : f32
  } -> tensor<21x16xf32>
  %wtE = tensor.empty() : tensor<16x48xf32>
  %wt = linalg.transpose ins(%w : tensor<48x16xf32>) outs(%wtE : tensor<16x48xf32>) permutation = [1, 0]
  %q = linalg.matmul ins(%xn, %wt : tensor<21x16xf32>, tensor<16x48xf32>) outs(%z : tensor<21x48xf32>) -> tensor<21x48xf32>
  // Tables: angle = outer(pos, inv_freq), then cos and sin.
  %angles = linalg.generic {indexing_maps = [#row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%pos, %freq : tensor<21xf32>, tensor<48xf32>) outs(%e : tensor<21x48xf32>) {
  ^bb0(%p: f32, %f: f32, %out: f32):
    %a = arith.mulf %p, %f : f32
    linalg.yield %a : f32
  } -> tensor<21x48xf32>
  %cos = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%angles : tensor<21x48xf32>) outs(%e : tensor<21x48xf32>) {
  ^bb0(%a: f32, %out: f32):
    %c = math.cos %a : f32
    linalg.yield %c : f32
  } -> tensor<21x48xf32>
  %sin = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%angles : tensor<21x48xf32>) outs(%e : tensor<21x48xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.sin %a : f32
    linalg.yield %s : f32
  } -> tensor<21x48xf32>
  // q * cos + rotate_pairs(q) * sin, rotate_pairs(q)[2j] = -q[2j+1], [2j+1] = q[2j];
  // the angle is the pair's even column's.
  %y = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<21x48xf32>) {
  ^bb0(%out: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c1 = arith.constant 1 : index
    %odd = arith.andi %n, %c1 : index
    %isOdd = arith.cmpi eq, %odd, %c1 : index
    %partner = arith.xori %n, %c1 : index
    %even = arith.subi %n, %odd : index
    %qv = tensor.extract %q[%m, %n] : tensor<21x48xf32>
    %qp = tensor.extract %q[%m, %partner] : tensor<21x48xf32>
    %c = tensor.extract %cos[%m, %even] : tensor<21x48xf32>
    %s = tensor.extract %sin[%m, %even] : tensor<21x48xf32>
    %nqp = arith.negf %qp : f32
    %rot = arith.select %isOdd, %qp, %nqp : f32
    %a = arith.mulf %qv, %c : f32
    %b = arith.mulf %rot, %s : f32
    %res = arith.addf %a, %b : f32
    linalg.yield %res : f32
  } -> tensor<21x48xf32>
  return %y : tensor<21x48xf32>
}
