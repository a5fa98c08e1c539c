// A Llama MLP with FP8 GEMMs, row-wise scaled (torchao's float8 row-wise
// recipe with the weight gradients in high precision): every GEMM operand
// that is FP8 is e4m3 with one f32 scale per row along K (per token for
// activations and gradients, per output row for weights), the scales
// applied in the epilogue as row and column inputs. The weight gradients
// are bf16 GEMMs (the bf16 program's kernels).
//
// @swiglu_mlp_fp8: gate/up + SwiGLU (rows of wgu interleave gate and up)
// from x and the weight quantized, keeping the gate and up pre-activations
// for the backward. @linear_fp8: a scaled FP8 GEMM to bf16 (the down
// projection, and the gate/up data gradient dx = dAcc Wgu from dAcc and
// Wgu^T quantized). @swiglu_mlp_fp8_backward: the down projection's data
// gradient dz Wd (Wd transposed and quantized per column, K-major as 8-bit
// WGMMA requires) with the SwiGLU derivative in its epilogue, writing
// dgate / dup interleaved.
// Written by hand (the backward derivation does not differentiate through
// FP8 operands): the kernels carry the roles the bf16 program's do.
// The gate/up GEMM is pinned to ping-pong 128 x 128 tiles at every K: with
// its scales and three pair outputs the cooperative 128 x 256 kernel the
// selector takes beyond K = 4096 spills (332 bytes).
// The exponential and division are approximate (fastmath afn, arcp), as in
// swiglu_mlp.mlir.
// coda-derive-backward: no

func.func @swiglu_mlp_fp8(%xq: tensor<?x?xf8E4M3FN>, %sx: tensor<?xf32>,
                          %wq: tensor<?x?xf8E4M3FN>, %sw: tensor<?xf32>)
    -> (tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %tokens = tensor.dim %xq, %c0 : tensor<?x?xf8E4M3FN>
  %rows = tensor.dim %wq, %c0 : tensor<?x?xf8E4M3FN>
  %features = arith.divui %rows, %c2 : index
  %hE = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %gE = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %uE = tensor.empty(%tokens, %features) : tensor<?x?xbf16>
  %h:3 = coda.gemm %xq, %wq transpose_b : tensor<?x?xf8E4M3FN>, tensor<?x?xf8E4M3FN>
      epilogue(%acc, row %r = %sx : tensor<?xf32>, col %c = %sw : tensor<?xf32>)
      outs(%hE, %gE, %uE : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>)
      attributes {coda.role = "forward:gemm0", coda.gemm_config = #coda.gemm_config<
                  schedule = ping_pong, tile_m = 128, tile_n = 128, stages = 4>} {
    %ar = arith.mulf %acc, %r : f32
    %v = arith.mulf %ar, %c : f32
    %y = coda.pair_contract (%g, %u) = %v : f32 -> !coda.pair<bf16> {
      %one = arith.constant 1.0 : f32
      %ng = arith.negf %g : f32
      %e = math.exp %ng fastmath<afn> : f32
      %d = arith.addf %one, %e : f32
      %silu = arith.divf %g, %d fastmath<arcp,afn> : f32
      %p = arith.mulf %silu, %u : f32
      %pb = arith.truncf %p : f32 to bf16
      coda.yield %pb : bf16
    }
    %gs = coda.pair_contract (%g, %u) = %v : f32 -> !coda.pair<bf16> {
      %gb = arith.truncf %g : f32 to bf16
      coda.yield %gb : bf16
    }
    %us = coda.pair_contract (%g, %u) = %v : f32 -> !coda.pair<bf16> {
      %ub = arith.truncf %u : f32 to bf16
      coda.yield %ub : bf16
    }
    coda.yield %y, %gs, %us : !coda.pair<bf16>, !coda.pair<bf16>, !coda.pair<bf16>
  }
  return %h#0, %h#1, %h#2 : tensor<?x?xbf16>, tensor<?x?xbf16>, tensor<?x?xbf16>
}

