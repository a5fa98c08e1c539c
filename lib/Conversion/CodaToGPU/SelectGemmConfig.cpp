//===- SelectGemmConfig.cpp - a kernel configuration per coda.gemm --------===//
//
// Chooses the GPU kernel of every coda.gemm on memrefs from what its
// epilogue writes, and pins it as the op's coda.gemm_config. The rules restate measurements on the H100
// (docs/performance.md, "Choosing a configuration per GEMM"); a GEMM whose
// epilogue the rules do not cover keeps no attribute.
//
//===----------------------------------------------------------------------===//

#include "EpiloguePlan.h"

#include "coda/ABI/KernelAbi.h"
#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODASELECTGEMMCONFIG
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

GemmConfigAttr makeConfig(MLIRContext *ctx, GemmSchedule schedule,
                          int64_t tileN, int64_t clusterM, int64_t maxK = 0,
                          int64_t waveCost = 0) {
  return GemmConfigAttr::get(ctx, schedule, /*tile_m=*/128, tileN,
                             /*stages=*/4, clusterM, RasterOrder::alongN,
                             /*swizzle=*/8, maxK, waveCost);
}

/// The SMs of an H100 SXM, whose waves the rules below count where M and N
/// are static (the launch counts those of its device).
constexpr int64_t kSMs = 132;

/// A weight gradient (lhs stored K x M, `transpose_a`): its output is a
/// weight of a few thousand rows and columns, whose 128 x 256 tiles can
/// fill the last wave poorly (3072 x 2048: 192 tiles on 132 SMs, 1.45
/// waves), where the cooperative kernel's 128 x 128 tiles take 2.91 waves
/// of about half the time each. `wide` (a 128 x 256 tile) or that kernel,
/// whichever's waves weigh less: decided here where M and N are static,
/// else at launch. One wave of 128 x 256 tiles weighs 1.87 of 128 x 128:
/// what it took beside column partials at 16384 x 22016 x 4096, whose tiles
/// fill their waves (benchmarks/norm_weight_grad.py: warp-specialized 4.535
/// ms in 21 waves, cooperative 128 x 128 4.842 in 42); for plain weight
/// gradients (cooperative 128 x 256 in clusters of two) 1.76-1.81 there and
/// at 4096 x 11008, and any weight from 1.84 to 1.90 picks the faster
/// kernel at each of the 13 shapes of benchmarks/gemm_configs.py --layout
/// tn in docs/performance.md ("Weight gradients by waves").
Attribute byWaves(GemmOp op, GemmConfigAttr wide) {
  constexpr int64_t kWideCost = 187, kNarrowCost = 100;
  MLIRContext *ctx = op.getContext();
  GemmConfigAttr narrow = makeConfig(ctx, GemmSchedule::cooperative, 128, 1);
  int64_t m =
      cast<MemRefType>(op.getLhs().getType()).getDimSize(op.getLhsMDim());
  int64_t n =
      cast<MemRefType>(op.getRhs().getType()).getDimSize(op.getRhsNDim());
  // A batched GEMM's tiles are every batch's (as the launch counts them).
  auto lhsType = cast<MemRefType>(op.getLhs().getType());
  int64_t batches = lhsType.getRank() == 3 ? lhsType.getDimSize(0) : 1;
  if (ShapedType::isDynamic(m) || ShapedType::isDynamic(n) ||
      ShapedType::isDynamic(batches)) {
    auto weighed = [&](GemmConfigAttr c, int64_t cost) -> Attribute {
      return GemmConfigAttr::get(ctx, c.getSchedule(), c.getTileM(),
                                 c.getTileN(), c.getStages(), c.getClusterM(),
                                 c.getRaster(), c.getSwizzle(),
                                 /*max_k=*/0, cost);
    };
    return ArrayAttr::get(
        ctx, {weighed(wide, kWideCost), weighed(narrow, kNarrowCost)});
  }
  auto weight = [&](GemmConfigAttr c, int64_t cost) {
    return ::coda::abi::gemmWaves(m, n, batches, c.getTileM(), c.getTileN(),
                          c.getClusterM(), kSMs) *
           cost;
  };
  return weight(wide, kWideCost) <= weight(narrow, kNarrowCost) ? wide
                                                                 : narrow;
}

