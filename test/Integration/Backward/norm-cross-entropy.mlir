// RUN: coda-opt %s --coda-derive-backward="function=forward name=fused" | %differential | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-derive-backward="function=forward name=backward save=1" | sed -e '/^module {$/d' -e '/^}$/d' > %t.saved.mlir
// RUN: cat %t.saved.mlir %S/Inputs/norm-cross-entropy-saved-check.mlir | %differential | %cpu-runner | FileCheck %s
// RUN: FileCheck %s --check-prefix=SAVED < %t.saved.mlir

// Cross-entropy behind a deferred RMSNorm (coda_torch's
// linear_norm_cross_entropy): the LM head's accumulator scaled by the
// norm's row scale rs before the log-sum-exp partials and the target logit.
// The derived backward's adjoint GEMM recomputes the logits, writes
// rs dlogits as dAcc and reduces rs's gradient, sum_n dlogits (x W^T), as
// row partials. Against the softmax gradient over materialized, scaled
// logits. Gradients in argument order: dx, drs, dW. The GEMM is marked
// coda.save_accumulator: with save=1 (second run) the forward also returns
// its product (before the row scale), and the adjoint reads it instead of
// the product (its own accumulator unread: an epilogue-only kernel).

// SAVED-LABEL: func.func @backward(
//  SAVED-SAME:   %[[X:[^:]*]]: tensor<23x16xf32>, %{{[^:]*}}: tensor<23xf32>, %[[W:[^:]*]]: tensor<90x16xf32>
//  SAVED-SAME:   %[[PRODUCT:[^:]*]]: tensor<23x90xf32>, %{{[^:]*}}: tensor<23xf32>)
//       SAVED:   coda.gemm %[[X]], %[[W]] transpose_b
//  SAVED-NEXT:     epilogue(%[[UNREAD:[a-z0-9_]+]], {{.*}}tile %{{[a-z0-9_]+}} = %[[PRODUCT]] : tensor<23x90xf32>)
//   SAVED-NOT:     %[[UNREAD]]
//       SAVED:     coda.yield

// CHECK-COUNT-3: coda-check ok