func.func @linear_fp8(%hq: tensor<?x?xf8E4M3FN>, %sh: tensor<?xf32>,
                    %wq: tensor<?x?xf8E4M3FN>, %sw: tensor<?xf32>) -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %tokens = tensor.dim %hq, %c0 : tensor<?x?xf8E4M3FN>
  %hidden = tensor.dim %wq, %c0 : tensor<?x?xf8E4M3FN>
  %zE = tensor.empty(%tokens, %hidden) : tensor<?x?xbf16>
  %z = coda.gemm %hq, %wq transpose_b : tensor<?x?xf8E4M3FN>, tensor<?x?xf8E4M3FN>
      epilogue(%acc, row %r = %sh : tensor<?xf32>, col %c = %sw : tensor<?xf32>)
      outs(%zE : tensor<?x?xbf16>) attributes {coda.role = "forward:gemm0"} {
    %ar = arith.mulf %acc, %r : f32
    %v = arith.mulf %ar, %c : f32
    %t = arith.truncf %v : f32 to bf16
    coda.yield %t : bf16
  }
  return %z : tensor<?x?xbf16>
}

// dz quantized per token, Wd^T (F x H) quantized per row; g and u the
// forward's pre-activations. Writes dAcc (T x 2F, dgate / dup interleaved).
func.func @swiglu_mlp_fp8_backward(%dzq: tensor<?x?xf8E4M3FN>, %sdz: tensor<?xf32>,
                                   %wdtq: tensor<?x?xf8E4M3FN>, %swdt: tensor<?xf32>,
                                   %gin: tensor<?x?xbf16>, %uin: tensor<?x?xbf16>)
    -> tensor<?x?xbf16> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %tokens = tensor.dim %dzq, %c0 : tensor<?x?xf8E4M3FN>
  %features = tensor.dim %wdtq, %c0 : tensor<?x?xf8E4M3FN>
  %rows = arith.muli %features, %c2 : index
  %dE = tensor.empty(%tokens, %rows) : tensor<?x?xbf16>
  %d = coda.gemm %dzq, %wdtq transpose_b : tensor<?x?xf8E4M3FN>, tensor<?x?xf8E4M3FN>
      epilogue(%acc, row %r = %sdz : tensor<?xf32>, col %c = %swdt : tensor<?xf32>,
               tile %gb = %gin : tensor<?x?xbf16>, tile %ub = %uin : tensor<?x?xbf16>)
      outs(%dE : tensor<?x?xbf16>) attributes {coda.role = "adjoint:gemm0"} {
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %ar = arith.mulf %acc, %r : f32
    %dh = arith.mulf %ar, %c : f32
    %g = arith.extf %gb : bf16 to f32
    %u = arith.extf %ub : bf16 to f32
    // s = sigmoid(g); dgate = dh u s (1 + g (1 - s)); dup = dh g s.
    %ng = arith.negf %g : f32
    %e = math.exp %ng fastmath<afn> : f32
    %den = arith.addf %one, %e : f32
    %s = arith.divf %one, %den fastmath<arcp,afn> : f32
    %silu = arith.mulf %g, %s : f32
    %oms = arith.subf %one, %s : f32
    %goms = arith.mulf %g, %oms : f32
    %f = arith.addf %one, %goms : f32
    %dhu = arith.mulf %dh, %u : f32
    %sf = arith.mulf %s, %f : f32
    %dg = arith.mulf %dhu, %sf : f32
    %du = arith.mulf %dh, %silu : f32
    %dgb = arith.truncf %dg : f32 to bf16
    %dub = arith.truncf %du : f32 to bf16
    %pair = coda.interleave %dgb, %dub : bf16
    coda.yield %pair : !coda.interleaved<bf16>
  }
  return %d : tensor<?x?xbf16>
}
