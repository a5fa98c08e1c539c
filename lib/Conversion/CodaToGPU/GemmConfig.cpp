//===- GemmConfig.cpp - the kernel configuration of a coda.gemm -----------===//
//
// What kernel a coda.gemm on memrefs lowers to: its schedule, tile, stages,
// cluster and epilogue buffers (GemmKernelConfig), from its pinned
// coda.gemm_config or else the coda-to-gpu options, checked against what
// the epilogue, the operands and shared memory allow; and the order in which
// a CTA's tiles are taken (assignTile).
//
//===----------------------------------------------------------------------===//

#include "EpiloguePlan.h"

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Conversion/CodaToGPU/KernelOptions.h"
#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"
#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

const ScheduleTraits &
mlir::coda::gpu_lowering::scheduleTraits(Schedule schedule) {
  //                                    warp-spec. persist. registers
  //                                    consumers epilogues barriers
  static const ScheduleTraits single{false, false, false, 1, 1, 0};
  static const ScheduleTraits warpSpecialized{true, false, false, 2, 1, 0};
  static const ScheduleTraits staged{true, true, false, 2, 1, 2};
  static const ScheduleTraits cooperative{true, true, true, 2, 1, 0};
  static const ScheduleTraits pingPong{true, true, true, 1, 2, 2};
  switch (schedule) {
  case Schedule::single:
    return single;
  case Schedule::warpSpecialized:
    return warpSpecialized;
  case Schedule::staged:
    return staged;
  case Schedule::cooperative:
    return cooperative;
  case Schedule::pingPong:
    return pingPong;
  }
  llvm_unreachable("unknown GEMM schedule");
}

