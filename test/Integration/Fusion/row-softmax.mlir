// RUN: coda-opt %s --coda-test-differential-main="fuse" | %cpu-runner | FileCheck %s
// RUN: coda-opt %s --coda-fuse | FileCheck %s --check-prefix=FUSED

// A softmax over a whole row that one tile holds, as torch-mlir lowers
// torch.softmax(x @ w.T, dim=-1) (the row's maximum and its sum of
// exponentials keepdim, then the division): a MoE router's probabilities
// over 60 experts (the row is one group of 64 columns, the last 4 outside
// the output) for 13 tokens, its normalizer returned; and a log-softmax
// over 5 classes for one token (the row rounds up to a group of 8), whose
// log-sum-exp is a statistic of the statistics, returned squeezed; and a
// top-1 router's choice as torch-mlir lowers torch.max(logits, dim=-1)
// (the maximum and the index of its first occurrence), of logits rounded
// down so that rows hold ties.
// --coda-fuse makes each one GEMM whose epilogue computes the statistics:
// no partials, no kernel after the GEMM.

// CHECK: coda-check ok: 780 elements
// CHECK: coda-check ok: 13 elements
// CHECK: coda-check ok: 5 elements
// CHECK: coda-check ok: 1 elements
// CHECK: coda-check ok: 13 elements
// CHECK: coda-check ok: 13 elements

// FUSED-LABEL: func.func @reference
// FUSED: coda.gemm %arg0, %arg1 transpose_b : tensor<13x32xbf16>, tensor<60x32xbf16>
// FUSED-NEXT: epilogue(%[[ACC:.+]])
// FUSED: %[[MAX:.+]] = coda.group_reduce max %[[ACC]] row group 64 : f32 -> f32
// FUSED: %[[D:.+]] = arith.subf %[[ACC]], %[[MAX]] : f32
// FUSED: %[[E:.+]] = math.exp %[[D]] : f32
// FUSED: %[[SUM:.+]] = coda.group_reduce sum %[[E]] row group 64 : f32 -> f32
// FUSED: coda.group_value %[[SUM]] row group 64 : f32
// FUSED: arith.divf %[[E]], %[[SUM]] : f32
// FUSED: coda.yield %{{.+}}, %{{.+}} : !coda.grouped<f32>, f32
// FUSED: coda.gemm %arg2, %arg3 transpose_b : tensor<1x32xbf16>, tensor<5x32xbf16>
// FUSED: coda.group_reduce max %{{.+}} row group 8 : f32 -> f32
// FUSED: coda.group_reduce sum %{{.+}} row group 8 : f32 -> f32
// FUSED: math.log
// FUSED: coda.yield %{{.+}}, %{{.+}} : !coda.grouped<f32>, f32
// FUSED: coda.gemm %arg0, %arg4 transpose_b : tensor<13x32xbf16>, tensor<60x32xbf16>
// FUSED: %[[FL:.+]] = math.floor
// FUSED-DAG: coda.group_reduce max %[[FL]] row group 64 : f32 -> f32
// FUSED-DAG: %[[AT:.+]] = coda.group_reduce argmax %[[FL]] row group 64 : f32 -> index
// FUSED-DAG: %[[I:.+]] = arith.index_cast %[[AT]] : index to i64
// FUSED: arith.sitofp
// FUSED: coda.yield %{{.+}}, %{{.+}} : !coda.grouped<f32>, !coda.grouped<f32>
// FUSED-NOT: linalg.generic
// FUSED-NOT: coda.reduce_partials

#lhs = affine_map<(m, n, k) -> (m, k)>
#rhsT = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(t, e) -> (t, e)>
#keep = affine_map<(t, e) -> (t, 0)>
#row = affine_map<(t, e) -> (t)>