/// Ping-pong where K <= maxK, whose epilogue runs under the other consumer's
/// K loop, else `beyond` (by default the cooperative kernel in clusters of
/// two, whose mainloop is faster). With K static that is one configuration;
/// else both, dispatched at launch (the kernels are shape-generic).
Attribute pingPongUpTo(GemmOp op, int64_t maxK, GemmConfigAttr beyond = {}) {
  MLIRContext *ctx = op.getContext();
  if (!beyond)
    beyond = makeConfig(ctx, GemmSchedule::cooperative, 256, 2);
  int64_t k =
      cast<MemRefType>(op.getLhs().getType()).getDimSize(op.getLhsKDim());
  if (!ShapedType::isDynamic(k))
    return k <= maxK ? makeConfig(ctx, GemmSchedule::pingPong, 128, 1) : beyond;
  return ArrayAttr::get(
      ctx, {makeConfig(ctx, GemmSchedule::pingPong, 128, 1, maxK), beyond});
}

/// The configuration for `op` (a #coda.gemm_config or an array of them
/// dispatched by K), or null where no rule applies.
Attribute selectConfig(GemmOp op) {
  MLIRContext *ctx = op.getContext();
  GemmConfigAttr warpSpecialized =
      makeConfig(ctx, GemmSchedule::warpSpecialized, 256, 1);
  GemmConfigAttr pingPong = makeConfig(ctx, GemmSchedule::pingPong, 128, 1);
  GemmConfigAttr cooperative =
      makeConfig(ctx, GemmSchedule::cooperative, 256, 2);

  // What the epilogue writes and reads, which the rules below weigh.
  bool pairs = false, maxPartials = false, lsePartials = false,
       partials = false, f32Tile = false, colPartials = false;
  int64_t tileOutputs = 0;
  for (Value value : op.getYieldOp().getValues()) {
    switch (getOutputRole(value)) {
    case OutputRole::pair:
    case OutputRole::interleaved:
      pairs = true;
      break;
    case OutputRole::rowPartials: {
      auto reduce = cast<RowReduceOp>(value.getDefiningOp());
      // Every register schedule's row partials cover divisors of 128.
      if (128 % reduce.getTile() != 0)
        return {};
      partials = true;
      maxPartials |= reduce.getKind() != ReductionKind::sum;
      lsePartials |= reduce.getKind() == ReductionKind::logsumexp;
      break;
    }
    case OutputRole::colPartials:
      colPartials = true;
      break;
    case OutputRole::tile:
      ++tileOutputs;
      f32Tile |= value.getType().getIntOrFloatBitWidth() == 32;
      break;
    case OutputRole::rowSelect:
      break;
    }
  }
  unsigned numInputs = op.getEpilogueInputs().size();
  int64_t tileInputs = 0, rowInputs = 0, colInputs = 0;
  bool pairInput = false;
  for (unsigned k = 0; k < numInputs; ++k) {
    AccessForm form = op.getInputForm(k);
    tileInputs += form == AccessForm::tile;
    rowInputs += form == AccessForm::row;
    colInputs += form == AccessForm::col;
    pairInput |= form == AccessForm::pair;
  }
  // Pairs at a stride (rotate-half RoPE): cooperative where every periodic
  // table has a static period, whose reads the rows' congruent columns share
  // (measured: 0.634 ms against 0.744 ms warp-specialized, hidden 2048);
  // else warp-specialized (cooperative 0.723 ms but spilling, ping-pong
  // 0.80 ms; docs/performance.md).
  std::optional<int64_t> stride = op.getPairStride();
  // A pair stride the register epilogues' fragment layout cannot serve
  // (not a multiple of 8: heads narrower than 16 columns): warp-specialized.
  if (!fragmentLayoutSupports(stride))
    return warpSpecialized;
  // A RoPE table whose period the tile's columns do not show statically.
  bool dynamicPeriod = false;
  for (unsigned k = 0; k < numInputs; ++k)
    dynamicPeriod |= op.getInputForm(k) == AccessForm::periodic &&
                     !staticPeriod(op, k, cooperative.getTileN());
  // An epilogue that reads no product (an adjoint from saved values) makes
  // the kernel its epilogue alone (GemmKernelConfig::epilogueOnly), a
  // memory-bound pass: the register schedules stream its inputs at 2.1-2.8
  // TB/s where the warp-specialized kernel, whose epilogue goes through a
  // shared-memory tile, reached 1.3-1.8 (coda_torch's adjoints at 16384
  // tokens, hidden 2048 and 4096, benchmarks/epilogue_only.py: cooperative
  // 1.31-1.50x of warp-specialized, ping-pong 1.27-1.46x; Qwen2's Q/K/V
  // bias adjoint, whose column partials kept it warp-specialized before,
  // 1.54-1.55x). Cooperative in 128 x 256 tiles, without a cluster (no
  // operand to share): 128 x 128 tiles re-read RoPE's table rows once per
  // 128 columns instead of 256, and ran 0.85-0.98x even with two or three
  // CTAs per SM. Ping-pong where the cooperative epilogue holds more per
  // column than its registers do: RoPE's strided pairs beside two tile
  // inputs (the Q/K/V adjoint spills 234 bytes, ping-pong nothing) or
  // with a table of no static period (the GPU suite's rope_adjoint spills
  // 16), a pair input, more than two row inputs or an f32 tile output.
  if (!op.readsAccumulator()) {
    bool wide = pairInput || rowInputs > 2 || f32Tile;
    if (stride && *stride > 1)
      wide |= tileInputs > 1 || dynamicPeriod;
    return wide ? pingPong
                : makeConfig(ctx, GemmSchedule::cooperative, 256, 1);
  }
  // Column partials: a weight gradient reducing a column scale's gradient
  // (norm_weight_grad.mlir: gamma's, beside W as a tile input and gamma as
  // a column input) runs warp-specialized, the cooperative kernel spilling
  // beside them in 128 x 256 tiles (800 bytes; ping-pong 46) and not in
  // 128 x 128 ones, which byWaves weighs against it. Other column partials
  // keep no configuration.
  if (colPartials)
    return op.getTransposeA() ? byWaves(op, warpSpecialized) : Attribute();
  if (stride && *stride > 1) {
    // Beside a second tile output or a second tile input (a deferred norm's
    // Q/K/V GEMM saving its accumulator, and its adjoint reading it with
    // dY), the cooperative kernel spills (ptxas: coda_torch's
    // linear_norm_qkv_rope 72 bytes, its adjoint 234); warp-specialized
    // spills nothing.
    if (tileOutputs > 1 || tileInputs > 1 || dynamicPeriod)
      return warpSpecialized;
    // Beside a column input (a bias added before the rotation) the
    // cooperative kernel spills too (linear_qkv_rope_bias 172 bytes,
    // linear_norm_qkv_rope_bias 188); ping-pong spills nothing and was as
    // fast as warp-specialized or faster (16384 tokens, hidden 2048 / 4096:
    // 0.364 / 1.199 ms against 0.373 / 1.375; benchmarks/op_variants.py).
    if (colInputs > 0)
      return pingPong;
    return cooperative;
  }
  // Epilogues that keep more per element live beside the accumulators
  // than either register schedule holds: two tile inputs, or a pair input
  // beside other inputs. The warp-specialized kernel, whose epilogue reads
  // the accumulators from shared memory, spills nothing. Measured in ptxas
  // spill stores, cooperative in clusters of two / ping-pong: coda_torch's
  // swiglu_mlp_backward (two tile inputs) 752 / 272 bytes and
  // linear_residual_norm_backward (two tile inputs) 132 / 16, the GPU
  // suite's swiglu_backward_adjoint (pair and row inputs) 440 / 28 (104 / 0
  // since its pair columns are made where used; ping-pong not yet timed
  // against the warp-specialized kernel for it).
  // SwiGLU's derivative (two tile inputs, an interleaved output; with a
  // deferred norm's row scale and its gradient's row partials, or an FP8
  // GEMM's row and column scales) spills nothing under ping-pong, whose
  // epilogue hides under the other consumer's K loop: 16384 tokens, hidden
  // 2048 / 4096, against warp-specialized, norm_swiglu_mlp's 0.812 / 2.515
  // ms against 0.962 / 3.270 (cooperative 128 x 128: 0.871 / 2.979),
  // swiglu_mlp_fp8's 0.648 / 1.594 against 0.743 / 2.154
  // (benchmarks/op_variants.py).
  if (tileInputs > 1 && pairs)
    return pingPongUpTo(op, 4096, warpSpecialized);
  if (tileInputs > 1 || (pairInput && numInputs > 1))
    return warpSpecialized;
  // Epilogues that keep more per column live beside the cooperative
  // kernel's 128 accumulators than its registers hold, where ping-pong's
  // 128 do not spill: an f32 tile output (written from the registers, not
  // staged) beside inputs or partials, a pair input, or more than two row
  // inputs. Measured in ptxas spill stores, cooperative against ping-pong:
  // the GPU suite's residual_norm (f32 output, a tile input, row partials)
  // 636 against 0 bytes, coda_torch's linear_cross_entropy_backward (four
  // row inputs) 44 against 0. An f32 output alone spills in neither and
  // runs faster cooperative (plain_nn, f16 in, f32 out: 0.58 ms against
  // 0.63 ms ping-pong at 16384 x 2048 x 6144).
  if ((f32Tile && (numInputs > 0 || partials)) || pairInput || rowInputs > 2)
    return pingPong;
  // Log-sum-exp partials beside a tile output (an LM head keeping its
  // logits for the backward: coda_torch's linear_norm_cross_entropy,
  // variant `saved`): the cooperative kernel in 128 x 256 tiles spills 392
  // bytes, in 128 x 128 tiles without a cluster nothing, ping-pong 68
  // (ptxas -v); beyond K = 4096 the 128 x 128 tiles are taken, unmeasured.
  if (lsePartials && tileOutputs > 0)
    return pingPongUpTo(op, 4096,
                        makeConfig(ctx, GemmSchedule::cooperative, 128, 1));
  // Pair or interleaved outputs (SwiGLU) and max / log-sum-exp partials:
  // measured per K (docs/performance.md, "Each schedule at each block
  // shape" and "Configurations dispatched by K"), ping-pong is 5-15 %
  // faster at K = 2048 and 4096, about even at K = 8192, and the cooperative
  // kernel 4-10 % faster from K = 11008 on.
  if (pairs || maxPartials)
    return pingPongUpTo(op, 4096);
  // Row and column inputs together (the row-wise scales of an FP8 GEMM):
  // in clusters of two the cooperative kernel spills 32 bytes (ptxas -v,
  // the GPU suite's fp8_rowwise, and the same epilogue on bf16 operands),
  // without a cluster nothing, and it ran as fast or faster there
  // (docs/performance.md, "FP8 GEMMs").
  GemmConfigAttr beyond = rowInputs > 0 && colInputs > 0
                              ? makeConfig(ctx, GemmSchedule::cooperative, 256, 1)
                              : cooperative;
  // 8-bit operands: the K loop runs twice as fast, so the epilogue is twice
  // the share of a tile and ping-pong, which hides it under the other
  // consumer's K loop, wins up to K = 4096 (FP8 plain and row-wise scaled
  // GEMMs at the block shapes: 1.044x / 0.947x of cuBLAS with fast
  // accumulation, against 1.015x / 0.935x cooperative everywhere).
  if (cast<MemRefType>(op.getLhs().getType()).getElementTypeBitWidth() == 8)
    return pingPongUpTo(op, 4096, beyond);
  // Plain epilogues, sum partials and inputs: cooperative in clusters of
  // two, whose staged tile stores beat ws and ping-pong at every block
  // shape. (A column input measured ping-pong 4 % ahead at K = 2048 in one
  // process, cooperative 2 % ahead in another: h100-2026-11-24-dispatch.json.)
  // A weight gradient weighs its waves against 128 x 128 tiles (byWaves).
  if (op.getTransposeA())
    return byWaves(op, beyond);
  return beyond;
}

struct CodaSelectGemmConfigPass
    : mlir::coda::impl::CodaSelectGemmConfigBase<CodaSelectGemmConfigPass> {
  void runOnOperation() override {
    getOperation().walk([](GemmOp op) {
      if (!op.hasPureBufferSemantics() ||
          op->hasAttr(GemmConfigAttr::getAttrName()))
        return;
      if (Attribute config = selectConfig(op))
        op->setAttr(GemmConfigAttr::getAttrName(), config);
    });
  }
};

} // namespace