namespace {

/// The most shared memory, static and dynamic, an sm_90 CTA may use.
constexpr int64_t kMaxSharedBytes = 227 * 1024;

/// Whether `config`'s shared memory fits a CTA.
bool fitsSharedMemory(const GemmKernelConfig &config) {
  return config.sharedBytes() + config.staticSharedBytes() <= kMaxSharedBytes;
}

/// TMA reads rows whose byte stride and start are 16-byte aligned from a
/// tensor whose innermost stride is 1. Checks what is static here; the runtime
/// checks the rest.
LogicalResult checkTmaOperand(GemmOp op, StringRef name, Value operand) {
  auto type = cast<MemRefType>(operand.getType());
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return op.emitOpError() << name << " must have a strided layout for TMA, "
                            << "got " << type;
  if (strides.back() != 1)
    return op.emitOpError()
           << name << " must be contiguous along its last dimension for TMA "
           << "(stride 1), got stride "
           << (ShapedType::isDynamic(strides.back())
                   ? std::string("?")
                   : std::to_string(strides.back()));
  int64_t rowStride = strides[strides.size() - 2];
  if (!ShapedType::isDynamic(rowStride) && (rowStride * bytes) % 16 != 0)
    return op.emitOpError()
           << name << " row stride is " << rowStride << " elements ("
           << rowStride * bytes
           << " bytes); TMA needs a multiple of 16 bytes (pad the "
           << "rows to a multiple of " << 16 / bytes << " elements)";
  // A batched operand's batch stride: TMA's outer strides too.
  if (strides.size() == 3 && !ShapedType::isDynamic(strides[0]) &&
      (strides[0] * bytes) % 16 != 0)
    return op.emitOpError()
           << name << " batch stride is " << strides[0] << " elements ("
           << strides[0] * bytes << " bytes); TMA needs a multiple of 16 bytes";
  if (!ShapedType::isDynamic(offset) && (offset * bytes) % 16 != 0)
    return op.emitOpError() << name << " starts " << offset * bytes
                            << " bytes into its buffer; TMA needs a "
                            << "16-byte aligned start";
  return success();
}

/// The epilogue's operand and output types that the sm_90a lowering takes.
LogicalResult checkEpilogueTypes(GemmOp op) {
  // Groups along columns are a whole column of the tile (128 rows), whose
  // statistic the epilogue finishes through shared memory before its rows;
  // other heights and positions (argmax) have the CPU's reference lowering
  // (--coda-lower-to-linalg) only.
  for (Operation &inner : op.getBody().without_terminator()) {
    int64_t width = getGroupWidth(inner, ReductionAxis::col);
    if (!width)
      continue;
    if (width != kColumnGroupRows)
      return inner.emitOpError("groups along columns lower on sm_90a as "
                               "whole columns of a ")
             << kColumnGroupRows << "-row tile, got " << width
             << " rows; --coda-lower-to-linalg gives their meaning on the CPU";
    auto stat = dyn_cast<GroupReduceOp>(inner);
    if (stat && stat.getKind() == GroupStatistic::argmax)
      return inner.emitOpError("argmax along columns has no sm_90a "
                               "lowering; --coda-lower-to-linalg gives its "
                               "meaning on the CPU");
    if (op.isBatched())
      return inner.emitOpError("groups along columns of a batched GEMM have "
                               "no sm_90a lowering");
  }
  for (Value value : op.getYieldOp().getValues())
    if (isa<TransposedType>(value.getType()) && op.isBatched())
      return op.emitOpError("a batched GEMM's transposed output has no sm_90a "
                            "lowering");
  // 8-bit floats are GEMM operands and outputs; an epilogue reading them
  // would take neither the prefetch nor the staging of 16-bit inputs.
  for (auto [k, input] : llvm::enumerate(op.getEpilogueInputs()))
    if (auto type = dyn_cast<MemRefType>(input.getType());
        type && isa<Float8E4M3FNType, Float8E5M2Type>(type.getElementType()))
      return op.emitOpError("epilogue input #")
             << k << " holds " << type.getElementType()
             << "; the sm_90a lowering reads 16- and 32-bit epilogue "
                "inputs (FP8 goes in as lhs and rhs)";
  // FP8 outputs are tile outputs: pair and interleaved ones have no tested
  // lowering yet.
  for (auto [i, value] : llvm::enumerate(op.getYieldOp().getValues())) {
    OutputRole role = getOutputRole(value);
    auto type = cast<MemRefType>(op.getOutputs()[i].getType());
    if ((role == OutputRole::pair || role == OutputRole::interleaved) &&
        isa<Float8E4M3FNType, Float8E5M2Type>(type.getElementType()))
      return op.emitOpError("output #")
             << i << " holds " << type.getElementType() << " per "
             << (role == OutputRole::pair ? "column pair" : "interleaved pair")
             << "; the sm_90a lowering writes FP8 tile outputs only";
  }
  return success();
}

/// The tiles that block reductions fix (a partial covers exactly one CTA's
/// tile), and the reductions that fixed them, for diagnostics.
struct ReductionTiles {
  std::optional<int64_t> rowTile, colTile;
  /// The widest group of columns of a group statistic or grouped output.
  std::optional<int64_t> groupWidth;
  /// The height of groups along columns (the tile's), 0 where none.
  int64_t colGroupRows = 0;
  Operation *rowReduce = nullptr, *colReduce = nullptr;
};

/// Fixes `config`'s tile to `op`'s block reductions.
FailureOr<ReductionTiles> fixReductionTiles(GemmOp op,
                                            GemmKernelConfig &config) {
  ReductionTiles t;
  // Block reductions fix the tile: a partial covers exactly one CTA's tile.
  for (Value value : op.getYieldOp().getValues()) {
    Operation *def = value.getDefiningOp();
    std::optional<int64_t> *slot = nullptr;
    int64_t tile = 0;
    if (auto reduce = dyn_cast_or_null<RowReduceOp>(def)) {
      slot = &t.rowTile;
      tile = reduce.getTile();
      t.rowReduce = def;
    } else if (auto reduce = dyn_cast_or_null<ColReduceOp>(def)) {
      slot = &t.colTile;
      tile = reduce.getTile();
      t.colReduce = def;
      ++config.numColPartials;
    } else {
      continue;
    }
    if (*slot && **slot != tile)
      return op.emitOpError("block reductions along one axis must share a "
                            "tile on the GPU, got ")
             << **slot << " and " << tile;
    *slot = tile;
  }
  // A row reduction's tile t: the CTA tile may span several partials when
  // t divides it, each reduced by t / 8 consecutive lanes of a row; else the
  // tile is t.
  if (t.rowTile) {
    int64_t lanes = *t.rowTile / kEpilogueColumnsPerThread;
    bool divides = *t.rowTile % kEpilogueColumnsPerThread == 0 &&
                   llvm::isPowerOf2_64(lanes) && config.tileN % *t.rowTile == 0;
    if (std::optional<int64_t> stride = op.getPairStride())
      divides = divides && *t.rowTile % (2 * *stride) == 0;
    if (!divides)
      config.tileN = *t.rowTile;
    config.rowPartialTile = *t.rowTile;
  }
  if (t.colTile)
    config.tileM = *t.colTile;
  // A column's group is the whole tile column.
  if (getWidestGroup(op.getBody(), ReductionAxis::col)) {
    config.tileM = t.colGroupRows = kColumnGroupRows;
    config.numColumnStatistics = llvm::count_if(
        op.getBody().getOps<GroupReduceOp>(), [](GroupReduceOp stat) {
          return stat.getAxis() == ReductionAxis::col;
        });
    config.numColumnDerived = analyzeColumnUniform(op).derived().size();
  }
  // Groups lie inside the tile: its N a multiple of the widest (widths are
  // powers of two, so of every one).
  if (int64_t widest = getWidestGroup(op.getBody()))
    t.groupWidth = widest;
  if (t.groupWidth) {
    int64_t width = *t.groupWidth;
    if (std::optional<int64_t> stride = op.getPairStride();
        stride && width % (2 * *stride) != 0)
      return op.emitOpError("groups of ")
             << width << " columns need pairwise ops whose blocks of "
             << 2 * *stride << " columns lie inside a group";
    if (config.tileN % width != 0) {
      if (t.rowTile)
        return op.emitOpError("row partials of tile ")
               << *t.rowTile << " and groups of " << width
               << " columns need a tile both divide; use a partial tile that "
                  "is a multiple of the group width";
      config.tileN = width;
    }
  }
  return t;
}

/// The schedule of `config`: `requested` where it can serve `op` (else,
/// said in a warning, warp-specialized), its cluster and tile order, and
/// the epilogue-only kernel of an epilogue that reads no product.
LogicalResult chooseSchedule(GemmOp op, GemmKernelConfig &config,
                             const ReductionTiles &t, Schedule requested,
                             int64_t clusterM, RasterOrder raster,
                             int64_t swizzle) {
  std::optional<int64_t> pairStride = op.getPairStride();
  // Whether the tile may narrow to `narrowN` columns: its row partials and
  // pairs still fit in one tile.
  auto narrowsTo = [&](int64_t narrowN) {
    return config.tileN >= narrowN &&
           (!t.rowTile || narrowN % *t.rowTile == 0) &&
           (!t.groupWidth || narrowN % *t.groupWidth == 0) &&
           (!pairStride || narrowN % (2 * *pairStride) == 0);
  };
  // The register schedules: a producer warpgroup that gives its registers
  // to two consumer warpgroups running the epilogue from theirs.
  auto useRegisterSchedule = [&](Schedule schedule) {
    config.schedule = schedule;
    config.numThreads = 384;
    config.epilogueThreads = 128 * config.consumersPerTile();
    config.producerRegisters = 40;
    config.consumerRegisters = 232;
  };
  // Said, not silent: an option reaches only the GEMMs it can serve.
  auto notApplied = [&](StringRef needs) {
    op.emitWarning() << scheduleOptionName(requested)
                     << " schedule not applied: it needs " << needs;
  };
  // Ping-pong: persistent 128 x 128 tiles, each computed and written by one
  // consumer warpgroup from its registers (128 accumulators per thread; a
  // wider tile would not fit beside the epilogue).
  constexpr int64_t kPingPongTileN = 128;
  if (requested == Schedule::pingPong) {
    if (config.tileM == 128 && fragmentLayoutSupports(pairStride) &&
        narrowsTo(kPingPongTileN)) {
      useRegisterSchedule(Schedule::pingPong);
      config.tileN = kPingPongTileN;
    } else {
      notApplied("128-row tiles at least 128 columns wide whose row partials "
                 "and pairs fit in 128 columns (pair stride 1 or a multiple "
                 "of 8)");
    }
  }
  // Cooperative: persistent 128-row tiles whose two consumer warpgroups run
  // the epilogue from their registers.
  if (requested == Schedule::cooperative) {
    if (config.tileM == 128 && fragmentLayoutSupports(pairStride)) {
      useRegisterSchedule(Schedule::cooperative);
      // Statistics down the columns and transposed outputs take 128-column
      // tiles: the eight warps' transposed staging of 256 columns does not
      // fit beside the ring.
      if (t.colGroupRows ||
          llvm::any_of(op.getYieldOp().getValues(), [](Value v) {
            return isa<TransposedType>(v.getType());
          }))
        config.tileN = 128;
    } else {
      notApplied("128-row tiles and pairs at stride 1 or a multiple of 8");
    }
  }
  // Staged (each tile's epilogue overlapped with the next tile's mainloop)
  // where its 128 x 128 tile serves: the f32 staging tile and the ring have
  // to fit in shared memory together.
  constexpr int64_t kStagedTileN = 128;
  if (requested == Schedule::staged) {
    if (config.tileM == 128 && narrowsTo(kStagedTileN)) {
      config.schedule = Schedule::staged;
      config.tileN = kStagedTileN;
      config.numThreads = 384;
      // Warps 2-3 of the producer warpgroup: 64 threads cover 4 rows of 128
      // columns per pass, which divides the tile (three warps' 6 rows do
      // not).
      config.epilogueThreads = 64;
    } else {
      notApplied("128-row tiles at least 128 columns wide whose row partials "
                 "and pairs fit in 128 columns");
    }
  }
  // Otherwise warp-specialized (two consumer warpgroups of 64 rows each)
  // where it pays: 128 x 256 tiles. Narrower tiles run one warpgroup per CTA.
  if (config.schedule == Schedule::single && requested != Schedule::single &&
      config.tileM == 128 && config.tileN == 256) {
    config.schedule = Schedule::warpSpecialized;
    config.numThreads = 384;
    config.epilogueThreads = 256;
  }
  if (config.schedule == Schedule::single && !t.colTile && !t.colGroupRows &&
      config.tileM * config.tileN > 128 * 128)
    config.tileM = 64;
  if (clusterM != 1 && clusterM != 2)
    return op.emitOpError("cluster M must be 1 or 2, got ") << clusterM;
  if (swizzle < 1)
    return op.emitOpError("raster swizzle must be at least 1 tile, got ")
           << swizzle;
  config.raster = raster;
  config.rasterGroup = swizzle;
  // Said, not silent: a module-wide cluster option reaches only the GEMMs
  // that run the cooperative schedule.
  if (clusterM > 1 && !config.registerEpilogue())
    op.emitWarning("cluster-m=")
        << clusterM
        << " not applied: clusters of CTAs need the cooperative or ping-pong "
           "schedule (128-row tiles, pair stride 1 or a multiple of 8)";
  else
    config.clusterM = clusterM;
  // An epilogue that reads no product needs none of the mainloop's frame
  // (GemmKernelConfig::epilogueOnly) where no cluster was asked for.
  if (config.registerEpilogue() && !op.readsAccumulator() &&
      config.clusterM == 1) {
    config.epilogueOnly = true;
    config.stages = 0;
    config.numThreads = config.epilogueThreads;
    config.producerRegisters = config.consumerRegisters = 0;
  }

  return success();
}

/// A register epilogue's staging buffers, row buffers, TMA stores and
/// pipelined slots, each where it fits beside what came before.
void placeEpilogueBuffers(GemmOp op, GemmKernelConfig &config) {
  // Register epilogues stage their 16-bit tile inputs and tile and pair
  // outputs (and 8-bit outputs: see stagesOutput) where the buffers fit
  // beside the ring and the scratch (cooperative 128 x 256 with 4 stages:
  // with no column partials), then their column and periodic input rows
  // where those fit as well.
  if (config.registerEpilogue()) {
    // Transposed outputs go through the warp's staging always: stored from
    // the fragments, each element would be a store of its own.
    for (auto [value, output] :
         llvm::zip(op.getYieldOp().getValues(), op.getOutputs()))
      if (isa<TransposedType>(value.getType()))
        config.transposedStagingBytes +=
            config.transposedStagingBytesOf(output);
    for (unsigned i = 0, e = op.getYieldOp().getValues().size(); i < e; ++i)
      config.stagedTiles |= stagesOutput(op, i, config.schedule);
    for (unsigned k = 0, e = op.getEpilogueInputs().size(); k < e; ++k)
      config.stagedTiles |= stagesInput(op, k);
    if (!fitsSharedMemory(config))
      config.stagedTiles = false;
    // Then the rows of column and periodic inputs, where they fit too.
    config.stagedInputRowBytes = inputRowStagingBytes(op, config.tileN);
    if (!fitsSharedMemory(config))
      config.stagedInputRowBytes = 0;
    // Staged tile outputs leave with TMA stores where the buffers, each
    // warp's at a multiple of 128 bytes, still fit.
    // (A batched output would need a 3-D store descriptor: its staged
    // rows leave through the threads' 16-byte stores instead.)
    if (config.stagedTiles && !config.batched) {
      for (unsigned i = 0, e = op.getOutputs().size(); i < e; ++i)
        config.tmaStores |= storesWithTma(op, i, config);
      if (!fitsSharedMemory(config))
        config.tmaStores = false;
    }
    // Then the staged tile inputs that the epilogue does not prefetch, each
    // through slots of its own, where those fit as well.
    if (config.stagedTiles) {
      config.pipelinedInputs = pipelinedStagedInputs(op, config).size();
      if (!fitsSharedMemory(config))
        config.pipelinedInputs = 0;
    }
  }
}

/// Everything the kernel of `config` needs of `op` and of the target, with
/// the reduction that set a tile the kernel cannot take named in a note.
LogicalResult checkConfig(GemmOp op, const GemmTarget &target,
                          const GemmKernelConfig &config, int64_t stages,
                          const ReductionTiles &t) {
  // A tile that a block reduction set and the kernel cannot take: the
  // error names the reduction, in a note at its line.
  auto noteReduction = [&](Operation *reduce, int64_t tile, StringRef what,
                           StringRef legal) {
    if (!reduce)
      return;
    op.getContext()->getDiagEngine().emit(reduce->getLoc(),
                                          DiagnosticSeverity::Note)
        << "the tile " << what << " comes from this reduction's tile " << tile
        << ": its partials each cover one CTA tile (" << legal << ")";
  };
  // The epilogue gives each row tileN / 8 consecutive lanes of one warp.
  if (config.tileN != 64 && config.tileN != 128 && config.tileN != 256) {
    op.emitOpError("tile N must be 64, 128 or 256, got ") << config.tileN;
    noteReduction(config.tileN == config.rowPartialTile ? t.rowReduce : nullptr,
                  config.tileN, "N",
                  "row reductions take tiles of 8, 16, 32, 64, 128 or 256 "
                  "columns");
    return failure();
  }
  // A shared-tile epilogue covers the tile in whole passes of
  // epilogueRowsPerPass rows.
  if (!config.registerEpilogue() &&
      (config.epilogueRowsPerPass() == 0 ||
       config.tileM % config.epilogueRowsPerPass() != 0))
    return op.emitOpError("internal: a ")
           << config.epilogueThreads << "-thread epilogue over " << config.tileN
           << "-column rows does not cover " << config.tileM
           << "-row tiles in whole passes";
  if (stages < 2 && !config.epilogueOnly)
    return op.emitOpError("the TMA ring needs at least 2 stages, got ")
           << stages;
  if (std::optional<int64_t> stride = op.getPairStride()) {
    if (config.tileN % (2 * *stride) != 0)
      return op.emitOpError("pair stride ")
             << *stride << " needs tile N to be a multiple of " << 2 * *stride
             << ", got " << config.tileN;
  }
  if (failed(target.checkOperands(op, config))) {
    noteReduction(
        t.colTile && config.tileM == *t.colTile ? t.colReduce : nullptr,
        config.tileM, "M", "column reductions take tiles of 64 or 128 rows");
    return failure();
  }
  if (failed(checkTmaOperand(op, "lhs", op.getLhs())) ||
      failed(checkTmaOperand(op, "rhs", op.getRhs())))
    return failure();
  if (!fitsSharedMemory(config))
    return op.emitOpError("kernel needs ")
           << config.sharedBytes() + config.staticSharedBytes()
           << " bytes of shared memory (at most " << kMaxSharedBytes
           << "); use fewer stages or a smaller tile";
  return success();
}

/// Picks the tile shape for `op` and checks everything the kernel needs.
FailureOr<GemmKernelConfig> chooseConfig(GemmOp op, const GemmTarget &target,
                                         int64_t tileM, int64_t tileN,
                                         int64_t stages, Schedule schedule,
                                         int64_t clusterM, RasterOrder raster,
                                         int64_t swizzle) {
  if (!op.hasPureBufferSemantics())
    return op.emitOpError("GPU lowering takes coda.gemm on memrefs; "
                          "bufferize first (one-shot-bufferize)");
  if (failed(checkEpilogueTypes(op)))
    return failure();
  // The verifier guarantees one operand element type.
  Type lhsElement = op.getLhsType().getElementType();

  GemmKernelConfig config;
  config.operandType = lhsElement;
  config.operandBytes = lhsElement.getIntOrFloatBitWidth() / 8;
  config.tileK = 128 / std::max<int64_t>(config.operandBytes, 1);
  config.tileM = tileM;
  config.tileN = tileN;
  config.stages = stages;
  config.rhsKMajor = op.getTransposeB();
  config.lhsKMajor = !op.getTransposeA();
  config.batched = op.isBatched();
  config.rhsBatched = op.getRhsType().getRank() == 3;

  FailureOr<ReductionTiles> tiles = fixReductionTiles(op, config);
  if (failed(tiles) ||
      failed(chooseSchedule(op, config, *tiles, schedule, clusterM, raster,
                            swizzle)))
    return failure();
  placeEpilogueBuffers(op, config);
  if (failed(checkConfig(op, target, config, stages, *tiles)))
    return failure();
  return config;
}

} // namespace

