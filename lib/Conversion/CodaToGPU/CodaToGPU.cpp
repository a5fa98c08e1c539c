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
/// Rows of tiles a group of consecutive CTAs covers (grouped rasterization).
constexpr int64_t kRasterGroup = 8;
/// Persistent CTAs that host code (gpu.launch_func) launches: the SMs of an
/// H100 SXM. The runtime launches one per SM of the device at hand.
constexpr int64_t kHostLaunchSMs = 132;
/// The largest dynamic shared memory an sm_90 CTA may request.
constexpr int64_t kMaxSharedBytes = 227 * 1024;

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
  Value tilesM = arith::CeilDivUIOp::create(b, frame.sizeM, idx(config.tileM));
  // Consecutive tiles go kRasterGroup tile rows down M before moving along
  // N, so that the tiles in flight share their lhs and rhs tiles in L2
  // instead of streaming all of rhs once per row of tiles.
  Value perGroup = arith::MulIOp::create(b, idx(kRasterGroup), tilesN);
  Value group = arith::DivUIOp::create(b, linear, perGroup);
  Value firstRow = arith::MulIOp::create(b, group, idx(kRasterGroup));
  Value rows = arith::MinUIOp::create(
      b, arith::SubIOp::create(b, tilesM, firstRow), idx(kRasterGroup));
  Value within = arith::RemUIOp::create(b, linear, perGroup);
  frame.tileRow = arith::AddIOp::create(
      b, firstRow, arith::RemUIOp::create(b, within, rows));
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
                                         bool persistent) {
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
  // Persistent (each tile's epilogue overlapped with the next tile's
  // mainloop) where its 128 x 128 tile serves: the f32 staging tile and the
  // ring have to fit in shared memory together.
  constexpr int64_t kPersistentTileN = 128;
  std::optional<int64_t> pairStride = op.getPairStride();
  config.persistent =
      persistent && warpSpecialized && config.tileM == 128 &&
      config.tileN >= kPersistentTileN &&
      (!rowTile || kPersistentTileN % *rowTile == 0) &&
      (!pairStride || kPersistentTileN % (2 * *pairStride) == 0);
  // Otherwise warp-specialized (two consumer warpgroups of 64 rows each)
  // where it pays: 128 x 256 tiles. Narrower tiles run one warpgroup per CTA.
  config.warpSpecialized =
      config.persistent ||
      (warpSpecialized && config.tileM == 128 && config.tileN == 256);
  if (config.persistent) {
    config.tileN = kPersistentTileN;
    config.numThreads = 384;
    config.epilogueThreads = 96;
  } else if (config.warpSpecialized) {
    config.numThreads = 384;
    config.epilogueThreads = 256;
  } else if (!colTile && config.tileM * config.tileN > 128 * 128) {
    config.tileM = 64;
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
  if (config.sharedBytes() > kMaxSharedBytes)
    return op.emitOpError("kernel needs ")
           << config.sharedBytes() << " bytes of shared memory (at most "
           << kMaxSharedBytes << "); use fewer stages or a smaller tile";
  return config;
}

/// What the epilogue does with each yielded value.
enum class OutputRole {
  tile,
  pair,
  interleaved,
  rowPartials,
  colPartials,
  rowSelect
};

OutputRole getOutputRole(Value yielded) {
  Operation *def = yielded.getDefiningOp();
  if (isa<PairType>(yielded.getType()))
    return OutputRole::pair;
  if (isa<InterleavedType>(yielded.getType()))
    return OutputRole::interleaved;
  if (isa_and_nonnull<RowReduceOp>(def))
    return OutputRole::rowPartials;
  if (isa_and_nonnull<ColReduceOp>(def))
    return OutputRole::colPartials;
  if (isa_and_nonnull<RowSelectOp>(def))
    return OutputRole::rowSelect;
  return OutputRole::tile;
}

StringRef stringifyRole(OutputRole role) {
  switch (role) {
  case OutputRole::tile:
    return "tile";
  case OutputRole::pair:
    return "pair";
  case OutputRole::interleaved:
    return "interleaved";
  case OutputRole::rowPartials:
    return "row_partials";
  case OutputRole::colPartials:
    return "col_partials";
  case OutputRole::rowSelect:
    return "row_select";
  }
  llvm_unreachable("unknown role");
}

/// How the threads of a CTA cover the output tile in the epilogue: each thread
/// owns kEpilogueColumnsPerThread consecutive columns of a row, the threads of
/// a row are consecutive lanes of one warp, and the CTA walks rowsPerPass rows
/// at a time.
constexpr int64_t kColumnsPerThread = kEpilogueColumnsPerThread;

/// One element a thread handles: group `group` (of its groups) and `lane`
/// (0, or 1 for the second column of a pair).
struct Slot {
  int64_t group, lane;
};

/// Builds the epilogue over the accumulator tile in shared memory.
class EpilogueBuilder {
public:
  EpilogueBuilder(GemmOp op, const GemmKernelConfig &config,
                  const KernelFrame &frame, ValueRange inputs,
                  ValueRange outputs)
      : op(op), config(config), frame(frame), inputs(inputs),
        outputs(outputs), pairStride(op.getPairStride()) {
    for (Value value : op.getYieldOp().getValues())
      roles.push_back(getOutputRole(value));
    lanesPerGroup = pairStride ? 2 : 1;
    groupsPerThread = kColumnsPerThread / lanesPerGroup;
    threadsPerRow = config.tileN / kColumnsPerThread;
    rowsPerPass = config.epilogueRowsPerPass();
    // Runs of slots whose columns are consecutive in memory.
    if (!pairStride || *pairStride == 1) {
      runs.emplace_back();
      for (int64_t g = 0; g < groupsPerThread; ++g)
        for (int64_t l = 0; l < lanesPerGroup; ++l)
          runs.back().push_back({g, l});
    } else if (*pairStride % groupsPerThread == 0) {
      for (int64_t l = 0; l < 2; ++l) {
        runs.emplace_back();
        for (int64_t g = 0; g < groupsPerThread; ++g)
          runs.back().push_back({g, l});
      }
    } else {
      for (int64_t g = 0; g < groupsPerThread; ++g)
        for (int64_t l = 0; l < 2; ++l)
          runs.push_back({{g, l}});
    }
  }

  void build(ImplicitLocOpBuilder &b);

private:
  using Run = SmallVector<Slot>;
  /// Per slot values, indexed [group][lane].
  using SlotValues = SmallVector<SmallVector<Value, 2>>;

  Value index(ImplicitLocOpBuilder &b, int64_t v) const {
    return arith::ConstantIndexOp::create(b, v);
  }
  /// Reductions run in f32 whatever the partial's type.
  Value toF32(ImplicitLocOpBuilder &b, Value v) const {
    if (v.getType().isF32())
      return v;
    return arith::ExtFOp::create(b, b.getF32Type(), v);
  }
  Value fromF32(ImplicitLocOpBuilder &b, Value v, Type type) const {
    if (type.isF32())
      return v;
    return arith::TruncFOp::create(b, type, v);
  }
  Value identity(ImplicitLocOpBuilder &b, ReductionKind kind) const {
    return arith::ConstantOp::create(
        b, getReductionIdentity(kind, b.getF32Type()));
  }
  void storeIf(ImplicitLocOpBuilder &b, Value cond, Value value, Value dest,
               ValueRange indices) const {
    scf::IfOp::create(b, cond, [&](OpBuilder &ob, Location loc) {
      memref::StoreOp::create(ob, loc, value, dest, indices);
      scf::YieldOp::create(ob, loc);
    });
  }
  /// log(sum(exp(values))) of one thread's values: their maximum plus the log
  /// of the exponentials relative to it (one exp per value instead of the
  /// pairwise combine's exp and log1p); -inf when every value is -inf.
  Value logSumExp(ImplicitLocOpBuilder &b, ArrayRef<Value> values) const {
    Value hi = values.front();
    for (Value v : values.drop_front())
      hi = arith::MaximumFOp::create(b, hi, v);
    Value negInf = identity(b, ReductionKind::logsumexp);
    Value empty =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, hi, negInf);
    // Shift by 0 for an empty row so that no NaN is formed.
    Value shift = arith::SelectOp::create(
        b, empty, arith::ConstantOp::create(b, b.getF32FloatAttr(0)), hi);
    Value sum = arith::ConstantOp::create(b, b.getF32FloatAttr(0));
    for (Value v : values)
      sum = arith::AddFOp::create(
          b, sum, math::ExpOp::create(b, arith::SubFOp::create(b, v, shift)));
    Value lse = arith::AddFOp::create(b, hi, math::LogOp::create(b, sum));
    return arith::SelectOp::create(b, empty, negInf, lse);
  }

  Type partialElementType(unsigned i) {
    return cast<PartialType>(op.getYieldOp().getValues()[i].getType())
        .getElementType();
  }

  /// Whether `memref` admits vector accesses along its last dimension (unit
  /// static innermost stride), and the alignment such an access of `count`
  /// elements asks for.
  std::optional<int64_t> vectorAlignment(Value memref, int64_t count) const;
  /// True when the element at `indices` of `memref` sits at a multiple of
  /// `alignment` bytes.
  Value isAligned(ImplicitLocOpBuilder &b, Value memref, ValueRange indices,
                  int64_t alignment) const;
  /// Loads `count` consecutive elements of `memref` starting at `indices`
  /// (last index = first column): one vector load when they are in bounds
  /// (`inBounds`) and aligned, else element by element at clamped columns.
  SmallVector<Value> loadRun(ImplicitLocOpBuilder &b, Value memref,
                             SmallVector<Value> indices, int64_t count,
                             Value inBounds, Value lastCol) const;
  /// Stores `values` at consecutive columns from `indices`: one vector store
  /// when all are in bounds and aligned, else masked element stores.
  void storeRun(ImplicitLocOpBuilder &b, Value memref,
                SmallVector<Value> indices, ArrayRef<Value> values,
                Value inRow, Value limit) const;

  GemmOp op;
  const GemmKernelConfig &config;
  const KernelFrame &frame;
  ValueRange inputs, outputs;
  std::optional<int64_t> pairStride;
  SmallVector<OutputRole> roles;
  int64_t lanesPerGroup, groupsPerThread, threadsPerRow, rowsPerPass;
  SmallVector<Run> runs;
};