func.func @reference(%x: tensor<13x32xbf16>, %wr: tensor<60x32xbf16>,
                     %t: tensor<1x32xbf16>, %wc: tensor<5x32xbf16>,
                     %wt: tensor<60x32xbf16>)
    -> (tensor<13x60xf32>, tensor<13x1xf32>, tensor<1x5xf32>, tensor<1xf32>,
        tensor<13xf32>, tensor<13xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  // The router: softmax over 60 experts.
  %e = tensor.empty() : tensor<13x60xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<13x60xf32>) -> tensor<13x60xf32>
  %logits = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %wr : tensor<13x32xbf16>, tensor<60x32xbf16>) outs(%z : tensor<13x60xf32>) -> tensor<13x60xf32>
  %ek = tensor.empty() : tensor<13x1xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%ek : tensor<13x1xf32>) -> tensor<13x1xf32>
  %max = linalg.generic {indexing_maps = [#id2, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<13x60xf32>) outs(%fm : tensor<13x1xf32>) {
  ^bb0(%l: f32, %m: f32):
    %r = arith.maximumf %l, %m : f32
    linalg.yield %r : f32
  } -> tensor<13x1xf32>
  %sub = linalg.generic {indexing_maps = [#id2, #keep, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<13x60xf32>, tensor<13x1xf32>) outs(%e : tensor<13x60xf32>) {
  ^bb0(%l: f32, %m: f32, %o: f32):
    %d = arith.subf %l, %m : f32
    linalg.yield %d : f32
  } -> tensor<13x60xf32>
  %exp = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%sub : tensor<13x60xf32>) outs(%e : tensor<13x60xf32>) {
  ^bb0(%d: f32, %o: f32):
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<13x60xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%ek : tensor<13x1xf32>) -> tensor<13x1xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<13x60xf32>) outs(%fz : tensor<13x1xf32>) {
  ^bb0(%v: f32, %s: f32):
    %a = arith.addf %v, %s : f32
    linalg.yield %a : f32
  } -> tensor<13x1xf32>
  %probs = linalg.generic {indexing_maps = [#id2, #keep, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<13x60xf32>, tensor<13x1xf32>) outs(%e : tensor<13x60xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %p = arith.divf %v, %s : f32
    linalg.yield %p : f32
  } -> tensor<13x60xf32>
  // One token's log-softmax over 5 classes.
  %e1 = tensor.empty() : tensor<1x5xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x5xf32>) -> tensor<1x5xf32>
  %y = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%t, %wc : tensor<1x32xbf16>, tensor<5x32xbf16>) outs(%z1 : tensor<1x5xf32>) -> tensor<1x5xf32>
  %ek1 = tensor.empty() : tensor<1x1xf32>
  %fm1 = linalg.fill ins(%ninf : f32) outs(%ek1 : tensor<1x1xf32>) -> tensor<1x1xf32>
  %max1 = linalg.generic {indexing_maps = [#id2, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<1x5xf32>) outs(%fm1 : tensor<1x1xf32>) {
  ^bb0(%l: f32, %m: f32):
    %r = arith.maximumf %l, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x1xf32>
  %fz1 = linalg.fill ins(%zero : f32) outs(%ek1 : tensor<1x1xf32>) -> tensor<1x1xf32>
  %sum1 = linalg.generic {indexing_maps = [#id2, #keep, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%y, %max1 : tensor<1x5xf32>, tensor<1x1xf32>) outs(%fz1 : tensor<1x1xf32>) {
  ^bb0(%l: f32, %m: f32, %s: f32):
    %d = arith.subf %l, %m : f32
    %x1 = math.exp %d : f32
    %a = arith.addf %x1, %s : f32
    linalg.yield %a : f32
  } -> tensor<1x1xf32>
  %es = tensor.empty() : tensor<1xf32>
  %lse = linalg.generic {indexing_maps = [affine_map<(t) -> (t, 0)>, affine_map<(t) -> (t, 0)>, affine_map<(t) -> (t)>], iterator_types = ["parallel"]}
      ins(%sum1, %max1 : tensor<1x1xf32>, tensor<1x1xf32>) outs(%es : tensor<1xf32>) {
  ^bb0(%s: f32, %m: f32, %o: f32):
    %lg = math.log %s : f32
    %l = arith.addf %lg, %m : f32
    linalg.yield %l : f32
  } -> tensor<1xf32>
  %logp = linalg.generic {indexing_maps = [#id2, #row, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y, %lse : tensor<1x5xf32>, tensor<1xf32>) outs(%e1 : tensor<1x5xf32>) {
  ^bb0(%l: f32, %s: f32, %o: f32):
    %r = arith.subf %l, %s : f32
    linalg.yield %r : f32
  } -> tensor<1x5xf32>
  // A top-1 router: the largest (rounded) logit and its expert.
  %z2 = linalg.fill ins(%zero : f32) outs(%e : tensor<13x60xf32>) -> tensor<13x60xf32>
  %y2 = linalg.matmul indexing_maps = [#lhs, #rhsT, #out]
      ins(%x, %wt : tensor<13x32xbf16>, tensor<60x32xbf16>) outs(%z2 : tensor<13x60xf32>) -> tensor<13x60xf32>
  %fl = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y2 : tensor<13x60xf32>) outs(%e : tensor<13x60xf32>) {
  ^bb0(%l: f32, %o: f32):
    %f = math.floor %l : f32
    linalg.yield %f : f32
  } -> tensor<13x60xf32>
  %ev = tensor.empty() : tensor<13xf32>
  %fv = linalg.fill ins(%ninf : f32) outs(%ev : tensor<13xf32>) -> tensor<13xf32>
  %c0i = arith.constant 0 : i64
  %ei = tensor.empty() : tensor<13xi64>
  %fi = linalg.fill ins(%c0i : i64) outs(%ei : tensor<13xi64>) -> tensor<13xi64>
  %top:2 = linalg.generic {indexing_maps = [#id2, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%fl : tensor<13x60xf32>) outs(%fv, %fi : tensor<13xf32>, tensor<13xi64>) {
  ^bb0(%new: f32, %old: f32, %oldi: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %m = arith.maximumf %new, %old : f32
    %gt = arith.cmpf ogt, %new, %old : f32
    %i = arith.select %gt, %ji, %oldi : i64
    linalg.yield %m, %i : f32, i64
  } -> (tensor<13xf32>, tensor<13xi64>)
  // The expert as f32: the differential check compares float tensors.
  %expert = linalg.generic {indexing_maps = [affine_map<(t) -> (t)>, affine_map<(t) -> (t)>], iterator_types = ["parallel"]}
      ins(%top#1 : tensor<13xi64>) outs(%ev : tensor<13xf32>) {
  ^bb0(%i: i64, %o: f32):
    %f = arith.sitofp %i : i64 to f32
    linalg.yield %f : f32
  } -> tensor<13xf32>
  return %probs, %sum, %logp, %lse, %top#0, %expert : tensor<13x60xf32>, tensor<13x1xf32>, tensor<1x5xf32>, tensor<1xf32>, tensor<13xf32>, tensor<13xf32>
}
