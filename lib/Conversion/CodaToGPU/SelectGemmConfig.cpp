//===- SelectGemmConfig.cpp - a kernel configuration per coda.gemm --------===//
//
// Chooses the GPU kernel of every coda.gemm on memrefs from what its
// epilogue writes and reads, and pins it as the op's coda.gemm_config. Each
// rule states its reason; the measurements behind them are in
// docs/performance.md ("Ping-pong, and choosing a configuration per GEMM"
// and the sections after it) and in the commits that changed them. A GEMM
// whose epilogue the rules do not cover keeps no attribute.
//
//===----------------------------------------------------------------------===//

#include "EpiloguePlan.h"

#include "coda/ABI/KernelAbi.h"
#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

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
                          int64_t waveCost = 0, int64_t epilogueUnroll = 0) {
  return GemmConfigAttr::get(ctx, schedule, /*tile_m=*/128, tileN,
                             /*stages=*/4, clusterM, RasterOrder::alongN,
                             /*swizzle=*/8, maxK, waveCost, epilogueUnroll);
}

/// The SMs of an H100 SXM, whose waves the rules below count where M and N
/// are static (the launch counts those of its device).
constexpr int64_t kSMs = 132;

/// A weight gradient (lhs stored K x M, `transpose_a`): its output is a
/// weight of a few thousand rows and columns, whose 128 x 256 tiles can
/// fill the last wave poorly where the cooperative kernel's 128 x 128 tiles
/// take twice the waves of about half the time each. `wide` (a 128 x 256
/// tile) or that kernel, whichever's waves weigh less: decided here where M
/// and N are static, else at launch. One wave of 128 x 256 tiles weighs
/// 1.87 of 128 x 128, the weight that picks the faster kernel at every
/// measured weight shape (docs/performance.md, "Weight gradients by
/// waves").
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
                                 /*max_k=*/0, cost, c.getEpilogueUnroll());
    };
    return ArrayAttr::get(
        ctx, {weighed(wide, kWideCost), weighed(narrow, kNarrowCost)});
  }
  auto weight = [&](GemmConfigAttr c, int64_t cost) {
    return ::coda::abi::gemmWaves(m, n, batches, c.getTileM(), c.getTileN(),
                                  c.getClusterM(), kSMs) *
           cost;
  };
  return weight(wide, kWideCost) <= weight(narrow, kNarrowCost) ? wide : narrow;
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

/// What an epilogue writes and reads, which the rules weigh.
struct EpilogueShape {
  bool pairs = false, maxPartials = false, lsePartials = false,
       partials = false, f32Tile = false, fp8Tile = false,
       colPartials = false;
  /// Row partials over a tile no register schedule covers (not dividing
  /// 128).
  bool unsupportedPartials = false;
  int64_t tileOutputs = 0;
  int64_t numInputs = 0, tileInputs = 0, rowInputs = 0, colInputs = 0;
  bool pairInput = false;
  /// The pair stride (rotate-half RoPE), and whether a periodic table's
  /// period is unknown to the tile's columns.
  std::optional<int64_t> stride;
  bool dynamicPeriod = false;
  /// Group statistics (coda.group_reduce) along rows, and the widest group
  /// of columns of a statistic or grouped output.
  int64_t groupStatistics = 0, widestGroup = 0;
  /// Groups along columns, or a transposed output.
  bool columnGroups = false, transposed = false;
  bool stridedPairs() const { return stride && *stride > 1; }
};