std::optional<int64_t> EpilogueBuilder::vectorAlignment(Value memref,
                                                        int64_t count) const {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (count < 2 || failed(type.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bytes = count * type.getElementTypeBitWidth() / 8;
  if (bytes < 4 || !llvm::isPowerOf2_64(bytes))
    return std::nullopt;
  return std::min<int64_t>(bytes, 16);
}

Value EpilogueBuilder::isAligned(ImplicitLocOpBuilder &b, Value memref,
                                 ValueRange indices, int64_t alignment) const {
  auto type = cast<MemRefType>(memref.getType());
  auto metadata = memref::ExtractStridedMetadataOp::create(b, memref);
  Value linear = metadata.getOffset();
  for (auto [i, idx] : llvm::enumerate(indices))
    linear = arith::AddIOp::create(
        b, linear, arith::MulIOp::create(b, idx, metadata.getStrides()[i]));
  Value address = arith::AddIOp::create(
      b, memref::ExtractAlignedPointerAsIndexOp::create(b, memref),
      arith::MulIOp::create(b, linear,
                            index(b, type.getElementTypeBitWidth() / 8)));
  return arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, address, index(b, alignment)), index(b, 0));
}

SmallVector<Value> EpilogueBuilder::loadRun(ImplicitLocOpBuilder &b,
                                            Value memref,
                                            SmallVector<Value> indices,
                                            int64_t count, Value inBounds,
                                            Value lastCol) const {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  Value first = indices.back();
  auto scalarLoads = [&](ImplicitLocOpBuilder &sb) {
    SmallVector<Value> values;
    for (int64_t e = 0; e < count; ++e) {
      SmallVector<Value> at(indices);
      at.back() = arith::MinUIOp::create(
          sb, arith::AddIOp::create(sb, first, index(sb, e)), lastCol);
      values.push_back(memref::LoadOp::create(sb, memref, at));
    }
    return values;
  };
  std::optional<int64_t> alignment = vectorAlignment(memref, count);
  if (!alignment)
    return scalarLoads(b);
  auto vectorType = VectorType::get({count}, element);
  Value fast = arith::AndIOp::create(
      b, inBounds, isAligned(b, memref, indices, *alignment));
  auto branch = scf::IfOp::create(
      b, fast,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        Value v = vector::LoadOp::create(tb, vectorType, memref, indices,
                                         /*nontemporal=*/false,
                                         llvm::MaybeAlign(*alignment));
        scf::YieldOp::create(tb, v);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        Value v =
            vector::FromElementsOp::create(eb, vectorType, scalarLoads(eb));
        scf::YieldOp::create(eb, v);
      });
  SmallVector<Value> values;
  for (int64_t e = 0; e < count; ++e)
    values.push_back(
        vector::ExtractOp::create(b, branch.getResult(0), ArrayRef<int64_t>{e}));
  return values;
}

