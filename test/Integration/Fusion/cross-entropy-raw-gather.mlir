// RUN: coda-opt %s --coda-test-differential-main="fuse fuse-tile=64" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse="tile=64" | FileCheck %s --check-prefix=FUSED --implicit-check-not="tensor<37x200xf32>"
// RUN: coda-opt %s --coda-fuse=report -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Cross-entropy as a frontend lowers it: logits from a matmul, their row
// maximum, the sum of exp(logits - max), and in the loss's own per-row op
// the target's logit gathered from the raw logits (ignore index -100, the
// mean over the valid tokens). Vocabulary 200: no tile divides it. The
// gather becomes a row_select in the GEMM's epilogue beside the two
// reductions, and the 37 x 200 logits are never written.

// CHECK: coda-check ok: 1 elements

// FUSED: coda.gemm
// FUSED-DAG: coda.row_reduce max
// FUSED-DAG: coda.row_select
// REPORT: coda fusion report: @reference
// REPORT-NOT: gathers from

#rows = affine_map<(m, n) -> (m)>
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m) -> (m)>
#all = affine_map<(m) -> ()>

func.func @reference(%h: tensor<37x24xf32>, %w: tensor<200x24xf32>,
                     %drawn: tensor<37xi64> {coda_test.range = array<i64: -60, 200>})
    -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  // Targets: a class, or the ignore index -100 (drawn negative).
  %te = tensor.empty() : tensor<37xi64>
  %t = linalg.generic {indexing_maps = [#row, #row], iterator_types = ["parallel"]}
      ins(%drawn : tensor<37xi64>) outs(%te : tensor<37xi64>) {
  ^bb0(%d: i64, %o: i64):
    %c0 = arith.constant 0 : i64
    %ignore = arith.constant -100 : i64
    %neg = arith.cmpi slt, %d, %c0 : i64
    %v = arith.select %neg, %ignore, %d : i64
    linalg.yield %v : i64
  } -> tensor<37xi64>
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<37x200xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<37x200xf32>) -> tensor<37x200xf32>
  %wt0 = tensor.empty() : tensor<24x200xf32>
  %wt = linalg.transpose ins(%w : tensor<200x24xf32>) outs(%wt0 : tensor<24x200xf32>) permutation = [1, 0]
  %logits = linalg.matmul ins(%h, %wt : tensor<37x24xf32>, tensor<24x200xf32>) outs(%z : tensor<37x200xf32>) -> tensor<37x200xf32>
  %re = tensor.empty() : tensor<37xf32>
  %mx0 = linalg.fill ins(%ninf : f32) outs(%re : tensor<37xf32>) -> tensor<37xf32>
  %mx = linalg.generic {indexing_maps = [#id, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<37x200xf32>) outs(%mx0 : tensor<37xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.maximumf %acc, %x : f32
    linalg.yield %m : f32
  } -> tensor<37xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%re : tensor<37xf32>) -> tensor<37xf32>
  %se = linalg.generic {indexing_maps = [#id, #rows, #rows], iterator_types = ["parallel", "reduction"]}
      ins(%logits, %mx : tensor<37x200xf32>, tensor<37xf32>) outs(%s0 : tensor<37xf32>) {
  ^bb0(%x: f32, %m: f32, %acc: f32):
    %d = arith.subf %x, %m : f32
    %ex = math.exp %d : f32
    %s = arith.addf %acc, %ex : f32
    linalg.yield %s : f32
  } -> tensor<37xf32>
  // Per token: lse - logit[target] where the target is not -100.
  %loss = linalg.generic {indexing_maps = [#row, #row, #row, #row], iterator_types = ["parallel"]}
      ins(%t, %mx, %se : tensor<37xi64>, tensor<37xf32>, tensor<37xf32>) outs(%re : tensor<37xf32>) {
  ^bb0(%target: i64, %m: f32, %s: f32, %o: f32):
    %row = linalg.index 0 : index
    %ignore = arith.constant -100 : i64
    %c0 = arith.constant 0 : i64
    %valid = arith.cmpi ne, %target, %ignore : i64
    %safe = arith.select %valid, %target, %c0 : i64
    %col = arith.index_cast %safe : i64 to index
    %x = tensor.extract %logits[%row, %col] : tensor<37x200xf32>
    %lg = math.log %s : f32
    %lse = arith.addf %lg, %m : f32
    %l = arith.subf %lse, %x : f32
    %r = arith.select %valid, %l, %zero : f32
    linalg.yield %r : f32
  } -> tensor<37xf32>
  // The mean over the valid tokens.
  %se0 = tensor.empty() : tensor<f32>
  %sum0 = linalg.fill ins(%zero : f32) outs(%se0 : tensor<f32>) -> tensor<f32>
  %sums:2 = linalg.generic {indexing_maps = [#row, #row, #all, #all], iterator_types = ["reduction"]}
      ins(%loss, %t : tensor<37xf32>, tensor<37xi64>) outs(%sum0, %sum0 : tensor<f32>, tensor<f32>) {
  ^bb0(%l: f32, %target: i64, %acc: f32, %n: f32):
    %ignore = arith.constant -100 : i64
    %one = arith.constant 1.0 : f32
    %valid = arith.cmpi ne, %target, %ignore : i64
    %c = arith.select %valid, %one, %zero : f32
    %a = arith.addf %acc, %l : f32
    %k = arith.addf %n, %c : f32
    linalg.yield %a, %k : f32, f32
  } -> (tensor<f32>, tensor<f32>)
  %mean = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}
      ins(%sums#0, %sums#1 : tensor<f32>, tensor<f32>) outs(%se0 : tensor<f32>) {
  ^bb0(%a: f32, %k: f32, %o: f32):
    %q = arith.divf %a, %k : f32
    linalg.yield %q : f32
  } -> tensor<f32>
  return %mean : tensor<f32>
}