EpilogueShape shapeOf(GemmOp op, int64_t tileN) {
  EpilogueShape e;
  for (Value value : op.getYieldOp().getValues()) {
    switch (getOutputRole(value)) {
    case OutputRole::pair:
    case OutputRole::interleaved:
      e.pairs = true;
      break;
    case OutputRole::rowPartials: {
      auto reduce = cast<RowReduceOp>(value.getDefiningOp());
      e.unsupportedPartials |= 128 % reduce.getTile() != 0;
      e.partials = true;
      e.maxPartials |= reduce.getKind() != ReductionKind::sum;
      e.lsePartials |= reduce.getKind() == ReductionKind::logsumexp;
      break;
    }
    case OutputRole::colPartials:
      e.colPartials = true;
      break;
    case OutputRole::tile:
      ++e.tileOutputs;
      // An index (a position) has no bit width until lowered.
      if (value.getType().isIntOrFloat()) {
        e.f32Tile |= value.getType().getIntOrFloatBitWidth() == 32;
        e.fp8Tile |= value.getType().getIntOrFloatBitWidth() == 8;
      }
      break;
    case OutputRole::transposed:
      e.transposed = true;
      break;
    case OutputRole::rowSelect:
    case OutputRole::grouped:
    case OutputRole::colGrouped:
      break;
    }
  }
  e.groupStatistics = llvm::count_if(
      op.getBody().getOps<GroupReduceOp>(),
      [](GroupReduceOp stat) { return stat.getAxis() == ReductionAxis::row; });
  e.columnGroups = getWidestGroup(op.getBody(), ReductionAxis::col) != 0;
  e.widestGroup = getWidestGroup(op.getBody());
  e.numInputs = op.getEpilogueInputs().size();
  for (unsigned k = 0; k < e.numInputs; ++k) {
    AccessForm form = op.getInputForm(k);
    e.tileInputs += form == AccessForm::tile;
    e.rowInputs += form == AccessForm::row;
    e.colInputs += form == AccessForm::col;
    e.pairInput |= form == AccessForm::pair;
    e.dynamicPeriod |=
        form == AccessForm::periodic && !staticPeriod(op, k, tileN);
  }
  e.stride = op.getPairStride();
  return e;
}

/// An epilogue that reads no product (an adjoint from saved values) is a
/// memory-bound pass, which the register schedules stream faster than the
/// shared-memory tile's: cooperative 128 x 256 without a cluster (no
/// operand to share), or ping-pong where the cooperative epilogue would
/// hold more per column than its registers do.
Attribute selectEpilogueOnly(MLIRContext *ctx, const EpilogueShape &e) {
  bool wide = e.pairInput || e.rowInputs > 2 || e.f32Tile;
  if (e.stridedPairs())
    wide |= e.tileInputs > 1 || e.dynamicPeriod;
  return wide ? makeConfig(ctx, GemmSchedule::pingPong, 128, 1)
              : makeConfig(ctx, GemmSchedule::cooperative, 256, 1);
}

/// Pairs at a stride (rotate-half RoPE): cooperative, whose rows share the
/// reads of a static period's congruent columns, where it does not spill;
/// warp-specialized beside a second tile output or input or a dynamic
/// period, and ping-pong beside a column input, where it would.
Attribute selectStridedPairs(MLIRContext *ctx, const EpilogueShape &e) {
  if (e.tileOutputs > 1 || e.tileInputs > 1 || e.dynamicPeriod)
    return makeConfig(ctx, GemmSchedule::warpSpecialized, 256, 1);
  if (e.colInputs > 0)
    return makeConfig(ctx, GemmSchedule::pingPong, 128, 1);
  return makeConfig(ctx, GemmSchedule::cooperative, 256, 2);
}