void EpilogueBuilder::storeRun(ImplicitLocOpBuilder &b, Value memref,
                               SmallVector<Value> indices,
                               ArrayRef<Value> values, Value inRow,
                               Value limit) const {
  int64_t count = values.size();
  Value first = indices.back();
  auto scalarStores = [&](ImplicitLocOpBuilder &sb) {
    for (auto [e, value] : llvm::enumerate(values)) {
      SmallVector<Value> at(indices);
      at.back() = arith::AddIOp::create(sb, first, index(sb, e));
      Value inCol =
          arith::CmpIOp::create(sb, arith::CmpIPredicate::ult, at.back(), limit);
      storeIf(sb, arith::AndIOp::create(sb, inRow, inCol), value, memref, at);
    }
  };
  std::optional<int64_t> alignment = vectorAlignment(memref, count);
  if (!alignment) {
    scalarStores(b);
    return;
  }
  Value end = arith::AddIOp::create(b, first, index(b, count));
  Value whole = arith::AndIOp::create(
      b, inRow, arith::CmpIOp::create(b, arith::CmpIPredicate::ule, end, limit));
  Value fast = arith::AndIOp::create(
      b, whole, isAligned(b, memref, indices, *alignment));
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  scf::IfOp::create(
      b, fast,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        Value v = vector::FromElementsOp::create(
            tb, VectorType::get({count}, element), values);
        vector::StoreOp::create(tb, v, memref, indices, /*nontemporal=*/false,
                                llvm::MaybeAlign(*alignment));
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        scalarStores(eb);
        scf::YieldOp::create(eb);
      });
}

