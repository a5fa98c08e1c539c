// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused tile=4" | %differential | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-derive-backward="function=forward_sigmoid name=fused tile=4" | %differential | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-derive-backward="function=forward name=backward tile=4 save=1" | sed -e '/^module {$/d' -e '/^}$/d' > %t.saved.mlir
// RUN: cat %t.saved.mlir %S/Inputs/mlp-residual-saved-step.mlir | %differential | %cpu-runner | FileCheck %s

// The derived backward of two chained GEMMs against gradients written out by
// hand. Forward: h = silu(x W1^T); y = (h W2^T) * s[m] + b[n] + r. The
// backward recomputes both accumulators; the first GEMM's SiLU derivative is
// evaluated in an epilogue, s and b get their gradients as row and column
// partials (tile 4, so several per row and column, with tails), r's is dY.
// With save=1 the forward also returns h and the first accumulator, and the
// SiLU derivative is evaluated in the GEMM that produces dh (dAcc2 W2), from
// the saved accumulator (Inputs/mlp-residual-saved-step.mlir runs forward,
// then backward).
// @forward_sigmoid writes the SiLU as x * sigmoid(x), sigmoid(x) =
// 1 / (1 + exp(-x)): the sigmoid's closed derivative s (1 - s) and the
// product's rule (silu's x / (1 + exp(-x)) takes its own, s (1 + x (1 - s))).
// Gradients in argument order: dx, dW1, dW2, dr, ds, db.

// CHECK-COUNT-6: coda-check ok

func.func @forward(%x: tensor<7x5xf32>, %w1: tensor<6x5xf32>, %w2: tensor<9x6xf32>,
                   %r: tensor<7x9xf32>, %s: tensor<7xf32>, %b: tensor<9xf32>) -> tensor<7x9xf32> {
  %hE = tensor.empty() : tensor<7x6xf32>
  %h = coda.gemm %x, %w1 transpose_b : tensor<7x5xf32>, tensor<6x5xf32>
      epilogue(%acc) outs(%hE : tensor<7x6xf32>) {
    %one = arith.constant 1.0 : f32
    %n = arith.negf %acc : f32
    %e = math.exp %n : f32
    %d = arith.addf %one, %e : f32
    %silu = arith.divf %acc, %d : f32
    coda.yield %silu : f32
  }
  %yE = tensor.empty() : tensor<7x9xf32>
  %y = coda.gemm %h, %w2 transpose_b : tensor<7x6xf32>, tensor<9x6xf32>
      epilogue(%acc, tile %rv = %r : tensor<7x9xf32>, row %sv = %s : tensor<7xf32>, col %bv = %b : tensor<9xf32>)
      outs(%yE : tensor<7x9xf32>) {
    %scaled = arith.mulf %acc, %sv : f32
    %biased = arith.addf %scaled, %bv : f32
    %out = arith.addf %biased, %rv : f32
    coda.yield %out : f32
  }
  return %y : tensor<7x9xf32>
}

