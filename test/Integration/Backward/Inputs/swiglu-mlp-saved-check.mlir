// The training step of swiglu-mlp-saved.mlir (appended to its derived
// functions): @forward saves, @backward reads what it saved.

func.func @fused(%x: tensor<12x8xf32>, %wgu: tensor<10x8xf32>, %wd: tensor<6x5xf32>, %dz: tensor<12x6xf32>)
    -> (tensor<12x8xf32>, tensor<10x8xf32>, tensor<6x5xf32>) {
  %z, %h, %g, %u = func.call @forward(%x, %wgu, %wd)
      : (tensor<12x8xf32>, tensor<10x8xf32>, tensor<6x5xf32>)
     -> (tensor<12x6xf32>, tensor<12x5xf32>, tensor<12x5xf32>, tensor<12x5xf32>)
  %dx, %dwgu, %dwd = func.call @backward(%x, %wgu, %wd, %h, %g, %u, %dz)
      : (tensor<12x8xf32>, tensor<10x8xf32>, tensor<6x5xf32>, tensor<12x5xf32>, tensor<12x5xf32>,
         tensor<12x5xf32>, tensor<12x6xf32>) -> (tensor<12x8xf32>, tensor<10x8xf32>, tensor<6x5xf32>)
  return %dx, %dwgu, %dwd : tensor<12x8xf32>, tensor<10x8xf32>, tensor<6x5xf32>
}

#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>

func.func @reference(%x: tensor<12x8xf32>, %wgu: tensor<10x8xf32>, %wd: tensor<6x5xf32>, %dz: tensor<12x6xf32>)
    -> (tensor<12x8xf32>, tensor<10x8xf32>, tensor<6x5xf32>) {
  %zero = arith.constant 0.0 : f32
  // acc = x Wgu^T: column 2j the gate g, 2j + 1 the up value u of feature j.
  %e10 = tensor.empty() : tensor<12x10xf32>
  %f10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<12x10xf32>) -> tensor<12x10xf32>
  %acc = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wgu : tensor<12x8xf32>, tensor<10x8xf32>) outs(%f10 : tensor<12x10xf32>) {
  ^bb0(%a: f32, %b: f32, %s: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<12x10xf32>
  // h = silu(g) u.
  %e5 = tensor.empty() : tensor<12x5xf32>
  %h = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e5 : tensor<12x5xf32>) {
  ^bb0(%out: f32):
    %m = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %one = arith.constant 1.0 : f32
    %gi = arith.muli %j, %c2 : index
    %ui = arith.addi %gi, %c1 : index
    %g = tensor.extract %acc[%m, %gi] : tensor<12x10xf32>
    %u = tensor.extract %acc[%m, %ui] : tensor<12x10xf32>
    %ng = arith.negf %g : f32
    %ex = math.exp %ng : f32
    %den = arith.addf %one, %ex : f32
    %sig = arith.divf %one, %den : f32
    %silu = arith.mulf %g, %sig : f32
    %y = arith.mulf %silu, %u : f32
    linalg.yield %y : f32
  } -> tensor<12x5xf32>
  // dh = dz Wd.
  %f5 = linalg.fill ins(%zero : f32) outs(%e5 : tensor<12x5xf32>) -> tensor<12x5xf32>
  %dh = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dz, %wd : tensor<12x6xf32>, tensor<6x5xf32>) outs(%f5 : tensor<12x5xf32>) {
  ^bb0(%a: f32, %b: f32, %s: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<12x5xf32>
  // dAcc: dh u silu'(g) at 2j, dh silu(g) at 2j + 1.
  %dacc = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e10 : tensor<12x10xf32>) {
  ^bb0(%out: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %one = arith.constant 1.0 : f32
    %j = arith.divui %n, %c2 : index
    %gi = arith.muli %j, %c2 : index
    %ui = arith.addi %gi, %c1 : index
    %isg = arith.cmpi eq, %n, %gi : index
    %g = tensor.extract %acc[%m, %gi] : tensor<12x10xf32>
    %u = tensor.extract %acc[%m, %ui] : tensor<12x10xf32>
    %dhv = tensor.extract %dh[%m, %j] : tensor<12x5xf32>
    %ng = arith.negf %g : f32
    %ex = math.exp %ng : f32
    %den = arith.addf %one, %ex : f32
    %sig = arith.divf %one, %den : f32
    %silu = arith.mulf %g, %sig : f32
    %oms = arith.subf %one, %sig : f32
    %gs = arith.mulf %g, %oms : f32
    %t = arith.addf %one, %gs : f32
    %dsilu = arith.mulf %sig, %t : f32
    %a = arith.mulf %u, %dsilu : f32
    %dg = arith.mulf %dhv, %a : f32
    %du = arith.mulf %dhv, %silu : f32
    %v = arith.select %isg, %dg, %du : f32
    linalg.yield %v : f32
  } -> tensor<12x10xf32>
  // dx = dAcc Wgu; dWgu = dAcc^T x; dWd = dz^T h.
  %e8 = tensor.empty() : tensor<12x8xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<12x8xf32>) -> tensor<12x8xf32>
  %dx = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %wgu : tensor<12x10xf32>, tensor<10x8xf32>) outs(%f8 : tensor<12x8xf32>) {
  ^bb0(%a: f32, %b: f32, %s: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<12x8xf32>
  %ew = tensor.empty() : tensor<10x8xf32>
  %fw = linalg.fill ins(%zero : f32) outs(%ew : tensor<10x8xf32>) -> tensor<10x8xf32>
  %dwgu = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %x : tensor<12x10xf32>, tensor<12x8xf32>) outs(%fw : tensor<10x8xf32>) {
  ^bb0(%a: f32, %b: f32, %s: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<10x8xf32>
  %ed = tensor.empty() : tensor<6x5xf32>
  %fd = linalg.fill ins(%zero : f32) outs(%ed : tensor<6x5xf32>) -> tensor<6x5xf32>
  %dwd = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dz, %h : tensor<12x6xf32>, tensor<12x5xf32>) outs(%fd : tensor<6x5xf32>) {
  ^bb0(%a: f32, %b: f32, %s: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %s, %p : f32
    linalg.yield %t : f32
  } -> tensor<6x5xf32>
  return %dx, %dwgu, %dwd : tensor<12x8xf32>, tensor<10x8xf32>, tensor<6x5xf32>
}
