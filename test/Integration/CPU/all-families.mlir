// RUN: %differential %s | %cpu-runner | FileCheck %s

// The five primitive families composed in one epilogue: elementwise math on
// a tile input and a column vector, a row index, an extra tile output, row
// and column partials, a 2 -> 2 and a 2 -> 1 pair transform, and a row select.

// CHECK: coda-check ok: 528 elements
// CHECK: coda-check ok: 264 elements
// CHECK: coda-check ok: 22 elements
// CHECK: coda-check ok: 72 elements
// CHECK: coda-check ok: 22 elements

func.func @fused(%a: tensor<22x6xf32>, %b: tensor<6x24xf32>, %t: tensor<22x24xf32>, %c: tensor<24xf32>, %tg: tensor<22xi32>,
                 %o0: tensor<22x24xf32>, %o1: tensor<22x12xf32>, %o2: tensor<22x1xf32>, %o3: tensor<3x24xf32>)
    -> (tensor<22x24xf32>, tensor<22x12xf32>, tensor<22x1xf32>, tensor<3x24xf32>, tensor<22xf32>) {
  %zero = arith.constant 0.0 : f32
  %sE = tensor.empty() : tensor<22xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%sE : tensor<22xf32>) -> tensor<22xf32>
  %r:5 = coda.gemm %a, %b : tensor<22x6xf32>, tensor<6x24xf32>
      epilogue(%acc, tile %tv = %t : tensor<22x24xf32>, col %cv = %c : tensor<24xf32>, row %target = %tg : tensor<22xi32>)
      outs(%o0, %o1, %o2, %o3, %s0 : tensor<22x24xf32>, tensor<22x12xf32>, tensor<22x1xf32>, tensor<3x24xf32>, tensor<22xf32>) {
    %m = coda.row_index
    %mi = arith.index_cast %m : index to i32
    %mf = arith.sitofp %mi : i32 to f32
    %x0 = arith.addf %acc, %tv : f32
    %x1 = arith.mulf %x0, %cv : f32
    %x = arith.addf %x1, %mf : f32
    %swapped = coda.pair_map (%e, %o) = %x : f32 -> f32 {
      coda.yield %o, %e : f32, f32
    }
    %diff = coda.pair_contract (%e, %o) = %x : f32 -> !coda.pair<f32> {
      %d = arith.subf %e, %o : f32
      coda.yield %d : f32
    }
    %rs = coda.row_reduce max %x tile 32 : f32
    %cs = coda.col_reduce sum %swapped tile 8 : f32
    %sel = coda.row_select %x at %target : f32, i32
    coda.yield %swapped, %diff, %rs, %cs, %sel : f32, !coda.pair<f32>, !coda.partial<f32>, !coda.partial<f32>, !coda.row<f32>
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4 : tensor<22x24xf32>, tensor<22x12xf32>, tensor<22x1xf32>, tensor<3x24xf32>, tensor<22xf32>
}

#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (m)>
#col = affine_map<(m, n) -> (n)>

func.func @reference(%a: tensor<22x6xf32>, %b: tensor<6x24xf32>, %t: tensor<22x24xf32>, %c: tensor<24xf32>,
                     %tg: tensor<22xi32> {coda_test.range = array<i64: -1, 24>})
    -> (tensor<22x24xf32>, tensor<22x12xf32>, tensor<22x1xf32>, tensor<3x24xf32>, tensor<22xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<22x24xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<22x24xf32>) -> tensor<22x24xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<22x6xf32>, tensor<6x24xf32>) outs(%z : tensor<22x24xf32>) -> tensor<22x24xf32>
  %x = linalg.generic {indexing_maps = [#id, #id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %t, %c : tensor<22x24xf32>, tensor<22x24xf32>, tensor<24xf32>) outs(%e : tensor<22x24xf32>) {
  ^bb0(%v: f32, %tv: f32, %cv: f32, %out: f32):
    %m = linalg.index 0 : index
    %mi = arith.index_cast %m : index to i64
    %mf = arith.uitofp %mi : i64 to f32
    %s = arith.addf %v, %tv : f32
    %p = arith.mulf %s, %cv : f32
    %r = arith.addf %p, %mf : f32
    linalg.yield %r : f32
  } -> tensor<22x24xf32>
  // Swap adjacent columns by reading x at n xor 1.
  %swapped = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<22x24xf32>) {
  ^bb0(%out: f32):
    %m = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c1 = arith.constant 1 : index
    %p = arith.xori %n, %c1 : index
    %v = tensor.extract %x[%m, %p] : tensor<22x24xf32>
    linalg.yield %v : f32
  } -> tensor<22x24xf32>
  %x3 = tensor.expand_shape %x [[0], [1, 2]] output_shape [22, 12, 2] : tensor<22x24xf32> into tensor<22x12x2xf32>
  %ev = tensor.extract_slice %x3[0, 0, 0] [22, 12, 1] [1, 1, 1] : tensor<22x12x2xf32> to tensor<22x12xf32>
  %od = tensor.extract_slice %x3[0, 0, 1] [22, 12, 1] [1, 1, 1] : tensor<22x12x2xf32> to tensor<22x12xf32>
  %dE = tensor.empty() : tensor<22x12xf32>
  %diff = linalg.sub ins(%ev, %od : tensor<22x12xf32>, tensor<22x12xf32>) outs(%dE : tensor<22x12xf32>) -> tensor<22x12xf32>
  %rE = tensor.empty() : tensor<22xf32>
  %r0 = linalg.fill ins(%ninf : f32) outs(%rE : tensor<22xf32>) -> tensor<22xf32>
  %rmax = linalg.reduce { arith.maximumf } ins(%x : tensor<22x24xf32>) outs(%r0 : tensor<22xf32>) dimensions = [1]
  %rs = tensor.expand_shape %rmax [[0, 1]] output_shape [22, 1] : tensor<22xf32> into tensor<22x1xf32>
  %pad = tensor.pad %swapped low[0, 0] high[2, 0] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  } : tensor<22x24xf32> to tensor<24x24xf32>
  %tiles = tensor.expand_shape %pad [[0, 1], [2]] output_shape [3, 8, 24] : tensor<24x24xf32> into tensor<3x8x24xf32>
  %cE = tensor.empty() : tensor<3x24xf32>
  %c0 = linalg.fill ins(%zero : f32) outs(%cE : tensor<3x24xf32>) -> tensor<3x24xf32>
  %cs = linalg.reduce { arith.addf } ins(%tiles : tensor<3x8x24xf32>) outs(%c0 : tensor<3x24xf32>) dimensions = [1]
  %sel = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%tg : tensor<22xi32>) outs(%rE : tensor<22xf32>) {
  ^bb0(%target: i32, %out: f32):
    %m = linalg.index 0 : index
    %c0i = arith.constant 0 : i32
    %valid = arith.cmpi sge, %target, %c0i : i32
    %safe = arith.select %valid, %target, %c0i : i32
    %n = arith.index_cast %safe : i32 to index
    %v = tensor.extract %x[%m, %n] : tensor<22x24xf32>
    %r = arith.select %valid, %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<22xf32>
  return %swapped, %diff, %rs, %cs, %sel : tensor<22x24xf32>, tensor<22x12xf32>, tensor<22x1xf32>, tensor<3x24xf32>, tensor<22xf32>
}
