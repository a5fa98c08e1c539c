//===- CodaToGPU.cpp - coda.gemm to TMA + WGMMA GPU kernels ---------------===//
//
// Each coda.gemm on memrefs becomes a kernel in the `coda_kernels` gpu.module
// and, in its place, host code that builds the two TMA descriptors and
// launches it. A CTA computes a tileM x tileN output tile (a persistent CTA
// one tile after another): the target's mainloop (GemmTarget) leaves the f32
// accumulator tile in shared memory, then
// the epilogue below evaluates the epilogue region over it, each thread on 8
// consecutive columns of a row (a row's threads are consecutive lanes),
// reading epilogue inputs from global memory and writing tile, pair, partial
// and selection outputs with bounds masks. Row partials reduce across lanes
// with shuffles, column partials across rows through shared memory, both in a
// fixed order (deterministic). CTAs map to tiles in groups of tile rows.
//
// The kernel's ABI is recorded on it as the `coda.kernel` attribute (see
// docs/KernelABI.md); --coda-export-kernel-manifest writes it out as JSON.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "GemmKernel.h"

#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODATOGPU
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

constexpr StringLiteral kKernelModuleName = "coda_kernels";
/// Persistent CTAs that host code (gpu.launch_func) launches: the SMs of an
/// H100 SXM. The runtime launches one per SM of the device at hand.
constexpr int64_t kHostLaunchSMs = 132;
/// The most shared memory, static and dynamic, an sm_90 CTA may use.
constexpr int64_t kMaxSharedBytes = 227 * 1024;

/// Whether `config`'s shared memory fits a CTA.
bool fitsSharedMemory(const GemmKernelConfig &config) {
  return config.sharedBytes() + config.staticSharedBytes() <= kMaxSharedBytes;
}

std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
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
  if (!ShapedType::isDynamic(offset) && (offset * bytes) % 16 != 0)
    return op.emitOpError() << name << " starts " << offset * bytes
                            << " bytes into its buffer; TMA needs a "
                            << "16-byte aligned start";
  return success();
}

} // namespace

void mlir::coda::gpu_lowering::assignTile(ImplicitLocOpBuilder &b,
                                          KernelFrame &frame,
                                          const GemmKernelConfig &config,
                                          Value linear) {
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  Value tilesN = arith::CeilDivUIOp::create(b, frame.sizeN, idx(config.tileN));
  // Rows of cluster tiles (clusterM tile rows each).
  Value tilesM = arith::CeilDivUIOp::create(
      b, frame.sizeM, idx(config.tileM * config.clusterM));
  int64_t rasterGroup =
      std::max<int64_t>(config.rasterGroup / config.clusterM, 1);
  // Consecutive tiles go config.rasterGroup tile rows down M before moving along
  // N, so that the tiles in flight share their lhs and rhs tiles in L2
  // instead of streaming all of rhs once per row of tiles.
  Value perGroup = arith::MulIOp::create(b, idx(rasterGroup), tilesN);
  Value group = arith::DivUIOp::create(b, linear, perGroup);
  Value firstRow = arith::MulIOp::create(b, group, idx(rasterGroup));
  Value rows = arith::MinUIOp::create(
      b, arith::SubIOp::create(b, tilesM, firstRow), idx(rasterGroup));
  Value within = arith::RemUIOp::create(b, linear, perGroup);
  frame.tileRow = arith::AddIOp::create(
      b, firstRow, arith::RemUIOp::create(b, within, rows));
  if (config.clusterM > 1)
    frame.tileRow = arith::AddIOp::create(
        b, arith::MulIOp::create(b, frame.tileRow, idx(config.clusterM)),
        frame.clusterRank);
  frame.tileCol = arith::DivUIOp::create(b, within, rows);
  frame.blockM = arith::MulIOp::create(b, frame.tileRow, idx(config.tileM));
  frame.blockN = arith::MulIOp::create(b, frame.tileCol, idx(config.tileN));
}

