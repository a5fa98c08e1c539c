// RUN: %differential %s | %cpu-runner | FileCheck %s

// Cross-entropy without materializing logits: the LM-head GEMM emits per-tile
// log-sum-exp partials and the target logit; the finish computes
// loss_m = LSE_m - logit[m, t_m]. Against log_softmax + gather over the full
// logits matrix. Vocabulary 90 with tiles of 32 (a short last tile).

// CHECK: coda-check ok: 23 elements

func.func @fused(%x: tensor<23x16xf32>, %w: tensor<90x16xf32>, %t: tensor<23xi64>) -> tensor<23xf32> {
  %zero = arith.constant 0.0 : f32
  %pE = tensor.empty() : tensor<23x3xf32>
  %vE = tensor.empty() : tensor<23xf32>
  %picked0 = linalg.fill ins(%zero : f32) outs(%vE : tensor<23xf32>) -> tensor<23xf32>
  %lp, %picked = coda.gemm %x, %w transpose_b : tensor<23x16xf32>, tensor<90x16xf32>
      epilogue(%acc, row %target = %t : tensor<23xi64>) outs(%pE, %picked0 : tensor<23x3xf32>, tensor<23xf32>) {
    %l = coda.row_reduce logsumexp %acc tile 32 : f32
    %s = coda.row_select %acc at %target : f32, i64
    coda.yield %l, %s : !coda.partial<f32>, !coda.row<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<23x3xf32> outs(%vE : tensor<23xf32>)
  %loss = linalg.sub ins(%lse, %picked : tensor<23xf32>, tensor<23xf32>) outs(%vE : tensor<23xf32>) -> tensor<23xf32>
  return %loss : tensor<23xf32>
}

func.func @reference(%x: tensor<23x16xf32>, %w: tensor<90x16xf32>, %t: tensor<23xi64> {coda_test.range = array<i64: 0, 90>})
    -> tensor<23xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<23x90xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<23x90xf32>) -> tensor<23x90xf32>
  %wtE = tensor.empty() : tensor<16x90xf32>
  %wt = linalg.transpose ins(%w : tensor<90x16xf32>) outs(%wtE : tensor<16x90xf32>) permutation = [1, 0]
  %logits = linalg.matmul ins(%x, %wt : tensor<23x16xf32>, tensor<16x90xf32>) outs(%z : tensor<23x90xf32>) -> tensor<23x90xf32>
  %rE = tensor.empty() : tensor<23xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%rE : tensor<23xf32>) -> tensor<23xf32>
  %max = linalg.reduce { arith.maximumf } ins(%logits : tensor<23x90xf32>) outs(%m0 : tensor<23xf32>) dimensions = [1]
  // log_softmax = logits - max - log(sum(exp(logits - max))), then -logp[t].
  %loss = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%max, %t : tensor<23xf32>, tensor<23xi64>) outs(%rE : tensor<23xf32>) {
  ^bb0(%mx: f32, %target: i64, %out: f32):
    %m = linalg.index 0 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c90 = arith.constant 90 : index
    %sum = scf.for %n = %c0 to %c90 step %c1 iter_args(%s = %zero) -> (f32) {
      %v = tensor.extract %logits[%m, %n] : tensor<23x90xf32>
      %d = arith.subf %v, %mx : f32
      %ex = math.exp %d : f32
      %s2 = arith.addf %s, %ex : f32
      scf.yield %s2 : f32
    }
    %ti = arith.index_cast %target : i64 to index
    %lt = tensor.extract %logits[%m, %ti] : tensor<23x90xf32>
    %logsum = math.log %sum : f32
    %shifted = arith.subf %lt, %mx : f32
    %logp = arith.subf %shifted, %logsum : f32
    %nll = arith.negf %logp : f32
    linalg.yield %nll : f32
  } -> tensor<23xf32>
  return %loss : tensor<23xf32>
}