void EpilogueBuilder::build(ImplicitLocOpBuilder &b) {
  YieldOp yield = op.getYieldOp();
  ValueRange yielded = yield.getValues();
  Value one = index(b, 1);
  Value lastRow = arith::SubIOp::create(b, frame.sizeM, one);
  Value lastCol = arith::SubIOp::create(b, frame.sizeN, one);
  Value threadRow = arith::DivUIOp::create(b, frame.tid, index(b, threadsPerRow));
  Value laneInRow = arith::RemUIOp::create(b, frame.tid, index(b, threadsPerRow));
  Value firstGroup =
      arith::MulIOp::create(b, laneInRow, index(b, groupsPerThread));

  // This thread's columns, the same in every row: local and global, per slot.
  SmallVector<Value> groups;
  SlotValues localCols, cols, inCols;
  for (int64_t g = 0; g < groupsPerThread; ++g) {
    groups.push_back(arith::AddIOp::create(b, firstGroup, index(b, g)));
    localCols.push_back(SmallVector<Value, 2>(
        getGroupColumns(b, b.getLoc(), groups.back(), pairStride)));
    cols.emplace_back();
    inCols.emplace_back();
    for (Value local : localCols.back()) {
      cols.back().push_back(arith::AddIOp::create(b, frame.blockN, local));
      inCols.back().push_back(arith::CmpIOp::create(
          b, arith::CmpIPredicate::ult, cols.back().back(), frame.sizeN));
    }
  }
  auto runInBounds = [&](ImplicitLocOpBuilder &rb, const Run &run) -> Value {
    Value end = arith::AddIOp::create(
        rb, cols[run.front().group][run.front().lane], index(rb, run.size()));
    return arith::CmpIOp::create(rb, arith::CmpIPredicate::ule, end,
                                 frame.sizeN);
  };

  // Running column partials: one per (col_reduce output, slot).
  int64_t slotsPerThread = groupsPerThread * lanesPerGroup;
  SmallVector<Value> colInit;
  for (auto [i, role] : llvm::enumerate(roles))
    if (role == OutputRole::colPartials)
      for (int64_t s = 0; s < slotsPerThread; ++s)
        colInit.push_back(identity(b, getPartialKind(yielded[i])));

  auto rowLoop = scf::ForOp::create(
      b, threadRow, index(b, config.tileM), index(b, rowsPerPass), colInit,
      [&](OpBuilder &ob, Location loc, Value localRow, ValueRange colAccs) {
        ImplicitLocOpBuilder lb(loc, ob);
        Value row = arith::AddIOp::create(lb, frame.blockM, localRow);
        Value inRow = arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                            row, frame.sizeM);
        Value rowClamped = arith::MinUIOp::create(lb, row, lastRow);
        SmallVector<Value> nextCol(colAccs);

        // Block arguments per slot, read run by run.
        SmallVector<IRMapping> mappings(groupsPerThread * lanesPerGroup);
        auto mappingOf = [&](Slot s) -> IRMapping & {
          return mappings[s.group * lanesPerGroup + s.lane];
        };
        // The accumulator tile: in bounds and 16-byte aligned by
        // construction (rows of tileN + 4 floats, runs at multiples of 4).
        for (const Run &run : runs) {
          Slot head = run.front();
          auto type = VectorType::get({int64_t(run.size())}, lb.getF32Type());
          Value acc = vector::LoadOp::create(
              lb, type, frame.accTile,
              ValueRange{localRow, localCols[head.group][head.lane]},
              /*nontemporal=*/false,
              llvm::MaybeAlign(std::min<int64_t>(run.size() * 4, 16)));
          for (auto [e, slot] : llvm::enumerate(run))
            mappingOf(slot).map(op.getAccumulatorArg(),
                                vector::ExtractOp::create(
                                    lb, acc, ArrayRef<int64_t>{int64_t(e)}));
        }
        for (auto [k, input] : llvm::enumerate(inputs)) {
          BlockArgument arg = op.getInputArg(k);
          AccessForm form = op.getInputForm(k);
          if (form == AccessForm::tile || form == AccessForm::col) {
            for (const Run &run : runs) {
              Slot head = run.front();
              SmallVector<Value> at;
              if (form == AccessForm::tile)
                at.push_back(rowClamped);
              at.push_back(cols[head.group][head.lane]);
              SmallVector<Value> values =
                  loadRun(lb, input, at, run.size(), runInBounds(lb, run),
                          lastCol);
              for (auto [slot, value] : llvm::zip_equal(run, values))
                mappingOf(slot).map(arg, value);
            }
            continue;
          }
          if (form == AccessForm::pair) {
            // Both lanes of a group read their pair's element: pair j of
            // the tile is column blockN / 2 + j (clamped like the rows).
            Value lastPair = arith::SubIOp::create(
                lb, arith::DivUIOp::create(lb, frame.sizeN, index(lb, 2)),
                one);
            for (int64_t g = 0; g < groupsPerThread; ++g) {
              Value pairCol = arith::MinUIOp::create(
                  lb,
                  arith::AddIOp::create(
                      lb,
                      arith::DivUIOp::create(lb, frame.blockN, index(lb, 2)),
                      groups[g]),
                  lastPair);
              Value value = memref::LoadOp::create(
                  lb, input, ValueRange{rowClamped, pairCol});
              for (int64_t l = 0; l < lanesPerGroup; ++l)
                mappingOf({g, l}).map(arg, value);
            }
            continue;
          }
          Value shared;
          if (form == AccessForm::row)
            shared = memref::LoadOp::create(lb, input, ValueRange{rowClamped});
          else if (form == AccessForm::scalar)
            shared = input;
          Value period = form == AccessForm::periodic
                             ? memref::DimOp::create(lb, input, 1).getResult()
                             : Value();
          for (int64_t g = 0; g < groupsPerThread; ++g)
            for (int64_t l = 0; l < lanesPerGroup; ++l) {
              Value value = shared;
              if (form == AccessForm::periodic) {
                Value col = arith::MinUIOp::create(lb, cols[g][l], lastCol);
                Value wrapped = arith::RemUIOp::create(lb, col, period);
                value = memref::LoadOp::create(
                    lb, input, ValueRange{rowClamped, wrapped});
              }
              mappingOf({g, l}).map(arg, value);
            }
        }

        // The region, once per group.
        for (int64_t g = 0; g < groupsPerThread; ++g) {
          MutableArrayRef<IRMapping> lanes(&mappings[g * lanesPerGroup],
                                           lanesPerGroup);
          evaluateEpilogueBody(lb, op, row, cols[g], lanes);
        }

        unsigned colSlot = 0;
        for (auto [i, value] : llvm::enumerate(yielded)) {
          Value out = outputs[i];
          switch (roles[i]) {
          case OutputRole::tile:
            for (const Run &run : runs) {
              Slot head = run.front();
              SmallVector<Value> values;
              for (Slot slot : run)
                values.push_back(mappingOf(slot).lookup(value));
              storeRun(lb, out, {row, cols[head.group][head.lane]}, values,
                       inRow, frame.sizeN);
            }
            break;
          case OutputRole::interleaved: {
            // A run of columns [c, c + r) fills [2c, 2c + 2r): even, odd per
            // column.
            auto interleave = value.getDefiningOp<InterleaveOp>();
            Value two = index(lb, 2);
            Value limit = arith::MulIOp::create(lb, frame.sizeN, two);
            for (const Run &run : runs) {
              Slot head = run.front();
              SmallVector<Value> values;
              for (Slot slot : run) {
                values.push_back(mappingOf(slot).lookup(interleave.getEven()));
                values.push_back(mappingOf(slot).lookup(interleave.getOdd()));
              }
              Value col = arith::MulIOp::create(
                  lb, cols[head.group][head.lane], two);
              storeRun(lb, out, {row, col}, values, inRow, limit);
            }
            break;
          }
          case OutputRole::pair: {
            // Pair j of block k lands in column k s + j: the tile's pairs
            // start at blockN / 2.
            SmallVector<Value> values;
            for (int64_t g = 0; g < groupsPerThread; ++g)
              values.push_back(mappingOf({g, 0}).lookup(value));
            Value pairCol = arith::AddIOp::create(
                lb, arith::DivUIOp::create(lb, frame.blockN, index(lb, 2)),
                groups.front());
            Value pairLimit =
                arith::DivUIOp::create(lb, frame.sizeN, index(lb, 2));
            storeRun(lb, out, {row, pairCol}, values, inRow, pairLimit);
            break;
          }
          case OutputRole::rowPartials: {
            // This thread's slots, then the row's threads (consecutive
            // lanes) by butterfly shuffles in a fixed order.
            ReductionKind kind = getPartialKind(value);
            SmallVector<Value> masked;
            for (int64_t g = 0; g < groupsPerThread; ++g)
              for (int64_t l = 0; l < lanesPerGroup; ++l)
                masked.push_back(arith::SelectOp::create(
                    lb, inCols[g][l], toF32(lb, mappingOf({g, l}).lookup(value)),
                    identity(lb, kind)));
            Value acc = kind == ReductionKind::logsumexp
                            ? logSumExp(lb, masked)
                            : identity(lb, kind);
            if (kind != ReductionKind::logsumexp)
              for (Value v : masked)
                acc = buildReductionCombine(lb, lb.getLoc(), kind, acc, v);
            // A partial covers t / 8 consecutive lanes (t = its tile).
            int64_t lanesPerPartial =
                config.rowPartialTile / kColumnsPerThread;
            for (int32_t offset = lanesPerPartial / 2; offset >= 1;
                 offset /= 2) {
              Value other = gpu::ShuffleOp::create(lb, acc, offset, 32,
                                                   gpu::ShuffleMode::XOR)
                                .getShuffleResult();
              acc = buildReductionCombine(lb, lb.getLoc(), kind, acc, other);
            }
            int64_t partialsPerTile = config.tileN / config.rowPartialTile;
            Value partialInTile =
                arith::DivUIOp::create(lb, laneInRow, index(lb, lanesPerPartial));
            Value partial = arith::AddIOp::create(
                lb,
                arith::MulIOp::create(lb, frame.tileCol,
                                      index(lb, partialsPerTile)),
                partialInTile);
            // The partial's first lane writes it, unless the whole block of
            // columns lies beyond N.
            Value leads = arith::CmpIOp::create(
                lb, arith::CmpIPredicate::eq,
                arith::RemUIOp::create(lb, laneInRow, index(lb, lanesPerPartial)),
                index(lb, 0));
            Value blockStart = arith::MulIOp::create(
                lb, partial, index(lb, config.rowPartialTile));
            Value exists = arith::CmpIOp::create(
                lb, arith::CmpIPredicate::ult, blockStart, frame.sizeN);
            storeIf(lb,
                    arith::AndIOp::create(
                        lb, arith::AndIOp::create(lb, leads, inRow), exists),
                    fromF32(lb, acc, partialElementType(i)), out,
                    {row, partial});
            break;
          }
          case OutputRole::colPartials: {
            ReductionKind kind = getPartialKind(value);
            for (int64_t g = 0; g < groupsPerThread; ++g)
              for (int64_t l = 0; l < lanesPerGroup; ++l) {
                Value valid = arith::AndIOp::create(lb, inRow, inCols[g][l]);
                Value masked = arith::SelectOp::create(
                    lb, valid, toF32(lb, mappingOf({g, l}).lookup(value)),
                    identity(lb, kind));
                unsigned slot = colSlot + g * lanesPerGroup + l;
                nextCol[slot] = buildReductionCombine(lb, lb.getLoc(), kind,
                                                      nextCol[slot], masked);
              }
            colSlot += slotsPerThread;
            break;
          }
          case OutputRole::rowSelect: {
            auto select = cast<RowSelectOp>(value.getDefiningOp());
            for (int64_t g = 0; g < groupsPerThread; ++g)
              for (int64_t l = 0; l < lanesPerGroup; ++l) {
                IRMapping &mapping = mappingOf({g, l});
                Value target = mapping.lookup(select.getColumn());
                if (!target.getType().isIndex())
                  target = arith::IndexCastOp::create(lb, lb.getIndexType(),
                                                      target);
                Value hit = arith::AndIOp::create(
                    lb, arith::AndIOp::create(lb, inRow, inCols[g][l]),
                    arith::CmpIOp::create(lb, arith::CmpIPredicate::eq, target,
                                          cols[g][l]));
                storeIf(lb, hit, mapping.lookup(value), out, {row});
              }
            break;
          }
          }
        }
        scf::YieldOp::create(lb, nextCol);
      });

  if (colInit.empty())
    return;

  // Column partials: each pass row's values go to shared memory after the
  // accumulator tile; then one thread per column combines them in order and
  // writes this tile's partial.
  MLIRContext *ctx = b.getContext();
  auto scratchType = MemRefType::get(
      {rowsPerPass, config.tileN}, b.getF32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  Value tileIndex = frame.tileRow;
  unsigned colSlot = 0, scratchIndex = 0;
  for (auto [i, value] : llvm::enumerate(yielded)) {
    if (roles[i] != OutputRole::colPartials)
      continue;
    int64_t offset = config.epilogueOffset() + config.accTileBytes() +
                     scratchIndex++ * rowsPerPass * config.tileN * 4;
    Value scratch = memref::ViewOp::create(
        b, scratchType, frame.shared,
        arith::AddIOp::create(b, frame.sharedBase, index(b, offset)),
        ValueRange{});
    for (int64_t g = 0; g < groupsPerThread; ++g)
      for (int64_t l = 0; l < lanesPerGroup; ++l)
        memref::StoreOp::create(
            b, rowLoop.getResult(colSlot + g * lanesPerGroup + l), scratch,
            ValueRange{threadRow, localCols[g][l]});
    colSlot += slotsPerThread;
    frame.syncEpilogue(b);
    ReductionKind kind = getPartialKind(value);
    Type elementType = partialElementType(i);
    Value out = outputs[i];
    scf::ForOp::create(
        b, frame.tid, index(b, config.tileN), index(b, config.epilogueThreads),
        ValueRange{},
        [&](OpBuilder &ob, Location loc, Value localCol, ValueRange) {
          ImplicitLocOpBuilder lb(loc, ob);
          Value total = identity(lb, kind);
          for (int64_t r = 0; r < rowsPerPass; ++r)
            total = buildReductionCombine(
                lb, loc, kind, total,
                memref::LoadOp::create(lb, scratch,
                                       ValueRange{index(lb, r), localCol}));
          Value col = arith::AddIOp::create(lb, frame.blockN, localCol);
          Value inCol = arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                              col, frame.sizeN);
          storeIf(lb, inCol, fromF32(lb, total, elementType), out,
                  {tileIndex, col});
          scf::YieldOp::create(lb);
        });
  }
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
  if (config.persistent) {
    gridX = "min(" + gridX + " * " + gridY + ", SMs)";
    gridY = "1";
  }
  return b.getDictionaryAttr({
      b.getNamedAttr("kind", str("gemm")),
      b.getNamedAttr("function", str(host.getSymName())),
      b.getNamedAttr("tile", i64s({config.tileM, config.tileN, config.tileK})),
      b.getNamedAttr("stages", b.getI64IntegerAttr(config.stages)),
      b.getNamedAttr("warp_specialized",
                     b.getBoolAttr(config.warpSpecialized)),
      b.getNamedAttr("persistent", b.getBoolAttr(config.persistent)),
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
      FailureOr<GemmKernelConfig> config =
          chooseConfig(op, *target, tileM, tileN, stages, warpSpecialized,
                       persistent);
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
    target.emitKernelBody(
        b, frame, config,
        [&](ImplicitLocOpBuilder &eb, const KernelFrame &tileFrame) {
          EpilogueBuilder epilogue(
              op, config, tileFrame, entry.getArguments().slice(5, numInputs),
              entry.getArguments().slice(5 + numInputs));
          epilogue.build(eb);
        });
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
    if (config.persistent) {
      // Any grid is correct (CTAs stride over the tiles); one CTA per SM of
      // an H100 SXM here, the device's SM count in the runtime.
      gridX = arith::MinUIOp::create(hb, arith::MulIOp::create(hb, gridX, gridY),
                                     hidx(kHostLaunchSMs));
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