FailureOr<SmallVector<GemmVariant>>
mlir::coda::gpu_lowering::configureGemm(GemmOp op, const GemmTarget &target,
                                        const CodaToGPUOptions &options) {
  SmallVector<GemmConfigAttr> pinned = getPinnedGemmConfigs(op);
  if (pinned.empty()) {
    FailureOr<GemmKernelConfig> config = chooseConfig(
        op, target, options.tileM, options.tileN, options.stages,
        options.schedule, options.clusterM, options.raster, options.swizzle);
    if (failed(config))
      return failure();
    return SmallVector<GemmVariant>{{*config, 0}};
  }
  SmallVector<GemmVariant> variants;
  for (GemmConfigAttr attr : pinned) {
    Schedule schedule = attr.getSchedule();
    FailureOr<GemmKernelConfig> config = chooseConfig(
        op, target, attr.getTileM(), attr.getTileN(), attr.getStages(),
        schedule, attr.getClusterM(), attr.getRaster(), attr.getSwizzle());
    if (failed(config))
      return failure();
    // The epilogue may force another tile or schedule: said, as an error,
    // since the configuration was asked for by name.
    if (config->schedule != schedule || config->tileM != attr.getTileM() ||
        config->tileN != attr.getTileN() ||
        config->clusterM != attr.getClusterM())
      return op.emitOpError("cannot take ")
             << attr << " (its epilogue and tile lower to schedule "
             << stringifyGemmSchedule(config->schedule) << ", tile "
             << config->tileM << " x " << config->tileN << ", cluster M "
             << config->clusterM << ")";
    if (int64_t unroll = attr.getEpilogueUnroll()) {
      if (config->registerEpilogue())
        return op.emitOpError("cannot take ")
               << attr << " (epilogue_unroll: schedule "
               << stringifyGemmSchedule(config->schedule)
               << "'s epilogue reads the accumulators from registers, not "
                  "from a shared tile)";
      config->epilogueUnroll = unroll;
    }
    variants.push_back({*config, attr.getMaxK(), attr.getWaveCost()});
  }
  return variants;
}