namespace {

/// Picks the tile shape for `op` and checks everything the kernel needs.
FailureOr<GemmKernelConfig> chooseConfig(GemmOp op, const GemmTarget &target,
                                         int64_t tileM, int64_t tileN,
                                         int64_t stages,
                                         bool warpSpecialized,
                                         bool persistent, bool cooperative,
                                         bool pingPong, int64_t clusterM) {
  if (!op.hasPureBufferSemantics())
    return op.emitOpError("GPU lowering takes coda.gemm on memrefs; "
                          "bufferize first (one-shot-bufferize)");
  if (op.isBatched())
    return op.emitOpError("GPU lowering of batched coda.gemm is not "
                          "supported; fold the batch into M");
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

  // Block reductions fix the tile: a partial covers exactly one CTA's tile.
  std::optional<int64_t> rowTile, colTile;
  for (Value value : op.getYieldOp().getValues()) {
    Operation *def = value.getDefiningOp();
    std::optional<int64_t> *slot = nullptr;
    int64_t tile = 0;
    if (auto reduce = dyn_cast_or_null<RowReduceOp>(def)) {
      slot = &rowTile;
      tile = reduce.getTile();
    } else if (auto reduce = dyn_cast_or_null<ColReduceOp>(def)) {
      slot = &colTile;
      tile = reduce.getTile();
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
  if (rowTile) {
    int64_t lanes = *rowTile / kEpilogueColumnsPerThread;
    bool divides = *rowTile % kEpilogueColumnsPerThread == 0 &&
                   llvm::isPowerOf2_64(lanes) && config.tileN % *rowTile == 0;
    if (std::optional<int64_t> stride = op.getPairStride())
      divides = divides && *rowTile % (2 * *stride) == 0;
    if (!divides)
      config.tileN = *rowTile;
    config.rowPartialTile = *rowTile;
  }
  if (colTile)
    config.tileM = *colTile;
  std::optional<int64_t> pairStride = op.getPairStride();
  // Whether the tile may narrow to `narrowN` columns: its row partials and
  // pairs still fit in one tile.
  auto narrowsTo = [&](int64_t narrowN) {
    return config.tileN >= narrowN && (!rowTile || narrowN % *rowTile == 0) &&
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
  // Ping-pong: persistent 128 x 128 tiles, each computed and written by one
  // consumer warpgroup from its registers (128 accumulators per thread; a
  // wider tile would not fit beside the epilogue).
  constexpr int64_t kPingPongTileN = 128;
  if (pingPong && warpSpecialized && config.tileM == 128 &&
      fragmentLayoutSupports(pairStride) && narrowsTo(kPingPongTileN)) {
    useRegisterSchedule(Schedule::pingPong);
    config.tileN = kPingPongTileN;
  } else if (pingPong) {
    // Said, not silent: the option reaches only the GEMMs it can serve.
    op.emitWarning("ping-pong not applied: it needs 128-row tiles at least "
                   "128 columns wide whose row partials and pairs fit in 128 "
                   "columns (pair stride 1 or a multiple of 8)");
  }
  // Cooperative: persistent 128-row tiles whose two consumer warpgroups run
  // the epilogue from their registers.
  if (config.schedule == Schedule::single && cooperative &&
      warpSpecialized && config.tileM == 128 &&
      fragmentLayoutSupports(pairStride))
    useRegisterSchedule(Schedule::cooperative);
  // Persistent (each tile's epilogue overlapped with the next tile's
  // mainloop) where its 128 x 128 tile serves: the f32 staging tile and the
  // ring have to fit in shared memory together.
  constexpr int64_t kPersistentTileN = 128;
  if (config.schedule == Schedule::single && persistent && warpSpecialized &&
      config.tileM == 128 && narrowsTo(kPersistentTileN)) {
    config.schedule = Schedule::staged;
    config.tileN = kPersistentTileN;
    config.numThreads = 384;
    config.epilogueThreads = 96;
  }
  // Otherwise warp-specialized (two consumer warpgroups of 64 rows each)
  // where it pays: 128 x 256 tiles. Narrower tiles run one warpgroup per CTA.
  if (config.schedule == Schedule::single && warpSpecialized &&
      config.tileM == 128 && config.tileN == 256) {
    config.schedule = Schedule::warpSpecialized;
    config.numThreads = 384;
    config.epilogueThreads = 256;
  }
  if (config.schedule == Schedule::single && !colTile &&
      config.tileM * config.tileN > 128 * 128)
    config.tileM = 64;
  if (clusterM != 1 && clusterM != 2)
    return op.emitOpError("cluster M must be 1 or 2, got ") << clusterM;
  // Said, not silent: a module-wide cluster option reaches only the GEMMs
  // that run the cooperative schedule.
  if (clusterM > 1 && !config.registerEpilogue())
    op.emitWarning("cluster-m=")
        << clusterM
        << " not applied: clusters of CTAs need the cooperative or ping-pong "
           "schedule (cooperative=1 or ping-pong=1, 128-row tiles, pair "
           "stride 1 or a multiple of 8)";
  else
    config.clusterM = clusterM;

  // Register epilogues stage their 16-bit tile inputs and tile and pair
  // outputs where the buffers fit beside the ring and the scratch
  // (cooperative 128 x 256 with 4 stages: with no column partials), then
  // their column and periodic input rows where those fit as well.
  if (config.registerEpilogue()) {
    for (unsigned i = 0, e = op.getYieldOp().getValues().size(); i < e; ++i)
      config.stagedTiles |= stagesOutput(op, i);
    for (unsigned k = 0, e = op.getEpilogueInputs().size(); k < e; ++k)
      config.stagedTiles |= stagesInput(op, k);
    if (!fitsSharedMemory(config))
      config.stagedTiles = false;
    // Then the rows of column and periodic inputs, where they fit too.
    config.stagedInputRowBytes = inputRowStagingBytes(op, config.tileN);
    if (!fitsSharedMemory(config))
      config.stagedInputRowBytes = 0;
  }

  // The epilogue gives each row tileN / 8 consecutive lanes of one warp.
  if (config.tileN != 64 && config.tileN != 128 && config.tileN != 256)
    return op.emitOpError("tile N must be 64, 128 or 256, got ")
           << config.tileN;
  if (stages < 2)
    return op.emitOpError("the TMA ring needs at least 2 stages, got ")
           << stages;
  if (std::optional<int64_t> stride = op.getPairStride()) {
    if (config.tileN % (2 * *stride) != 0)
      return op.emitOpError("pair stride ")
             << *stride << " needs tile N to be a multiple of " << 2 * *stride
             << ", got " << config.tileN;
  }
  if (failed(target.checkOperands(op, config)) ||
      failed(checkTmaOperand(op, "lhs", op.getLhs())) ||
      failed(checkTmaOperand(op, "rhs", op.getRhs())))
    return failure();
  if (!fitsSharedMemory(config))
    return op.emitOpError("kernel needs ")
           << config.sharedBytes() + config.staticSharedBytes()
           << " bytes of shared memory (at most " << kMaxSharedBytes
           << "); use fewer stages or a smaller tile";
  return config;
}


/// Which host function argument `v` is, or "temporary".
Attribute sourceAttr(OpBuilder &b, func::FuncOp host, Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    if (arg.getOwner()->getParentOp() == host.getOperation())
      return b.getI64IntegerAttr(arg.getArgNumber());
  return b.getStringAttr("temporary");
}

/// A shaped value's sizes; -1 marks a dynamic size.
ArrayAttr shapeAttr(OpBuilder &b, Value v) {
  SmallVector<int64_t> shape(cast<ShapedType>(v.getType()).getShape());
  for (int64_t &size : shape)
    if (ShapedType::isDynamic(size))
      size = -1;
  return b.getI64ArrayAttr(shape);
}

/// A memref parameter of the ABI.
DictionaryAttr memrefParam(OpBuilder &b, func::FuncOp host, StringRef name,
                           StringRef role, Value v) {
  auto type = cast<MemRefType>(v.getType());
  return b.getDictionaryAttr({
      b.getNamedAttr("name", b.getStringAttr(name)),
      b.getNamedAttr("role", b.getStringAttr(role)),
      b.getNamedAttr("source", sourceAttr(b, host, v)),
      b.getNamedAttr("kind", b.getStringAttr("memref")),
      b.getNamedAttr("dtype",
                     b.getStringAttr(typeName(type.getElementType()))),
      b.getNamedAttr("rank", b.getI64IntegerAttr(type.getRank())),
      b.getNamedAttr("shape", shapeAttr(b, v)),
  });
}

/// Machine-readable ABI of a kernel, attached as `coda.kernel`.
DictionaryAttr buildKernelAbi(OpBuilder &b, GemmOp op, func::FuncOp host,
                              const GemmTarget &target,
                              const GemmKernelConfig &config,
                              ArrayRef<OutputRole> roles) {
  auto str = [&](StringRef s) { return b.getStringAttr(s); };
  auto i64s = [&](ArrayRef<int64_t> v) { return b.getI64ArrayAttr(v); };
  auto sourceArg = [&](Value v) { return sourceAttr(b, host, v); };
  auto shapeOf = [&](Value v) { return shapeAttr(b, v); };
  SmallVector<Attribute> params;
  auto tensorMap = [&](StringRef operand, Value v, ArrayRef<int64_t> box) {
    params.push_back(b.getDictionaryAttr({
        b.getNamedAttr("name", str((operand + "_tensormap").str())),
        b.getNamedAttr("kind", str("tensormap")),
        b.getNamedAttr("operand", str(operand)),
        b.getNamedAttr("source", sourceArg(v)),
        b.getNamedAttr("dtype", str(typeName(config.operandType))),
        b.getNamedAttr("shape", shapeOf(v)),
        b.getNamedAttr("box", i64s(box)),
        b.getNamedAttr("swizzle", str("128B")),
        b.getNamedAttr("l2_promotion", str("256B")),
        b.getNamedAttr("oob_fill", str("zero")),
        b.getNamedAttr("interleave", str("none")),
    }));
  };
  tensorMap("lhs", op.getLhs(), target.getLhsBox(config));
  tensorMap("rhs", op.getRhs(), target.getRhsBox(config));
  for (StringRef size : {"M", "N", "K"})
    params.push_back(b.getDictionaryAttr({
        b.getNamedAttr("name", str(size)),
        b.getNamedAttr("kind", str("index")),
    }));
  auto shaped = [&](std::string name, StringRef role, Value v) {
    if (isa<MemRefType>(v.getType())) {
      params.push_back(memrefParam(b, host, name, role, v));
      return;
    }
    params.push_back(b.getDictionaryAttr({
        b.getNamedAttr("name", str(name)),
        b.getNamedAttr("role", str(role)),
        b.getNamedAttr("source", sourceArg(v)),
        b.getNamedAttr("kind", str("scalar")),
        b.getNamedAttr("dtype", str(typeName(v.getType()))),
    }));
  };
  for (auto [i, input] : llvm::enumerate(op.getEpilogueInputs()))
    shaped("input" + std::to_string(i), stringifyAccessForm(op.getInputForm(i)),
           input);
  for (auto [i, output] : llvm::enumerate(op.getOutputs())) {
    shaped("output" + std::to_string(i), stringifyRole(roles[i]), output);
    // The columns (rows) each partial covers: its reduction's tile.
    Operation *def = op.getYieldOp().getValues()[i].getDefiningOp();
    int64_t tile = 0;
    if (auto reduce = dyn_cast_or_null<RowReduceOp>(def))
      tile = reduce.getTile();
    else if (auto reduce = dyn_cast_or_null<ColReduceOp>(def))
      tile = reduce.getTile();
    if (tile) {
      NamedAttrList entry(cast<DictionaryAttr>(params.back()));
      entry.set("partial_tile", b.getI64IntegerAttr(tile));
      params.back() = entry.getDictionary(b.getContext());
    }
  }

  std::string gridX = "ceildiv(N, " + std::to_string(config.tileN) + ")";
  std::string gridY = "ceildiv(M, " + std::to_string(config.tileM) + ")";
  if (config.persistent() && config.clusterM > 1) {
    std::string cluster = std::to_string(config.clusterM);
    gridX = "min(" + gridX + " * ceildiv(M, " +
            std::to_string(config.tileM * config.clusterM) + "), SMs / " +
            cluster + ") * " + cluster;
    gridY = "1";
  } else if (config.persistent()) {
    gridX = "min(" + gridX + " * " + gridY + ", SMs)";
    gridY = "1";
  }
  return b.getDictionaryAttr({
      b.getNamedAttr("kind", str("gemm")),
      b.getNamedAttr("function", str(host.getSymName())),
      b.getNamedAttr("tile", i64s({config.tileM, config.tileN, config.tileK})),
      b.getNamedAttr("stages", b.getI64IntegerAttr(config.stages)),
      b.getNamedAttr("warp_specialized",
                     b.getBoolAttr(config.warpSpecialized())),
      b.getNamedAttr("persistent", b.getBoolAttr(config.persistent())),
      b.getNamedAttr("cluster", i64s({config.clusterM, 1, 1})),
      b.getNamedAttr("transpose_b", b.getBoolAttr(config.rhsKMajor)),
      b.getNamedAttr("transpose_a", b.getBoolAttr(!config.lhsKMajor)),
      b.getNamedAttr("grid", b.getArrayAttr({str(gridX), str(gridY),
                                             str("1")})),
      b.getNamedAttr("block", i64s({config.numThreads, 1, 1})),
      b.getNamedAttr("shared_memory_bytes",
                     b.getI64IntegerAttr(config.sharedBytes())),
      b.getNamedAttr("params", b.getArrayAttr(params)),
  });
}

struct CodaToGPUPass : coda::impl::CodaToGPUBase<CodaToGPUPass> {
  using Base::Base;

  /// The kernel configuration of `op`: its pinned coda.gemm_config, else
  /// the pass options.
  FailureOr<GemmKernelConfig> configure(GemmOp op, const GemmTarget &target) {
    auto pinned =
        op->getAttrOfType<GemmConfigAttr>(GemmConfigAttr::getAttrName());
    if (!pinned)
      return chooseConfig(op, target, tileM, tileN, stages, warpSpecialized,
                          persistent, cooperative, pingPong, clusterM);
    Schedule schedule = pinned.getSchedule();
    FailureOr<GemmKernelConfig> config = chooseConfig(
        op, target, pinned.getTileM(), pinned.getTileN(), pinned.getStages(),
        /*warpSpecialized=*/schedule != Schedule::single,
        /*persistent=*/schedule == Schedule::staged,
        /*cooperative=*/schedule == Schedule::cooperative,
        /*pingPong=*/schedule == Schedule::pingPong, pinned.getClusterM());
    if (failed(config))
      return failure();
    // The epilogue may force another tile or schedule: said, as an error,
    // since the configuration was asked for by name.
    if (config->schedule != schedule || config->tileM != pinned.getTileM() ||
        config->tileN != pinned.getTileN() ||
        config->clusterM != pinned.getClusterM())
      return op.emitOpError("cannot take ")
             << pinned << " (its epilogue and tile lower to schedule "
             << stringifyGemmSchedule(config->schedule) << ", tile "
             << config->tileM << " x " << config->tileN << ", cluster M "
             << config->clusterM << ")";
    return config;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::unique_ptr<GemmTarget> target = getGemmTarget(chip);
    SmallVector<GemmOp> gemms;
    SmallVector<Operation *> inOrder;
    module.walk([&](Operation *op) {
      if (auto gemm = dyn_cast<GemmOp>(op)) {
        gemms.push_back(gemm);
        inOrder.push_back(op);
      } else if (auto finish = dyn_cast<ReducePartialsOp>(op)) {
        // On tensors, or batched, it stays for the reference lowering.
        auto partials = dyn_cast<MemRefType>(finish.getPartials().getType());
        if (partials && partials.getRank() == 2 &&
            finish->getParentOfType<func::FuncOp>())
          inOrder.push_back(op);
      }
    });
    if (gemms.empty() && inOrder.empty())
      return;
    if (!target && !gemms.empty()) {
      module.emitError() << "coda-to-gpu: no GEMM lowering for chip '" << chip
                         << "' (supported: sm_90a)";
      return signalPassFailure();
    }

    // Check every GEMM first so that one run reports every problem.
    SmallVector<GemmKernelConfig> configs;
    bool failed = false;
    for (GemmOp op : gemms) {
      FailureOr<GemmKernelConfig> config = configure(op, *target);
      if (::mlir::failed(config)) {
        failed = true;
        continue;
      }
      if (!op->getParentOfType<func::FuncOp>()) {
        op.emitOpError("GPU lowering needs the GEMM inside a func.func");
        failed = true;
        continue;
      }
      configs.push_back(*config);
    }
    if (failed)
      return signalPassFailure();

    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(module.getContext()));
    OpBuilder b(module.getContext());
    auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
    if (!kernels) {
      b.setInsertionPointToEnd(module.getBody());
      kernels = gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModuleName);
    }
    SymbolTable kernelSymbols(kernels);
    // Kernels are named and recorded in program order, which is the order a
    // function runs them in.
    DenseMap<Operation *, unsigned> gemmCount, finishCount;
    unsigned gemmIndex = 0;
    for (Operation *op : inOrder) {
      auto host = op->getParentOfType<func::FuncOp>();
      if (auto gemm = dyn_cast<GemmOp>(op)) {
        std::string name = (host.getSymName() + "_gemm" +
                            std::to_string(gemmCount[host]++))
                               .str();
        lowerGemm(gemm, host, *target, configs[gemmIndex++], kernels,
                  kernelSymbols, name);
        continue;
      }
      std::string name = (host.getSymName() + "_finish" +
                          std::to_string(finishCount[host]++))
                             .str();
      lowerReducePartials(cast<ReducePartialsOp>(op), host, kernels,
                          kernelSymbols, name);
    }
  }

  /// coda.reduce_partials: one thread per reduced element folds its partials
  /// in order (deterministic), in f32.
  void lowerReducePartials(ReducePartialsOp op, func::FuncOp host,
                           gpu::GPUModuleOp kernels, SymbolTable &symbols,
                           StringRef name) {
    MLIRContext *ctx = op.getContext();
    Location loc = op.getLoc();
    Value partials = op.getPartials(), init = op.getInit();
    bool rowAxis = op.getAxis() == ReductionAxis::row;
    ReductionKind kind = op.getKind();
    constexpr int64_t kThreads = 128;

    OpBuilder kb(ctx);
    kb.setInsertionPointToEnd(kernels.getBody());
    auto kernel = gpu::GPUFuncOp::create(
        kb, loc, name,
        FunctionType::get(ctx, {partials.getType(), init.getType()}, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                    UnitAttr::get(ctx));
    kernel.setKnownBlockSizeAttr(
        DenseI32ArrayAttr::get(ctx, {int32_t(kThreads), 1, 1}));
    kernel->setAttr(
        "coda.kernel",
        kb.getDictionaryAttr({
            kb.getNamedAttr("kind", kb.getStringAttr("reduce_partials")),
            kb.getNamedAttr("function", kb.getStringAttr(host.getSymName())),
            kb.getNamedAttr("reduction",
                            kb.getStringAttr(stringifyReductionKind(kind))),
            kb.getNamedAttr("axis", kb.getStringAttr(
                                        stringifyReductionAxis(op.getAxis()))),
            kb.getNamedAttr("grid",
                            kb.getArrayAttr({kb.getStringAttr("ceildiv(R, 128)"),
                                             kb.getStringAttr("1"),
                                             kb.getStringAttr("1")})),
            kb.getNamedAttr("block", kb.getI64ArrayAttr({kThreads, 1, 1})),
            kb.getNamedAttr("shared_memory_bytes", kb.getI64IntegerAttr(0)),
            kb.getNamedAttr(
                "params",
                kb.getArrayAttr(
                    {memrefParam(kb, host, "partials", "partials", partials),
                     memrefParam(kb, host, "output", "reduced", init)})),
        }));
    symbols.insert(kernel);

    Block &entry = kernel.getBody().front();
    ImplicitLocOpBuilder b(loc, ctx);
    b.setInsertionPointToStart(&entry);
    Value in = entry.getArgument(0), out = entry.getArgument(1);
    auto idx = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, v);
    };
    Value i = arith::AddIOp::create(
        b,
        arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
                              idx(kThreads)),
        gpu::ThreadIdOp::create(b, gpu::Dimension::x));
    Value reduced = memref::DimOp::create(b, out, 0);
    Value count = memref::DimOp::create(b, in, rowAxis ? 1 : 0);
    Type f32 = b.getF32Type();
    Type element = cast<MemRefType>(out.getType()).getElementType();
    Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i,
                                          reduced);
    scf::IfOp::create(b, inRange, [&](OpBuilder &ob, Location l) {
      ImplicitLocOpBuilder ib(l, ob);
      Value identity = arith::ConstantOp::create(
          ib, getReductionIdentity(kind, cast<FloatType>(f32)));
      auto loop = scf::ForOp::create(
          ib, arith::ConstantIndexOp::create(ib, 0), count,
          arith::ConstantIndexOp::create(ib, 1), ValueRange{identity},
          [&](OpBuilder &fb, Location fl, Value j, ValueRange acc) {
            ImplicitLocOpBuilder lb(fl, fb);
            Value v = memref::LoadOp::create(
                lb, in, rowAxis ? ValueRange{i, j} : ValueRange{j, i});
            if (!v.getType().isF32())
              v = arith::ExtFOp::create(lb, f32, v);
            scf::YieldOp::create(
                lb, buildReductionCombine(lb, fl, kind, acc[0], v));
          });
      Value result = loop.getResult(0);
      if (element != f32)
        result = arith::TruncFOp::create(ib, element, result);
      memref::StoreOp::create(ib, result, out, ValueRange{i});
      scf::YieldOp::create(ib);
    });
    gpu::ReturnOp::create(b);

