// RUN: coda-opt %s --coda-fuse-groups --split-input-file | FileCheck %s
// RUN: coda-opt %s --coda-fuse-groups=tile=32 --split-input-file | FileCheck %s --check-prefix=NARROW

// The 1 x 128 quantization on coda.gemm's output viewed as [M, N / 128, 128],
// with a per-token row scale and a scalar read by the statistic's math: the
// reduction becomes a group_reduce, the scales a group_value output, the
// quantization a tile output; the [M, N] output is no longer written.
// CHECK-LABEL: func.func @quantize_128
//       CHECK: %[[G:.+]]:2 = coda.gemm %arg0, %arg1 transpose_b
//  CHECK-NEXT:   epilogue(%[[ACC:.+]], row %[[R:.+]] = %arg2 : tensor<?xf32>, scalar %[[S:.+]] = %arg3 : f32)
//  CHECK-NEXT:   outs(%{{.+}}, %{{.+}} : tensor<?x2xf32>, tensor<?x256xf8E4M3FN>)
//       CHECK:   %[[V:.+]] = arith.mulf %[[ACC]], %[[R]] : f32
//       CHECK:   %[[ABS:.+]] = math.absf %[[V]] : f32
//       CHECK:   %[[AMAX:.+]] = coda.group_reduce max %[[ABS]] row group 128 : f32 -> f32
//       CHECK:   %[[START:.+]] = arith.maximumf %[[AMAX]], %{{.+}} : f32
//       CHECK:   %[[SCALE:.+]] = arith.mulf %[[START]], %[[S]] : f32
//       CHECK:   %[[SCALES:.+]] = coda.group_value %[[SCALE]] row group 128 : f32
//       CHECK:   %[[Q:.+]] = arith.divf %[[V]], %[[SCALE]] : f32
//       CHECK:   %[[CODE:.+]] = arith.truncf %[[Q]] : f32 to f8E4M3FN
//       CHECK:   coda.yield %[[SCALES]], %[[CODE]] : !coda.grouped<f32>, f8E4M3FN
//       CHECK: %[[CODES:.+]] = tensor.expand_shape %[[G]]#1
//       CHECK: return %[[CODES]], %{{.+}} : tensor<?x2x128xf8E4M3FN>, tensor<?x2x1xf32>
#id3 = affine_map<(m, g, e) -> (m, g, e)>
#group3 = affine_map<(m, g, e) -> (m, g, 0)>
func.func @quantize_128(%x: tensor<?x64xbf16>, %w: tensor<256x64xbf16>, %r: tensor<?xf32>, %s: f32)
    -> (tensor<?x2x128xf8E4M3FN>, tensor<?x2x1xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xbf16>
  %e = tensor.empty(%m) : tensor<?x256xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<256x64xbf16>
      epilogue(%acc, row %rr = %r : tensor<?xf32>) outs(%e : tensor<?x256xf32>) {
    %v = arith.mulf %acc, %rr : f32
    coda.yield %v : f32
  }
  %v = tensor.expand_shape %y [[0], [1, 2]] output_shape [%m, 2, 128] : tensor<?x256xf32> into tensor<?x2x128xf32>
  %ea = tensor.empty(%m) : tensor<?x2x1xf32>
  %za = linalg.fill ins(%zero : f32) outs(%ea : tensor<?x2x1xf32>) -> tensor<?x2x1xf32>
  %amax = linalg.generic {indexing_maps = [#id3, #group3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<?x2x128xf32>) outs(%za : tensor<?x2x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %abs = math.absf %a : f32
    %mx = arith.maximumf %acc, %abs : f32
    linalg.yield %mx : f32
  } -> tensor<?x2x1xf32>
  %scale = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%amax : tensor<?x2x1xf32>) outs(%ea : tensor<?x2x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.mulf %a, %s : f32
    linalg.yield %t : f32
  } -> tensor<?x2x1xf32>
  %eq = tensor.empty(%m) : tensor<?x2x128xf8E4M3FN>
  %q = linalg.generic {indexing_maps = [#id3, #group3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %scale : tensor<?x2x128xf32>, tensor<?x2x1xf32>) outs(%eq : tensor<?x2x128xf8E4M3FN>) {
  ^bb0(%a: f32, %sc: f32, %o: f8E4M3FN):
    %d = arith.divf %a, %sc : f32
    %t = arith.truncf %d : f32 to f8E4M3FN
    linalg.yield %t : f8E4M3FN
  } -> tensor<?x2x128xf8E4M3FN>
  return %q, %scale : tensor<?x2x128xf8E4M3FN>, tensor<?x2x1xf32>
}

// -----

// Groups of 96 columns: no power of two, so no epilogue statistic; nothing
// changes.
// CHECK-LABEL: func.func @width_96
//       CHECK: coda.gemm
//   CHECK-NOT: coda.group_reduce
//       CHECK: linalg.generic
#id3 = affine_map<(m, g, e) -> (m, g, e)>
#group2 = affine_map<(m, g, e) -> (m, g)>
func.func @width_96(%x: tensor<8x64xbf16>, %w: tensor<192x64xbf16>) -> tensor<8x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x192xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<8x64xbf16>, tensor<192x64xbf16>
      epilogue(%acc) outs(%e : tensor<8x192xf32>) {
    coda.yield %acc : f32
  }
  %v = tensor.expand_shape %y [[0], [1, 2]] output_shape [8, 2, 96] : tensor<8x192xf32> into tensor<8x2x96xf32>
  %ea = tensor.empty() : tensor<8x2xf32>
  %za = linalg.fill ins(%zero : f32) outs(%ea : tensor<8x2xf32>) -> tensor<8x2xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #group2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<8x2x96xf32>) outs(%za : tensor<8x2xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8x2xf32>
  return %sum : tensor<8x2xf32>
}