void mlir::coda::gpu_lowering::assignTile(ImplicitLocOpBuilder &b,
                                          KernelFrame &frame,
                                          const GemmKernelConfig &config,
                                          Value linear) {
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  // The grid of cluster tiles: a cluster covers clusterM tile rows of one
  // tile column, and its CTAs take the rows in rank order.
  Value tilesN = arith::CeilDivUIOp::create(b, frame.sizeN, idx(config.tileN));
  Value tilesM = arith::CeilDivUIOp::create(
      b, frame.sizeM, idx(config.tileM * config.clusterM));
  // Batch after batch: the tiles of one batch share its operands.
  if (frame.batchCount) {
    Value perBatch = arith::MulIOp::create(b, tilesM, tilesN);
    frame.batch = arith::DivUIOp::create(b, linear, perBatch);
    linear = arith::RemUIOp::create(b, linear, perBatch);
  }
  // Consecutive (cluster) tiles fill a band of the grid `group` wide across
  // the band before moving on, so that the tiles in flight share their
  // operand tiles in L2 instead of streaming the other operand once per
  // row (column) of tiles. Along N, the band is rasterGroup tile rows
  // (rasterGroup / clusterM cluster rows) walked along N; along M, it is
  // rasterGroup tile columns walked down M.
  bool alongN = config.raster == RasterOrder::alongN;
  Value across = alongN ? tilesM : tilesN, along = alongN ? tilesN : tilesM;
  int64_t width =
      alongN ? config.rasterGroup / config.clusterM : config.rasterGroup;
  width = std::max<int64_t>(width, 1);
  Value perBand = arith::MulIOp::create(b, idx(width), along);
  Value band = arith::DivUIOp::create(b, linear, perBand);
  Value first = arith::MulIOp::create(b, band, idx(width));
  Value inBand = arith::MinUIOp::create(
      b, arith::SubIOp::create(b, across, first), idx(width));
  Value within = arith::RemUIOp::create(b, linear, perBand);
  Value acrossIndex = arith::AddIOp::create(
      b, first, arith::RemUIOp::create(b, within, inBand));
  Value alongIndex = arith::DivUIOp::create(b, within, inBand);
  frame.tileRow = alongN ? acrossIndex : alongIndex;
  frame.tileCol = alongN ? alongIndex : acrossIndex;
  if (config.clusterM > 1)
    frame.tileRow = arith::AddIOp::create(
        b, arith::MulIOp::create(b, frame.tileRow, idx(config.clusterM)),
        frame.clusterRank);
  frame.blockM = arith::MulIOp::create(b, frame.tileRow, idx(config.tileM));
  frame.blockN = arith::MulIOp::create(b, frame.tileCol, idx(config.tileN));
}
