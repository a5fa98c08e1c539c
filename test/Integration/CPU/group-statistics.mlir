// RUN: %differential %s | %cpu-runner | FileCheck %s

// Every group statistic over 1 x 64 groups of a one-token output with
// N = 160 (a ragged last group of 32 columns): a per-head RMSNorm (the
// group's sum of squares), a softmax over each group (its maximum, then the
// sum of exponentials relative to it: a statistic reading another of the
// same groups), the position of each group's first maximum of values
// rounded down to integers (ties), and each group's minimum, the last two
// written once per group.

// CHECK-COUNT-2: coda-check ok: 160 elements, max abs error 0,
// CHECK-COUNT-2: coda-check ok: 3 elements, max abs error 0,

func.func @fused(%a: tensor<1x12xf32>, %w: tensor<160x12xf32>)
    -> (tensor<1x160xf32>, tensor<1x160xf32>, tensor<1x3xf32>, tensor<1x3xf32>) {
  %e = tensor.empty() : tensor<1x160xf32>
  %g = tensor.empty() : tensor<1x3xf32>
  %norm, %soft, %arg, %min = coda.gemm %a, %w transpose_b : tensor<1x12xf32>, tensor<160x12xf32>
      epilogue(%acc) outs(%e, %e, %g, %g : tensor<1x160xf32>, tensor<1x160xf32>, tensor<1x3xf32>, tensor<1x3xf32>) {
    %sq = arith.mulf %acc, %acc : f32
    %ss = coda.group_reduce sum %sq row group 64 : f32 -> f32
    %width = arith.constant 64.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.divf %ss, %width : f32
    %mse = arith.addf %ms, %eps : f32
    %r = math.rsqrt %mse : f32
    %n = arith.mulf %acc, %r : f32
    %mx = coda.group_reduce max %acc row group 64 : f32 -> f32
    %d = arith.subf %acc, %mx : f32
    %x = math.exp %d : f32
    %sx = coda.group_reduce sum %x row group 64 : f32 -> f32
    %p = arith.divf %x, %sx : f32
    %fl = math.floor %acc : f32
    %am = coda.group_reduce argmax %fl row group 64 : f32 -> index
    %ami = arith.index_cast %am : index to i64
    %amf = arith.sitofp %ami : i64 to f32
    %amv = coda.group_value %amf row group 64 : f32
    %mn = coda.group_reduce min %acc row group 64 : f32 -> f32
    %mnv = coda.group_value %mn row group 64 : f32
    coda.yield %n, %p, %amv, %mnv : f32, f32, !coda.grouped<f32>, !coda.grouped<f32>
  }
  return %norm, %soft, %arg, %min : tensor<1x160xf32>, tensor<1x160xf32>, tensor<1x3xf32>, tensor<1x3xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#group = affine_map<(m, n) -> (m, n floordiv 64)>
#gid = affine_map<(m, g) -> (m, g)>

func.func @reference(%a: tensor<1x12xf32>, %w: tensor<160x12xf32>)
    -> (tensor<1x160xf32>, tensor<1x160xf32>, tensor<1x3xf32>, tensor<1x3xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %pinf = arith.constant 0x7F800000 : f32
  %e = tensor.empty() : tensor<1x160xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x160xf32>) -> tensor<1x160xf32>
  %wt0 = tensor.empty() : tensor<12x160xf32>
  %wt = linalg.transpose ins(%w : tensor<160x12xf32>) outs(%wt0 : tensor<12x160xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%a, %wt : tensor<1x12xf32>, tensor<12x160xf32>) outs(%z : tensor<1x160xf32>) -> tensor<1x160xf32>
  %ge = tensor.empty() : tensor<1x3xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%ge : tensor<1x3xf32>) -> tensor<1x3xf32>
  %gn = linalg.fill ins(%ninf : f32) outs(%ge : tensor<1x3xf32>) -> tensor<1x3xf32>
  %gp = linalg.fill ins(%pinf : f32) outs(%ge : tensor<1x3xf32>) -> tensor<1x3xf32>
  // RMSNorm per group of 64.
  %ss = linalg.generic {indexing_maps = [#id, #group], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<1x160xf32>) outs(%gz : tensor<1x3xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<1x3xf32>
  %norm = linalg.generic {indexing_maps = [#id, #group, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %ss : tensor<1x160xf32>, tensor<1x3xf32>) outs(%e : tensor<1x160xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %width = arith.constant 64.0 : f32
    %eps = arith.constant 1.0e-6 : f32
    %ms = arith.divf %s, %width : f32
    %mse = arith.addf %ms, %eps : f32
    %r = math.rsqrt %mse : f32
    %n = arith.mulf %x, %r : f32
    linalg.yield %n : f32
  } -> tensor<1x160xf32>
  // Softmax per group.
  %mx = linalg.generic {indexing_maps = [#id, #group], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<1x160xf32>) outs(%gn : tensor<1x3xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.maximumf %acc, %x : f32
    linalg.yield %m : f32
  } -> tensor<1x3xf32>
  %sx = linalg.generic {indexing_maps = [#id, #group, #group], iterator_types = ["parallel", "reduction"]}
      ins(%y, %mx : tensor<1x160xf32>, tensor<1x3xf32>) outs(%gz : tensor<1x3xf32>) {
  ^bb0(%x: f32, %m: f32, %acc: f32):
    %d = arith.subf %x, %m : f32
    %ex = math.exp %d : f32
    %s = arith.addf %acc, %ex : f32
    linalg.yield %s : f32
  } -> tensor<1x3xf32>
  %soft = linalg.generic {indexing_maps = [#id, #group, #group, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %mx, %sx : tensor<1x160xf32>, tensor<1x3xf32>, tensor<1x3xf32>) outs(%e : tensor<1x160xf32>) {
  ^bb0(%x: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %x, %m : f32
    %ex = math.exp %d : f32
    %p = arith.divf %ex, %s : f32
    linalg.yield %p : f32
  } -> tensor<1x160xf32>
  // First maximum of floor(y) per group, by position over the whole row.
  %ie = tensor.empty() : tensor<1x3xf32>
  %best:2 = linalg.generic {indexing_maps = [#id, #group, #group], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<1x160xf32>) outs(%gn, %gz : tensor<1x3xf32>, tensor<1x3xf32>) {
  ^bb0(%x: f32, %bv: f32, %bi: f32):
    %n = linalg.index 1 : index
    %ni = arith.index_cast %n : index to i64
    %nf = arith.sitofp %ni : i64 to f32
    %fl = math.floor %x : f32
    %gt = arith.cmpf ogt, %fl, %bv : f32
    %v = arith.select %gt, %fl, %bv : f32
    %i = arith.select %gt, %nf, %bi : f32
    linalg.yield %v, %i : f32, f32
  } -> (tensor<1x3xf32>, tensor<1x3xf32>)
  // A group whose values are all -inf keeps its first position; none is.
  %min = linalg.generic {indexing_maps = [#id, #group], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<1x160xf32>) outs(%gp : tensor<1x3xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.minimumf %acc, %x : f32
    linalg.yield %m : f32
  } -> tensor<1x3xf32>
  return %norm, %soft, %best#1, %min : tensor<1x160xf32>, tensor<1x160xf32>, tensor<1x3xf32>, tensor<1x3xf32>
}
