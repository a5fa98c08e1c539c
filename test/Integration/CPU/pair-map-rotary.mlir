// RUN: %differential %s | %cpu-runner | FileCheck %s

// 2 -> 2 pairwise transform: a rotary embedding (interleaved pairs) with
// per-element cos/sin tiles, against a formulation that reads the partner
// column n xor 1 and picks the sign by parity.

// CHECK: coda-check ok: 1102 elements

func.func @fused(%a: tensor<29x16xf32>, %w: tensor<38x16xf32>, %cos: tensor<29x38xf32>, %sin: tensor<29x38xf32>,
                 %o: tensor<29x38xf32>) -> tensor<29x38xf32> {
  %y = coda.gemm %a, %w transpose_b : tensor<29x16xf32>, tensor<38x16xf32>
      epilogue(%acc, tile %c = %cos : tensor<29x38xf32>, tile %s = %sin : tensor<29x38xf32>)
      outs(%o : tensor<29x38xf32>) {
    %r = coda.pair_map (%x0, %x1) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %s : f32, f32, f32 -> f32 {
      // (y0, y1) = (x0 c - x1 s, x1 c + x0 s), with the angle of the even column.
      %0 = arith.mulf %x0, %c0 : f32
      %1 = arith.mulf %x1, %s0 : f32
      %y0 = arith.subf %0, %1 : f32
      %2 = arith.mulf %x1, %c0 : f32
      %3 = arith.mulf %x0, %s0 : f32
      %y1 = arith.addf %2, %3 : f32
      coda.yield %y0, %y1 : f32, f32
    }
    coda.yield %r : f32
  }
  return %y : tensor<29x38xf32>
}

#id = affine_map<(m, n) -> (m, n)>

func.func @reference(%a: tensor<29x16xf32>, %w: tensor<38x16xf32>, %cos: tensor<29x38xf32>, %sin: tensor<29x38xf32>)
    -> tensor<29x38xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<29x38xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<29x38xf32>) -> tensor<29x38xf32>
  %wt0 = tensor.empty() : tensor<16x38xf32>
  %wt = linalg.transpose ins(%w : tensor<38x16xf32>) outs(%wt0 : tensor<16x38xf32>) permutation = [1, 0]
  %q = linalg.matmul ins(%a, %wt : tensor<29x16xf32>, tensor<16x38xf32>) outs(%z : tensor<29x38xf32>) -> tensor<29x38xf32>
  %y = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<29x38xf32>) {
  ^bb0(%out: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c1 = arith.constant 1 : index
    %partner = arith.xori %n, %c1 : index
    %even = arith.andi %n, %c1 : index
    %isOdd = arith.cmpi eq, %even, %c1 : index
    %base = arith.select %isOdd, %partner, %n : index
    %x = tensor.extract %q[%m, %n] : tensor<29x38xf32>
    %xp = tensor.extract %q[%m, %partner] : tensor<29x38xf32>
    %c = tensor.extract %cos[%m, %base] : tensor<29x38xf32>
    %s = tensor.extract %sin[%m, %base] : tensor<29x38xf32>
    // even: x c - x_partner s; odd: x c + x_partner s
    %xc = arith.mulf %x, %c : f32
    %ps = arith.mulf %xp, %s : f32
    %neg = arith.negf %ps : f32
    %t = arith.select %isOdd, %ps, %neg : f32
    %r = arith.addf %xc, %t : f32
    linalg.yield %r : f32
  } -> tensor<29x38xf32>
  return %y : tensor<29x38xf32>
}