/// The configuration for `op` (a #coda.gemm_config or an array of them
/// dispatched by K or by waves), or null where no rule applies.
Attribute selectConfig(GemmOp op) {
  MLIRContext *ctx = op.getContext();
  GemmConfigAttr warpSpecialized =
      makeConfig(ctx, GemmSchedule::warpSpecialized, 256, 1);
  GemmConfigAttr pingPong = makeConfig(ctx, GemmSchedule::pingPong, 128, 1);
  GemmConfigAttr cooperative =
      makeConfig(ctx, GemmSchedule::cooperative, 256, 2);
  EpilogueShape e = shapeOf(op, cooperative.getTileN());
  if (e.unsupportedPartials)
    return {};
  // A pair stride the fragment layout cannot serve (heads narrower than 16
  // columns): the shared-tile epilogue.
  if (!fragmentLayoutSupports(e.stride))
    return warpSpecialized;
  if (!op.readsAccumulator())
    return selectEpilogueOnly(ctx, e);
  // One group statistic (a 1 x 128 quantization): ping-pong, whose
  // epilogue hides under the other consumer's K loop, where its groups fit
  // a 128-column tile. More: the shared-tile epilogue, whose threads hold
  // 8 columns of a row; the register schedules keep each statistic's
  // operand for the whole row of fragments live and spill.
  // Groups along columns or a transposed output (FP8 training's token-major
  // copy): ping-pong, whose fragments the warp writes transposed through its
  // staging buffer and whose epilogue hides under the other consumer's K
  // loop.
  if (e.columnGroups || e.transposed)
    return pingPong;
  if (e.groupStatistics)
    return e.groupStatistics == 1 && 128 % e.widestGroup == 0
               ? pingPong
               : warpSpecialized;
  // Column partials: a weight gradient reducing a column scale's gradient
  // runs warp-specialized (the cooperative 128 x 256 kernel spills beside
  // them), weighed against 128 x 128 tiles; others keep no configuration.
  if (e.colPartials)
    return op.getTransposeA() ? byWaves(op, warpSpecialized) : Attribute();
  if (e.stridedPairs())
    return selectStridedPairs(ctx, e);
  // Two tile inputs beside pairs (SwiGLU's derivative): ping-pong, whose
  // epilogue hides under the other consumer's K loop and does not spill,
  // up to K = 4096.
  if (e.tileInputs > 1 && e.pairs)
    return pingPongUpTo(op, 4096, warpSpecialized);
  // More per element than either register schedule holds (two tile
  // inputs, a pair input beside others): the shared-tile epilogue.
  if (e.tileInputs > 1 || (e.pairInput && e.numInputs > 1))
    return warpSpecialized;
  // More per column than the cooperative kernel's registers hold beside its
  // 128 accumulators, not ping-pong's: an f32 tile output beside inputs or
  // partials, a pair input, more than two row inputs.
  if ((e.f32Tile && (e.numInputs > 0 || e.partials)) || e.pairInput ||
      e.rowInputs > 2)
    return pingPong;
  // Log-sum-exp partials beside a tile output (an LM head keeping its
  // logits): the cooperative kernel spills in 128 x 256 tiles, not in
  // 128 x 128 ones.
  if (e.lsePartials && e.tileOutputs > 0)
    return pingPongUpTo(op, 4096,
                        makeConfig(ctx, GemmSchedule::cooperative, 128, 1));
  // Pair or interleaved outputs and max / log-sum-exp partials: ping-pong
  // up to K = 4096, the cooperative kernel's faster mainloop beyond (an
  // FP8 tile output beside the partials, a down projection's quantized
  // copy: without a cluster, beside which it spills).
  if (e.pairs || e.maxPartials)
    return pingPongUpTo(
        op, 4096,
        e.fp8Tile && e.partials
            ? makeConfig(ctx, GemmSchedule::cooperative, 256, 1)
            : cooperative);
  // Row and column inputs together (an FP8 GEMM's row-wise scales): no
  // cluster, beside which the cooperative kernel spills.
  GemmConfigAttr beyond =
      e.rowInputs > 0 && e.colInputs > 0
          ? makeConfig(ctx, GemmSchedule::cooperative, 256, 1)
          : cooperative;
  // 8-bit operands halve the K loop, doubling the epilogue's share:
  // ping-pong, which hides it, up to K = 4096.
  if (cast<MemRefType>(op.getLhs().getType()).getElementTypeBitWidth() == 8)
    return pingPongUpTo(op, 4096, beyond);
  // Plain epilogues, sum partials and inputs: cooperative in clusters of
  // two, whose staged tile stores are the fastest at the block shapes; a
  // weight gradient weighs its waves against 128 x 128 tiles.
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

SmallVector<GemmConfigAttr>
mlir::coda::getSpillFallbackConfigs(MLIRContext *ctx) {
  auto oneRow = [&](GemmSchedule schedule, int64_t tileN) {
    return makeConfig(ctx, schedule, tileN, /*clusterM=*/1, /*maxK=*/0,
                      /*waveCost=*/0, /*epilogueUnroll=*/1);
  };
  return {makeConfig(ctx, GemmSchedule::warpSpecialized, 256, 1),
          oneRow(GemmSchedule::warpSpecialized, 256),
          makeConfig(ctx, GemmSchedule::single, 128, 1),
          oneRow(GemmSchedule::single, 128)};
}
