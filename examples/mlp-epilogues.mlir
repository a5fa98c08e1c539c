// The MLP half of a Llama-style block written as coda GEMM epilogues, small
// enough to run on the CPU through the reference lowering:
//   scripts/run-example examples/mlp-epilogues.mlir
//
//   h   = silu(r * (x Wg)) * (r * (x Wu))       gate/up GEMM, SwiGLU epilogue
//   out = h Wd + x                              down GEMM, residual epilogue,
//   ss  = per-tile partial sums of out^2        ... plus the next norm's
//   r'  = (sum(ss) / D + eps)^-1/2              statistic, finished here
// r is the deferred RMSNorm row scale of x; Wgu interleaves the columns of Wg
// and Wu so that each column pair holds (g_j, u_j).

func.func @mlp(%x: tensor<4x8xf32>, %r: tensor<4xf32>, %wgu: tensor<8x12xf32>, %wd: tensor<6x8xf32>)
    -> (tensor<4x8xf32>, tensor<4xf32>) {
  %hE = tensor.empty() : tensor<4x6xf32>
  %h = coda.gemm %x, %wgu : tensor<4x8xf32>, tensor<8x12xf32>
      epilogue(%acc, row %rstd = %r : tensor<4xf32>) outs(%hE : tensor<4x6xf32>) {
    %s = arith.mulf %acc, %rstd : f32
    %act = coda.pair_contract (%g, %u) = %s : f32 -> !coda.pair<f32> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng : f32
      %den = arith.addf %one, %e : f32
      %silu = arith.divf %g, %den : f32
      %y = arith.mulf %silu, %u : f32
      coda.yield %y : f32
    }
    coda.yield %act : !coda.pair<f32>
  }

  %oE = tensor.empty() : tensor<4x8xf32>
  %pE = tensor.empty() : tensor<4x2xf32>
  %out, %ss = coda.gemm %h, %wd : tensor<4x6xf32>, tensor<6x8xf32>
      epilogue(%acc, tile %res = %x : tensor<4x8xf32>) outs(%oE, %pE : tensor<4x8xf32>, tensor<4x2xf32>) {
    %y = arith.addf %acc, %res : f32
    %sq = arith.mulf %y, %y : f32
    %p = coda.row_reduce sum %sq tile 4 : f32
    coda.yield %y, %p : f32, !coda.partial<f32>
  }

  %sE = tensor.empty() : tensor<4xf32>
  %sum = coda.reduce_partials sum row %ss : tensor<4x2xf32> outs(%sE : tensor<4xf32>)
  %rNext = linalg.generic {indexing_maps = [affine_map<(m) -> (m)>, affine_map<(m) -> (m)>], iterator_types = ["parallel"]}
      ins(%sum : tensor<4xf32>) outs(%sE : tensor<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %d = arith.constant 8.0 : f32
    %eps = arith.constant 1.0e-5 : f32
    %mean = arith.divf %v, %d : f32
    %t = arith.addf %mean, %eps : f32
    %rs = math.rsqrt %t : f32
    linalg.yield %rs : f32
  } -> tensor<4xf32>
  return %out, %rNext : tensor<4x8xf32>, tensor<4xf32>
}

// Deterministic inputs: sin(0.37 i + 0.11 j + seed).
func.func @wave2d(%seed: f32, %init: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %t = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%init : tensor<?x?xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %ii = arith.index_cast %i : index to i32
    %jj = arith.index_cast %j : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %fj = arith.sitofp %jj : i32 to f32
    %a = arith.constant 0.37 : f32
    %b = arith.constant 0.11 : f32
    %x = arith.mulf %fi, %a : f32
    %y = arith.mulf %fj, %b : f32
    %s = arith.addf %x, %y : f32
    %z = arith.addf %s, %seed : f32
    %v = math.sin %z : f32
    linalg.yield %v : f32
  } -> tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %s0 = arith.constant 0.0 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 2.0 : f32
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %c12 = arith.constant 12 : index
  %xe = tensor.empty(%c4, %c8) : tensor<?x?xf32>
  %ge = tensor.empty(%c8, %c12) : tensor<?x?xf32>
  %de = tensor.empty(%c6, %c8) : tensor<?x?xf32>
  %xd = call @wave2d(%s0, %xe) : (f32, tensor<?x?xf32>) -> tensor<?x?xf32>
  %gd = call @wave2d(%s1, %ge) : (f32, tensor<?x?xf32>) -> tensor<?x?xf32>
  %dd = call @wave2d(%s2, %de) : (f32, tensor<?x?xf32>) -> tensor<?x?xf32>
  %x = tensor.cast %xd : tensor<?x?xf32> to tensor<4x8xf32>
  %wgu = tensor.cast %gd : tensor<?x?xf32> to tensor<8x12xf32>
  %wd = tensor.cast %dd : tensor<?x?xf32> to tensor<6x8xf32>
  %half = arith.constant 0.5 : f32
  %re = tensor.empty() : tensor<4xf32>
  %r = linalg.fill ins(%half : f32) outs(%re : tensor<4xf32>) -> tensor<4xf32>

  %out, %rNext = call @mlp(%x, %r, %wgu, %wd) : (tensor<4x8xf32>, tensor<4xf32>, tensor<8x12xf32>, tensor<6x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  %om = bufferization.to_buffer %out : tensor<4x8xf32> to memref<4x8xf32>
  %rm = bufferization.to_buffer %rNext : tensor<4xf32> to memref<4xf32>
  %ou = memref.cast %om : memref<4x8xf32> to memref<*xf32>
  %ru = memref.cast %rm : memref<4xf32> to memref<*xf32>
  call @printMemrefF32(%ou) : (memref<*xf32>) -> ()
  call @printMemrefF32(%ru) : (memref<*xf32>) -> ()
  return
}