// -----

// A sum of squares whose output other ops read too: the tile output stays,
// the statistics are added (a sum from 1.0 adds the start). The quantization
// above starts its maximum from 0, which the epilogue keeps too.
// CHECK-LABEL: func.func @kept_tile
//       CHECK: %[[G:.+]]:2 = coda.gemm
//       CHECK:   %[[SQ:.+]] = arith.mulf %[[A:.+]], %[[A]] : f32
//       CHECK:   %[[SUM:.+]] = coda.group_reduce sum %[[SQ]] row group 64 : f32 -> f32
//       CHECK:   %[[START:.+]] = arith.addf %[[SUM]], %{{.+}} : f32
//       CHECK:   coda.group_value %[[START]] row group 64 : f32
//       CHECK:   coda.yield %{{.+}}, %{{.+}} : f32, !coda.grouped<f32>
//       CHECK: return %[[G]]#0, %[[G]]#1
#id3 = affine_map<(m, g, e) -> (m, g, e)>
#group2 = affine_map<(m, g, e) -> (m, g)>
func.func @kept_tile(%x: tensor<8x64xbf16>, %w: tensor<128x64xbf16>) -> (tensor<8x128xf32>, tensor<8x2xf32>) {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8x128xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<8x64xbf16>, tensor<128x64xbf16>
      epilogue(%acc) outs(%e : tensor<8x128xf32>) {
    coda.yield %acc : f32
  }
  %v = tensor.expand_shape %y [[0], [1, 2]] output_shape [8, 2, 64] : tensor<8x128xf32> into tensor<8x2x64xf32>
  %ea = tensor.empty() : tensor<8x2xf32>
  %za = linalg.fill ins(%one : f32) outs(%ea : tensor<8x2xf32>) -> tensor<8x2xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #group2], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<8x2x64xf32>) outs(%za : tensor<8x2xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<8x2xf32>
  return %y, %sum : tensor<8x128xf32>, tensor<8x2xf32>
}

// -----

