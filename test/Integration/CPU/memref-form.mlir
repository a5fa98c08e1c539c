// RUN: %differential %s | %cpu-runner | FileCheck %s

// coda.gemm and coda.reduce_partials on memrefs (written in place), with a
// tile output, a pair contraction and row partials, against the same program
// on tensors lowered separately.

// CHECK: coda-check ok: 396 elements
// CHECK: coda-check ok: 198 elements
// CHECK: coda-check ok: 11 elements

func.func @fused(%a: tensor<11x6xf32>, %b: tensor<6x36xf32>) -> (tensor<11x36xf32>, tensor<11x18xf32>, tensor<11xf32>) {
  %am = bufferization.to_buffer %a : tensor<11x6xf32> to memref<11x6xf32>
  %bm = bufferization.to_buffer %b : tensor<6x36xf32> to memref<6x36xf32>
  %y = memref.alloc() : memref<11x36xf32>
  %h = memref.alloc() : memref<11x18xf32>
  %p = memref.alloc() : memref<11x3xf32>
  %s = memref.alloc() : memref<11xf32>
  coda.gemm %am, %bm : memref<11x6xf32>, memref<6x36xf32> epilogue(%acc) outs(%y, %h, %p : memref<11x36xf32>, memref<11x18xf32>, memref<11x3xf32>) {
    %sq = arith.mulf %acc, %acc : f32
    %part = coda.row_reduce max %sq tile 16 : f32
    %pc = coda.pair_contract (%e, %o) = %acc : f32 -> !coda.pair<f32> {
      %d = arith.subf %e, %o : f32
      coda.yield %d : f32
    }
    coda.yield %acc, %pc, %part : f32, !coda.pair<f32>, !coda.partial<f32>
  }
  coda.reduce_partials max row %p : memref<11x3xf32> outs(%s : memref<11xf32>)
  %yt = bufferization.to_tensor %y restrict : memref<11x36xf32> to tensor<11x36xf32>
  %ht = bufferization.to_tensor %h restrict : memref<11x18xf32> to tensor<11x18xf32>
  %st = bufferization.to_tensor %s restrict : memref<11xf32> to tensor<11xf32>
  return %yt, %ht, %st : tensor<11x36xf32>, tensor<11x18xf32>, tensor<11xf32>
}

func.func @reference(%a: tensor<11x6xf32>, %b: tensor<6x36xf32>) -> (tensor<11x36xf32>, tensor<11x18xf32>, tensor<11xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<11x36xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<11x36xf32>) -> tensor<11x36xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<11x6xf32>, tensor<6x36xf32>) outs(%z : tensor<11x36xf32>) -> tensor<11x36xf32>
  %m3 = tensor.expand_shape %mm [[0], [1, 2]] output_shape [11, 18, 2] : tensor<11x36xf32> into tensor<11x18x2xf32>
  %ev = tensor.extract_slice %m3[0, 0, 0] [11, 18, 1] [1, 1, 1] : tensor<11x18x2xf32> to tensor<11x18xf32>
  %od = tensor.extract_slice %m3[0, 0, 1] [11, 18, 1] [1, 1, 1] : tensor<11x18x2xf32> to tensor<11x18xf32>
  %he = tensor.empty() : tensor<11x18xf32>
  %h = linalg.sub ins(%ev, %od : tensor<11x18xf32>, tensor<11x18xf32>) outs(%he : tensor<11x18xf32>) -> tensor<11x18xf32>
  %sq = linalg.mul ins(%mm, %mm : tensor<11x36xf32>, tensor<11x36xf32>) outs(%e : tensor<11x36xf32>) -> tensor<11x36xf32>
  %se = tensor.empty() : tensor<11xf32>
  %s0 = linalg.fill ins(%ninf : f32) outs(%se : tensor<11xf32>) -> tensor<11xf32>
  %s = linalg.reduce { arith.maximumf } ins(%sq : tensor<11x36xf32>) outs(%s0 : tensor<11xf32>) dimensions = [1]
  return %mm, %h, %s : tensor<11x36xf32>, tensor<11x18xf32>, tensor<11xf32>
}