    ImplicitLocOpBuilder hb(loc, op);
    Value threads = arith::ConstantIndexOp::create(hb, kThreads);
    Value one = arith::ConstantIndexOp::create(hb, 1);
    Value blocks = arith::CeilDivUIOp::create(
        hb, memref::DimOp::create(hb, init, 0), threads);
    gpu::LaunchFuncOp::create(hb, kernel, gpu::KernelDim3{blocks, one, one},
                              gpu::KernelDim3{threads, one, one}, Value(),
                              ValueRange{partials, init});
    op.erase();
  }

  void lowerGemm(GemmOp op, func::FuncOp host, const GemmTarget &target,
                 const GemmKernelConfig &config, gpu::GPUModuleOp kernels,
                 SymbolTable &kernelSymbols, StringRef name) {
    MLIRContext *ctx = op.getContext();
    Location loc = op.getLoc();
    Type ptrType = LLVM::LLVMPointerType::get(ctx);
    Type indexType = IndexType::get(ctx);
    SmallVector<OutputRole> roles;
    for (Value value : op.getYieldOp().getValues())
      roles.push_back(getOutputRole(value));

    // Kernel: (lhs map, rhs map, M, N, K, epilogue inputs..., outputs...).
    SmallVector<Type> argTypes = {ptrType, ptrType, indexType, indexType,
                                  indexType};
    for (Value v : op.getEpilogueInputs())
      argTypes.push_back(v.getType());
    for (Value v : op.getOutputs())
      argTypes.push_back(v.getType());
    OpBuilder kb(ctx);
    kb.setInsertionPointToEnd(kernels.getBody());
    auto kernel = gpu::GPUFuncOp::create(kb, loc, name,
                                         FunctionType::get(ctx, argTypes, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                    UnitAttr::get(ctx));
    kernel.setKnownBlockSizeAttr(
        DenseI32ArrayAttr::get(ctx, {int32_t(config.numThreads), 1, 1}));
    // Launch bounds: ptxas needs the register count at entry to honour
    // setmaxnreg (otherwise C7508: ignored).
    kernel->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                    DenseI32ArrayAttr::get(
                        ctx, {int32_t(config.numThreads), 1, 1}));
    kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    IntegerAttr::get(IntegerType::get(ctx, 32), 1));
    if (config.clusterM > 1)
      kernel->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                      DenseI32ArrayAttr::get(
                          ctx, {int32_t(config.clusterM), 1, 1}));
    kernel->setAttr("coda.kernel",
                    buildKernelAbi(kb, op, host, target, config, roles));
    kernelSymbols.insert(kernel);

    Block &entry = kernel.getBody().front();
    ImplicitLocOpBuilder b(loc, ctx);
    b.setInsertionPointToStart(&entry);
    auto idx = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, v);
    };
    KernelFrame frame;
    frame.lhsMap = UnrealizedConversionCastOp::create(
                       b, target.getLhsMapType(config), entry.getArgument(0))
                       .getResult(0);
    frame.rhsMap = UnrealizedConversionCastOp::create(
                       b, target.getRhsMapType(config), entry.getArgument(1))
                       .getResult(0);
    frame.sizeM = entry.getArgument(2);
    frame.sizeN = entry.getArgument(3);
    frame.sizeK = entry.getArgument(4);
    frame.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    frame.warp = arith::DivUIOp::create(b, frame.tid, idx(32));
    frame.lane = arith::RemUIOp::create(b, frame.tid, idx(32));
    Attribute workgroup =
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
    frame.shared = gpu::DynamicSharedMemoryOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                           MemRefLayoutAttrInterface(), workgroup));
    // Align the base to 1024 bytes (128-byte swizzle atoms).
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(b, frame.shared);
    frame.sharedBase = arith::RemUIOp::create(
        b,
        arith::SubIOp::create(b, idx(1024),
                              arith::RemUIOp::create(b, address, idx(1024))),
        idx(1024));
    frame.accTile = memref::ViewOp::create(
        b,
        MemRefType::get({config.tileM, config.accRowStride()}, b.getF32Type(),
                        MemRefLayoutAttrInterface(), workgroup),
        frame.shared,
        arith::AddIOp::create(b, frame.sharedBase,
                              idx(config.epilogueOffset())),
        ValueRange{});

    frame.syncEpilogue = [](ImplicitLocOpBuilder &sb) {
      gpu::BarrierOp::create(sb);
    };
    unsigned numInputs = op.getEpilogueInputs().size();
    ValueRange epilogueInputs = entry.getArguments().slice(5, numInputs);
    ValueRange epilogueOutputs = entry.getArguments().slice(5 + numInputs);
    auto prefetch = [&](ImplicitLocOpBuilder &eb,
                        const KernelFrame &tileFrame) {
      return prefetchEpilogue(eb, op, config, tileFrame, epilogueInputs,
                              epilogueOutputs);
    };
    auto emit = [&](ImplicitLocOpBuilder &eb, const KernelFrame &tileFrame) {
      emitEpilogue(eb, op, config, tileFrame, epilogueInputs, epilogueOutputs);
    };
    target.emitKernelBody(b, frame, config, EpilogueEmitter{prefetch, emit});
    gpu::ReturnOp::create(b);

    // Host: descriptors and the launch, in place of the op.
    ImplicitLocOpBuilder hb(loc, op);
    auto hidx = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(hb, v);
    };
    auto descriptor = [&](Value operand, Type mapType,
                          ArrayRef<int64_t> box) -> Value {
      auto type = cast<MemRefType>(operand.getType());
      Value unranked = memref::CastOp::create(
          hb, UnrankedMemRefType::get(type.getElementType(), 0), operand);
      SmallVector<Value> boxSizes;
      for (int64_t size : llvm::reverse(box))
        boxSizes.push_back(hidx(size));
      Value map =
          nvgpu::TmaCreateDescriptorOp::create(hb, mapType, unranked, boxSizes);
      return UnrealizedConversionCastOp::create(hb, ptrType, map).getResult(0);
    };
    Value sizeM = memref::DimOp::create(hb, op.getLhs(), op.getLhsMDim());
    Value sizeK = memref::DimOp::create(hb, op.getLhs(), op.getLhsKDim());
    Value sizeN = memref::DimOp::create(hb, op.getRhs(), op.getRhsNDim());
    SmallVector<Value> args = {
        descriptor(op.getLhs(), target.getLhsMapType(config),
                   target.getLhsBox(config)),
        descriptor(op.getRhs(), target.getRhsMapType(config),
                   target.getRhsBox(config)),
        sizeM, sizeN, sizeK};
    llvm::append_range(args, op.getEpilogueInputs());
    llvm::append_range(args, op.getOutputs());
    Value gridX = arith::CeilDivUIOp::create(hb, sizeN, hidx(config.tileN));
    Value gridY = arith::CeilDivUIOp::create(hb, sizeM, hidx(config.tileM));
    if (config.persistent()) {
      // Any grid is correct (clusters stride over their tiles); one CTA per
      // SM of an H100 SXM here, the device's SM count in the runtime.
      Value clusterRows = config.clusterM == 1
                              ? gridY
                              : arith::CeilDivUIOp::create(
                                    hb, sizeM,
                                    hidx(config.tileM * config.clusterM));
      gridX = arith::MinUIOp::create(
          hb, arith::MulIOp::create(hb, gridX, clusterRows),
          hidx(kHostLaunchSMs / config.clusterM));
      if (config.clusterM > 1)
        gridX = arith::MulIOp::create(hb, gridX, hidx(config.clusterM));
      gridY = hidx(1);
    }
    Value sharedBytes = arith::ConstantIntOp::create(hb, hb.getI32Type(),
                                                     config.sharedBytes());
    gpu::LaunchFuncOp::create(
        hb, kernel, gpu::KernelDim3{gridX, gridY, hidx(1)},
        gpu::KernelDim3{hidx(config.numThreads), hidx(1), hidx(1)},
        sharedBytes, args);
    op.erase();
  }
};

} // namespace