// A group op that reads another GEMM's output beside the statistics: the
// statistic fuses, the op stays.
// CHECK-LABEL: func.func @two_gemms
//       CHECK: coda.group_reduce max
//       CHECK: linalg.generic
#id3 = affine_map<(m, g, e) -> (m, g, e)>
#group3 = affine_map<(m, g, e) -> (m, g, 0)>
func.func @two_gemms(%x: tensor<8x64xbf16>, %w: tensor<128x64xbf16>, %w2: tensor<128x64xbf16>) -> tensor<8x2x64xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8x128xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<8x64xbf16>, tensor<128x64xbf16>
      epilogue(%acc) outs(%e : tensor<8x128xf32>) {
    coda.yield %acc : f32
  }
  %y2 = coda.gemm %x, %w2 transpose_b : tensor<8x64xbf16>, tensor<128x64xbf16>
      epilogue(%acc) outs(%e : tensor<8x128xf32>) {
    coda.yield %acc : f32
  }
  %v = tensor.expand_shape %y [[0], [1, 2]] output_shape [8, 2, 64] : tensor<8x128xf32> into tensor<8x2x64xf32>
  %v2 = tensor.expand_shape %y2 [[0], [1, 2]] output_shape [8, 2, 64] : tensor<8x128xf32> into tensor<8x2x64xf32>
  %ea = tensor.empty() : tensor<8x2x1xf32>
  %za = linalg.fill ins(%ninf : f32) outs(%ea : tensor<8x2x1xf32>) -> tensor<8x2x1xf32>
  %mx = linalg.generic {indexing_maps = [#id3, #group3], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v : tensor<8x2x64xf32>) outs(%za : tensor<8x2x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    linalg.yield %m : f32
  } -> tensor<8x2x1xf32>
  %eo = tensor.empty() : tensor<8x2x64xf32>
  %o = linalg.generic {indexing_maps = [#id3, #group3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v2, %mx : tensor<8x2x64xf32>, tensor<8x2x1xf32>) outs(%eo : tensor<8x2x64xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  } -> tensor<8x2x64xf32>
  return %o : tensor<8x2x64xf32>
}

// -----

// A whole row of 48 columns (<= the tile): one group of 64. Its maximum,
// read with the row by the softmax's exponential, becomes a statistic; the
// sum of exponentials reads that statistic; the division reads both. A row
// maximum only a reduction of another GEMM reads (@lone_max) keeps its
// partials. With tile=32 the row spans two tiles: nothing changes.
// CHECK-LABEL: func.func @row_softmax
//       CHECK: coda.gemm
//  CHECK-NEXT: epilogue(%[[ACC:.+]])
//       CHECK: %[[MAX:.+]] = coda.group_reduce max %[[ACC]] row group 64
//       CHECK: %[[D:.+]] = arith.subf %[[ACC]], %[[MAX]]
//       CHECK: %[[E:.+]] = math.exp %[[D]]
//       CHECK: %[[SUM:.+]] = coda.group_reduce sum %[[E]] row group 64
//       CHECK: arith.divf %{{.+}}, %[[SUM]]
//       CHECK: coda.yield %{{.+}} : f32
//   CHECK-NOT: linalg.generic
// NARROW-LABEL: func.func @row_softmax
//   NARROW-NOT: coda.group_reduce
// NARROW-COUNT-3: linalg.generic
#id2 = affine_map<(t, e) -> (t, e)>
#keep = affine_map<(t, e) -> (t, 0)>
func.func @row_softmax(%x: tensor<?x64xbf16>, %w: tensor<48x64xbf16>) -> tensor<?x48xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %m = tensor.dim %x, %c0 : tensor<?x64xbf16>
  %e = tensor.empty(%m) : tensor<?x48xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<?x64xbf16>, tensor<48x64xbf16>
      epilogue(%acc) outs(%e : tensor<?x48xf32>) {
    coda.yield %acc : f32
  }
  %ek = tensor.empty(%m) : tensor<?x1xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%ek : tensor<?x1xf32>) -> tensor<?x1xf32>
  %max = linalg.generic {indexing_maps = [#id2, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<?x48xf32>) outs(%fm : tensor<?x1xf32>) {
  ^bb0(%l: f32, %a: f32):
    %r = arith.maximumf %l, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x1xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%ek : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #keep, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%y, %max : tensor<?x48xf32>, tensor<?x1xf32>) outs(%fz : tensor<?x1xf32>) {
  ^bb0(%l: f32, %mx: f32, %a: f32):
    %d = arith.subf %l, %mx : f32
    %x1 = math.exp %d : f32
    %r = arith.addf %x1, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x1xf32>
  %p = linalg.generic {indexing_maps = [#id2, #keep, #keep, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y, %max, %sum : tensor<?x48xf32>, tensor<?x1xf32>, tensor<?x1xf32>) outs(%e : tensor<?x48xf32>) {
  ^bb0(%l: f32, %mx: f32, %s: f32, %o: f32):
    %d = arith.subf %l, %mx : f32
    %x1 = math.exp %d : f32
    %r = arith.divf %x1, %s : f32
    linalg.yield %r : f32
  } -> tensor<?x48xf32>
  return %p : tensor<?x48xf32>
}

// -----

// CHECK-LABEL: func.func @lone_max
//   CHECK-NOT: coda.group_reduce
//       CHECK: linalg.generic
#id2 = affine_map<(t, e) -> (t, e)>
#keep = affine_map<(t, e) -> (t, 0)>
func.func @lone_max(%x: tensor<8x64xbf16>, %w: tensor<48x64xbf16>) -> tensor<8x1xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %y = coda.gemm %x, %w transpose_b : tensor<8x64xbf16>, tensor<48x64xbf16>
      epilogue(%acc) outs(%e : tensor<8x48xf32>) {
    coda.yield %acc : f32
  }
  %ek = tensor.empty() : tensor<8x1xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%ek : tensor<8x1xf32>) -> tensor<8x1xf32>
  %max = linalg.generic {indexing_maps = [#id2, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<8x48xf32>) outs(%fm : tensor<8x1xf32>) {
  ^bb0(%l: f32, %a: f32):
    %r = arith.maximumf %l, %a : f32
    linalg.yield %r : f32
  } -> tensor<8x1xf32>
  return %max : tensor<8x1xf32>
}
