// RUN: %differential %s | %cpu-runner | FileCheck %s

// 2 -> 1 pairwise contraction: SwiGLU over interleaved gate/up columns with
// the deferred RMSNorm row scale, silu(r g) * (r u), into an M x N/2 output;
// against separate gate and up products of the de-interleaved weight.

// CHECK: coda-check ok: 720 elements

func.func @fused(%x: tensor<36x24xf32>, %w: tensor<24x40xf32>, %r: tensor<36xf32>, %o: tensor<36x20xf32>) -> tensor<36x20xf32> {
  %h = coda.gemm %x, %w : tensor<36x24xf32>, tensor<24x40xf32>
      epilogue(%acc, row %rv = %r : tensor<36xf32>) outs(%o : tensor<36x20xf32>) {
    %s = arith.mulf %acc, %rv : f32
    %p = coda.pair_contract (%g, %u) = %s : f32 -> !coda.pair<f32> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      coda.yield %y : f32
    }
    coda.yield %p : !coda.pair<f32>
  }
  return %h : tensor<36x20xf32>
}

#id = affine_map<(m, n) -> (m, n)>

func.func @reference(%x: tensor<36x24xf32>, %w: tensor<24x40xf32>, %r: tensor<36xf32>) -> tensor<36x20xf32> {
  %zero = arith.constant 0.0 : f32
  // Split the interleaved weight into Wg (even columns) and Wu (odd columns).
  %w3 = tensor.expand_shape %w [[0], [1, 2]] output_shape [24, 20, 2] : tensor<24x40xf32> into tensor<24x20x2xf32>
  %wg = tensor.extract_slice %w3[0, 0, 0] [24, 20, 1] [1, 1, 1] : tensor<24x20x2xf32> to tensor<24x20xf32>
  %wu = tensor.extract_slice %w3[0, 0, 1] [24, 20, 1] [1, 1, 1] : tensor<24x20x2xf32> to tensor<24x20xf32>
  %e = tensor.empty() : tensor<36x20xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<36x20xf32>) -> tensor<36x20xf32>
  // Normalize first, then project (the unfused order).
  %xe = tensor.empty() : tensor<36x24xf32>
  %rb = linalg.broadcast ins(%r : tensor<36xf32>) outs(%xe : tensor<36x24xf32>) dimensions = [1]
  %xn = linalg.mul ins(%x, %rb : tensor<36x24xf32>, tensor<36x24xf32>) outs(%xe : tensor<36x24xf32>) -> tensor<36x24xf32>
  %g = linalg.matmul ins(%xn, %wg : tensor<36x24xf32>, tensor<24x20xf32>) outs(%z : tensor<36x20xf32>) -> tensor<36x20xf32>
  %u = linalg.matmul ins(%xn, %wu : tensor<36x24xf32>, tensor<24x20xf32>) outs(%z : tensor<36x20xf32>) -> tensor<36x20xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%g, %u : tensor<36x20xf32>, tensor<36x20xf32>) outs(%e : tensor<36x20xf32>) {
  ^bb0(%gv: f32, %uv: f32, %out: f32):
    %ng = arith.negf %gv : f32
    %ex = math.exp %ng : f32
    %one = arith.constant 1.0 : f32
    %den = arith.addf %ex, %one : f32
    %sig = arith.divf %one, %den : f32
    %silu = arith.mulf %gv, %sig : f32
    %y = arith.mulf %silu, %uv : f32
    linalg.yield %y : f32
  } -> tensor<36x20xf32>
  return %h : tensor<36x20xf32>
}
