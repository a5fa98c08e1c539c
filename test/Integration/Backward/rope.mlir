// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused" | %differential | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused" --canonicalize | %differential | %cpu-runner | FileCheck %s

// RoPE backward derived from the fused projection (rotate_half, 2 heads of
// 8, cos / sin tables as periodic inputs): the adjoint of the pair_map is a
// pair_map applying the transposed rotation to the upstream gradient in the
// adjoint GEMM's epilogue. The tables are constants to the derivative (no
// gradient). Against the transposed rotation written out per element.
// Gradients: dx, dW. The second run canonicalizes the derived program first:
// the adjoint's pair_map then drops the table gradients nobody reads and, with
// them, its read of the accumulator, and the gradients are the same.

// CHECK-COUNT-2: coda-check ok

func.func @forward(%x: tensor<5x6xf32>, %w: tensor<16x6xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>) -> tensor<5x16xf32> {
  %e = tensor.empty() : tensor<5x16xf32>
  %q = coda.gemm %x, %w transpose_b : tensor<5x6xf32>, tensor<16x6xf32>
      epilogue(%acc, periodic %c = %cos : tensor<5x8xf32>, periodic %s = %sin : tensor<5x8xf32>)
      outs(%e : tensor<5x16xf32>) {
    %r = coda.pair_map stride 4 (%a, %b) = %acc, (%c0, %c1) = %c, (%s0, %s1) = %s : f32, f32, f32 -> f32 {
      %nb = arith.negf %b : f32
      %ac = arith.mulf %a, %c0 : f32
      %bs = arith.mulf %nb, %s0 : f32
      %y0 = arith.addf %ac, %bs : f32
      %bc = arith.mulf %b, %c1 : f32
      %as = arith.mulf %a, %s1 : f32
      %y1 = arith.addf %bc, %as : f32
      coda.yield %y0, %y1 : f32, f32
    }
    coda.yield %r : f32
  }
  return %q : tensor<5x16xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#mk = affine_map<(m, n, k) -> (m, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>

func.func @reference(%x: tensor<5x6xf32>, %w: tensor<16x6xf32>, %cos: tensor<5x8xf32>, %sin: tensor<5x8xf32>,
                     %dq: tensor<5x16xf32>) -> (tensor<5x6xf32>, tensor<16x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x16xf32>
  // Column n = 8 h + i of head h: for i < 4 (first of its pair, partner
  // p = n + 4) dacc = dq[n] cos[i] + dq[p] sin[i + 4]; for i >= 4 (second,
  // partner p = n - 4) dacc = dq[n] cos[i] - dq[p] sin[i - 4].
  %dacc = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<5x16xf32>) {
  ^bb0(%out: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %i = arith.remui %n, %c8 : index
    %first = arith.cmpi ult, %i, %c4 : index
    %up = arith.addi %n, %c4 : index
    %down = arith.subi %n, %c4 : index
    %p = arith.select %first, %up, %down : index
    %iup = arith.addi %i, %c4 : index
    %idown = arith.subi %i, %c4 : index
    %ip = arith.select %first, %iup, %idown : index
    %gn = tensor.extract %dq[%m, %n] : tensor<5x16xf32>
    %gp = tensor.extract %dq[%m, %p] : tensor<5x16xf32>
    %ci = tensor.extract %cos[%m, %i] : tensor<5x8xf32>
    %sp = tensor.extract %sin[%m, %ip] : tensor<5x8xf32>
    %a = arith.mulf %gn, %ci : f32
    %b = arith.mulf %gp, %sp : f32
    %plus = arith.addf %a, %b : f32
    %minus = arith.subf %a, %b : f32
    %r = arith.select %first, %plus, %minus : f32
    linalg.yield %r : f32
  } -> tensor<5x16xf32>
  %ex = tensor.empty() : tensor<5x6xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<5x6xf32>) -> tensor<5x6xf32>
  %dx = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %w : tensor<5x16xf32>, tensor<16x6xf32>) outs(%zx : tensor<5x6xf32>) {
  ^bb0(%g: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %g, %wv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<5x6xf32>
  %ew = tensor.empty() : tensor<16x6xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<16x6xf32>) -> tensor<16x6xf32>
  %dw = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %x : tensor<5x16xf32>, tensor<5x6xf32>) outs(%zw : tensor<16x6xf32>) {
  ^bb0(%g: f32, %xv: f32, %acc: f32):
    %p = arith.mulf %g, %xv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x6xf32>
  return %dx, %dw : tensor<5x6xf32>, tensor<16x6xf32>
}