func.func @forward(%x: tensor<23x16xf32>, %rs: tensor<23xf32>, %w: tensor<90x16xf32>,
                   %t: tensor<23xi64>) -> tensor<23xf32> {
  %zero = arith.constant 0.0 : f32
  %pE = tensor.empty() : tensor<23x3xf32>
  %vE = tensor.empty() : tensor<23xf32>
  %picked0 = linalg.fill ins(%zero : f32) outs(%vE : tensor<23xf32>) -> tensor<23xf32>
  %lp, %picked = coda.gemm %x, %w transpose_b : tensor<23x16xf32>, tensor<90x16xf32>
      epilogue(%acc, row %r = %rs : tensor<23xf32>, row %target = %t : tensor<23xi64>)
      outs(%pE, %picked0 : tensor<23x3xf32>, tensor<23xf32>) attributes {coda.save_accumulator} {
    %z = arith.mulf %acc, %r : f32
    %l = coda.row_reduce logsumexp %z tile 32 : f32
    %s = coda.row_select %z at %target : f32, i64
    coda.yield %l, %s : !coda.partial<f32>, !coda.row<f32>
  }
  %lse = coda.reduce_partials logsumexp row %lp : tensor<23x3xf32> outs(%vE : tensor<23xf32>)
  %loss = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%lse, %picked : tensor<23xf32>, tensor<23xf32>) outs(%vE : tensor<23xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<23xf32>
  return %loss : tensor<23xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#mk = affine_map<(m, n, k) -> (m, k)>
#nk = affine_map<(m, n, k) -> (n, k)>
#kn = affine_map<(m, n, k) -> (k, n)>
#km = affine_map<(m, n, k) -> (k, m)>
#mn = affine_map<(m, n, k) -> (m, n)>

func.func @reference(%x: tensor<23x16xf32>, %rs: tensor<23xf32>, %w: tensor<90x16xf32>,
                     %t: tensor<23xi64> {coda_test.range = array<i64: 0, 90>},
                     %dloss: tensor<23xf32>) -> (tensor<23x16xf32>, tensor<23xf32>, tensor<90x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<23x90xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<23x90xf32>) -> tensor<23x90xf32>
  %product = linalg.generic {indexing_maps = [#mk, #nk, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<23x16xf32>, tensor<90x16xf32>) outs(%z : tensor<23x90xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<23x90xf32>
  // The logits: the product scaled by the row scale.
  %logits = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%product, %rs : tensor<23x90xf32>, tensor<23xf32>) outs(%e : tensor<23x90xf32>) {
  ^bb0(%v: f32, %r: f32, %out: f32):
    %l = arith.mulf %v, %r : f32
    linalg.yield %l : f32
  } -> tensor<23x90xf32>
  %rE = tensor.empty() : tensor<23xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%rE : tensor<23xf32>) -> tensor<23xf32>
  %max = linalg.reduce { arith.maximumf } ins(%logits : tensor<23x90xf32>) outs(%m0 : tensor<23xf32>) dimensions = [1]
  %s0 = linalg.fill ins(%zero : f32) outs(%rE : tensor<23xf32>) -> tensor<23xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%logits, %max : tensor<23x90xf32>, tensor<23xf32>) outs(%s0 : tensor<23xf32>) {
  ^bb0(%v: f32, %mx: f32, %acc: f32):
    %d = arith.subf %v, %mx : f32
    %ex = math.exp %d : f32
    %s = arith.addf %acc, %ex : f32
    linalg.yield %s : f32
  } -> tensor<23xf32>
  // dlogits = dloss (softmax - onehot(t)).
  %dlogits = linalg.generic {indexing_maps = [#id, #row, #row, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max, %sum, %t, %dloss : tensor<23x90xf32>, tensor<23xf32>, tensor<23xf32>, tensor<23xi64>, tensor<23xf32>)
      outs(%e : tensor<23x90xf32>) {
  ^bb0(%v: f32, %mx: f32, %s: f32, %target: i64, %g: f32, %out: f32):
    %n = linalg.index 1 : index
    %d = arith.subf %v, %mx : f32
    %ex = math.exp %d : f32
    %p = arith.divf %ex, %s : f32
    %ti = arith.index_cast %target : i64 to index
    %hit = arith.cmpi eq, %n, %ti : index
    %one = arith.constant 1.0 : f32
    %oh = arith.select %hit, %one, %zero : f32
    %diff = arith.subf %p, %oh : f32
    %r = arith.mulf %g, %diff : f32
    linalg.yield %r : f32
  } -> tensor<23x90xf32>
  // drs = sum_n dlogits (x W^T); dAcc = rs dlogits.
  %r0 = linalg.fill ins(%zero : f32) outs(%rE : tensor<23xf32>) -> tensor<23xf32>
  %drs = linalg.generic {indexing_maps = [#id, #id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dlogits, %product : tensor<23x90xf32>, tensor<23x90xf32>) outs(%r0 : tensor<23xf32>) {
  ^bb0(%g: f32, %v: f32, %acc: f32):
    %p = arith.mulf %g, %v : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<23xf32>
  %dacc = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dlogits, %rs : tensor<23x90xf32>, tensor<23xf32>) outs(%e : tensor<23x90xf32>) {
  ^bb0(%g: f32, %r: f32, %out: f32):
    %d = arith.mulf %g, %r : f32
    linalg.yield %d : f32
  } -> tensor<23x90xf32>
  %ex = tensor.empty() : tensor<23x16xf32>
  %zx = linalg.fill ins(%zero : f32) outs(%ex : tensor<23x16xf32>) -> tensor<23x16xf32>
  %dx = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %w : tensor<23x90xf32>, tensor<90x16xf32>) outs(%zx : tensor<23x16xf32>) {
  ^bb0(%g: f32, %wv: f32, %acc: f32):
    %p = arith.mulf %g, %wv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<23x16xf32>
  %ew = tensor.empty() : tensor<90x16xf32>
  %zw = linalg.fill ins(%zero : f32) outs(%ew : tensor<90x16xf32>) -> tensor<90x16xf32>
  %dw = linalg.generic {indexing_maps = [#km, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%dacc, %x : tensor<23x90xf32>, tensor<23x16xf32>) outs(%zw : tensor<90x16xf32>) {
  ^bb0(%g: f32, %xv: f32, %acc: f32):
    %p = arith.mulf %g, %xv : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<90x16xf32>
  return %dx, %drs, %dw : tensor<23x16xf32>, tensor<23xf32>, tensor<90x16xf32>
}