func.func @forward_sigmoid(%x: tensor<7x5xf32>, %w1: tensor<6x5xf32>, %w2: tensor<9x6xf32>,
                   %r: tensor<7x9xf32>, %s: tensor<7xf32>, %b: tensor<9xf32>) -> tensor<7x9xf32> {
  %hE = tensor.empty() : tensor<7x6xf32>
  %h = coda.gemm %x, %w1 transpose_b : tensor<7x5xf32>, tensor<6x5xf32>
      epilogue(%acc) outs(%hE : tensor<7x6xf32>) {
    %one = arith.constant 1.0 : f32
    %n = arith.negf %acc : f32
    %e = math.exp %n : f32
    %d = arith.addf %one, %e : f32
    %sig = arith.divf %one, %d : f32
    %silu = arith.mulf %acc, %sig : f32
    coda.yield %silu : f32
  }
  %yE = tensor.empty() : tensor<7x9xf32>
  %y = coda.gemm %h, %w2 transpose_b : tensor<7x6xf32>, tensor<9x6xf32>
      epilogue(%acc, tile %rv = %r : tensor<7x9xf32>, row %sv = %s : tensor<7xf32>, col %bv = %b : tensor<9xf32>)
      outs(%yE : tensor<7x9xf32>) {
    %scaled = arith.mulf %acc, %sv : f32
    %biased = arith.addf %scaled, %bv : f32
    %out = arith.addf %biased, %rv : f32
    coda.yield %out : f32
  }
  return %y : tensor<7x9xf32>
}

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%x: tensor<7x5xf32>, %w1: tensor<6x5xf32>, %w2: tensor<9x6xf32>,
                     %r: tensor<7x9xf32>, %s: tensor<7xf32>, %b: tensor<9xf32>, %dy: tensor<7x9xf32>)
    -> (tensor<7x5xf32>, tensor<6x5xf32>, tensor<9x6xf32>, tensor<7x9xf32>, tensor<7xf32>, tensor<9xf32>) {
  %zero = arith.constant 0.0 : f32
  // z1 = x W1^T, h = silu(z1), z2 = h W2^T.
  %e76 = tensor.empty() : tensor<7x6xf32>
  %f76 = linalg.fill ins(%zero : f32) outs(%e76 : tensor<7x6xf32>) -> tensor<7x6xf32>
  %z1 = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w1 : tensor<7x5xf32>, tensor<6x5xf32>) outs(%f76 : tensor<7x6xf32>) {
  ^bb0(%a: f32, %w: f32, %acc: f32):
    %p = arith.mulf %a, %w : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<7x6xf32>
  // sigmoid and silu of z1.
  %sig = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%z1 : tensor<7x6xf32>) outs(%e76 : tensor<7x6xf32>) {
  ^bb0(%z: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %n = arith.negf %z : f32
    %e = math.exp %n : f32
    %d = arith.addf %one, %e : f32
    %q = arith.divf %one, %d : f32
    linalg.yield %q : f32
  } -> tensor<7x6xf32>
  %h = linalg.mul ins(%z1, %sig : tensor<7x6xf32>, tensor<7x6xf32>) outs(%e76 : tensor<7x6xf32>) -> tensor<7x6xf32>
  %e79 = tensor.empty() : tensor<7x9xf32>
  %f79 = linalg.fill ins(%zero : f32) outs(%e79 : tensor<7x9xf32>) -> tensor<7x9xf32>
  %z2 = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%h, %w2 : tensor<7x6xf32>, tensor<9x6xf32>) outs(%f79 : tensor<7x9xf32>) {
  ^bb0(%a: f32, %w: f32, %acc: f32):
    %p = arith.mulf %a, %w : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<7x9xf32>
  // ds[m] = sum_n dy z2; db[n] = sum_m dy; dz2 = dy s[m].
  %e7 = tensor.empty() : tensor<7xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e7 : tensor<7xf32>) -> tensor<7xf32>
  %ds = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %z2 : tensor<7x9xf32>, tensor<7x9xf32>) outs(%f7 : tensor<7xf32>) {
  ^bb0(%g: f32, %z: f32, %acc: f32):
    %p = arith.mulf %g, %z : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<7xf32>
  %e9 = tensor.empty() : tensor<9xf32>
  %f9 = linalg.fill ins(%zero : f32) outs(%e9 : tensor<9xf32>) -> tensor<9xf32>
  %db = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy : tensor<7x9xf32>) outs(%f9 : tensor<9xf32>) {
  ^bb0(%g: f32, %acc: f32):
    %t = arith.addf %acc, %g : f32
    linalg.yield %t : f32
  } -> tensor<9xf32>
  %dz2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : tensor<7x9xf32>, tensor<7xf32>) outs(%e79 : tensor<7x9xf32>) {
  ^bb0(%g: f32, %sv: f32, %o: f32):
    %p = arith.mulf %g, %sv : f32
    linalg.yield %p : f32
  } -> tensor<7x9xf32>
  // dh = dz2 W2; dW2 = dz2^T h.
  %dh = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dz2, %w2 : tensor<7x9xf32>, tensor<9x6xf32>) outs(%f76 : tensor<7x6xf32>) {
  ^bb0(%a: f32, %w: f32, %acc: f32):
    %p = arith.mulf %a, %w : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<7x6xf32>
  %e96 = tensor.empty() : tensor<9x6xf32>
  %f96 = linalg.fill ins(%zero : f32) outs(%e96 : tensor<9x6xf32>) -> tensor<9x6xf32>
  %dw2 = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dz2, %h : tensor<7x9xf32>, tensor<7x6xf32>) outs(%f96 : tensor<9x6xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    %p = arith.mulf %a, %v : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<9x6xf32>
  // dz1 = dh * silu'(z1), silu'(z) = sig(z) (1 + z (1 - sig(z))).
  %dz1 = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dh, %z1, %sig : tensor<7x6xf32>, tensor<7x6xf32>, tensor<7x6xf32>) outs(%e76 : tensor<7x6xf32>) {
  ^bb0(%g: f32, %z: f32, %q: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %c = arith.subf %one, %q : f32
    %zc = arith.mulf %z, %c : f32
    %t = arith.addf %one, %zc : f32
    %dsilu = arith.mulf %q, %t : f32
    %p = arith.mulf %g, %dsilu : f32
    linalg.yield %p : f32
  } -> tensor<7x6xf32>
  // dx = dz1 W1; dW1 = dz1^T x.
  %e75 = tensor.empty() : tensor<7x5xf32>
  %f75 = linalg.fill ins(%zero : f32) outs(%e75 : tensor<7x5xf32>) -> tensor<7x5xf32>
  %dx = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dz1, %w1 : tensor<7x6xf32>, tensor<6x5xf32>) outs(%f75 : tensor<7x5xf32>) {
  ^bb0(%a: f32, %w: f32, %acc: f32):
    %p = arith.mulf %a, %w : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<7x5xf32>
  %e65 = tensor.empty() : tensor<6x5xf32>
  %f65 = linalg.fill ins(%zero : f32) outs(%e65 : tensor<6x5xf32>) -> tensor<6x5xf32>
  %dw1 = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dz1, %x : tensor<7x6xf32>, tensor<7x5xf32>) outs(%f65 : tensor<6x5xf32>) {
  ^bb0(%a: f32, %v: f32, %acc: f32):
    %p = arith.mulf %a, %v : f32
    %t = arith.addf %acc, %p : f32
    linalg.yield %t : f32
  } -> tensor<6x5xf32>
  return %dx, %dw1, %dw2, %dy, %ds, %db
      : tensor<7x5xf32>, tensor<6x5xf32>, tensor<9x6xf32>, tensor<7x9xf32>, tensor<7xf32>, tensor<9xf32>
}
