//===- EpilogueBuilder.h - the epilogue of one GEMM tile --------*- C++ -*-===//
//
// The builder of a GEMM kernel's epilogue over one tile, shared by the files
// that emit its parts: Epilogue.cpp (the tile: layouts' driver, prefetch,
// interior condition, column partials' finish), EpilogueLayout.cpp (which
// slots a thread owns), EpilogueRow.cpp (one row: its inputs by form, the
// region, its outputs by role), EpilogueAccess.cpp (bounded and vector
// accesses of global memory) and EpilogueStaging.cpp (the warp's staging
// buffer: 16-byte copies, ldmatrix / stmatrix, cp.async slots, TMA stores,
// input rows). Where each operand lives is the EpiloguePlan's decision.
//
// Two thread layouts share everything but where the accumulators come from:
//
//   shared tile  the f32 tile in shared memory; each thread owns
//                kEpilogueColumnsPerThread consecutive columns of a row (a
//                row's threads are consecutive lanes) and the threads walk
//                the tile rowsPerPass rows at a time
//   fragments    WGMMA's accumulator registers, where they are: thread
//                (warp w, lane l) holds rows 16w + l/4 (+8) of each 64-row
//                fragment and columns 8j + 2(l mod 4) (+1) for every 8-column
//                group j; nothing goes through shared memory but column
//                partials
//
// Row partials reduce across the lanes of a row with shuffles, column partials
// across rows through shared memory, both in a fixed order (deterministic).
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_EPILOGUEBUILDER_H
#define CODA_LIB_CONVERSION_CODATOGPU_EPILOGUEBUILDER_H

#include "EpilogueLayout.h"

#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::coda::gpu_lowering {

inline constexpr int64_t kColumnsPerThread = kEpilogueColumnsPerThread;
/// 16-byte chunks whose loads a lane issues before storing them when it
/// stages input rows.
inline constexpr int64_t kStagingLoadsInFlight = 8;
/// Elements of `element` in a 16-byte chunk (16 for an FP8 output).
inline int64_t chunkElements(Type element) {
  return 128 / element.getIntOrFloatBitWidth();
}
/// WGMMA fragments: 64 rows, 8-column groups of 2 columns per lane.
inline constexpr int64_t kFragmentRows = 64;
/// A register epilogue thread's rows are 64 f + 16 w + l / 4 (+ 8 h) for
/// fragment f, warp w (of its warpgroup), lane l and half h: the offset of
/// fragment row (f, h) from the thread's first row.
inline constexpr int64_t fragmentRowOffset(int64_t f, int64_t h) {
  return f * kFragmentRows + 8 * h;
}
/// The 16-byte copies each lane makes to move a warp's stagingRows rows of
/// `rowElements` elements, `chunk` to 16 bytes (see
/// EpilogueBuilder::stagingCopy).
inline constexpr int64_t stagingCopies(int64_t rowElements, int64_t chunk) {
  return GemmKernelConfig::stagingRows * rowElements / chunk / 32;
}

/// The vector<values.size() x element> of `values`. Bytes are packed two
/// to an i16 first: NVPTX builds a vector of bytes from 16-bit halves and
/// may leave one of them an undefined register, on which ptxas 13.0 crashes
/// (a segmentation fault at -O1 and above).
Value fromElements(ImplicitLocOpBuilder &b, Type element,
                   ArrayRef<Value> values);

class InputNode;
class OutputNode;

/// Builds the epilogue of one tile.
class EpilogueBuilder {
public:
  /// `interior`: emit for a tile known to lie inside M x N, with every
  /// vector-accessed operand's base and row stride 16-byte aligned (see
  /// interiorCondition), with no bounds or alignment checks: each run of
  /// either layout starts at a column (or pair) that is a multiple of its
  /// length, from a tile origin that is a multiple of tile N, so its vector
  /// access is aligned too.
  EpilogueBuilder(GemmOp op, const GemmKernelConfig &config,
                  const EpiloguePlan &plan, const KernelFrame &frame,
                  ValueRange inputs, ValueRange outputs, bool interior = false);
  ~EpilogueBuilder();

  void build(ImplicitLocOpBuilder &b);

  /// The loads of prefetchEpilogue, where the plan takes some: part
  /// `part` of `parts`.
  EpiloguePrefetch prefetch(ImplicitLocOpBuilder &b, int64_t part,
                            int64_t parts) const;
  /// In an interior tile, the values of input `k` that `frame.prefetched`
  /// holds (see InputPlan::prefetch); else none.
  ArrayRef<Value> prefetchedValues(unsigned k) const;
  /// Where the lane's chunk of pass `i` over a column input's row starts,
  /// in elements from the tile's first column: chunk lane + 32 i of
  /// `chunk` elements each.
  Value columnChunkStart(ImplicitLocOpBuilder &b, int64_t i,
                         int64_t chunk) const {
    return arith::MulIOp::create(
        b, arith::AddIOp::create(b, frame.lane, index(b, 32 * i)),
        index(b, chunk));
  }
  /// Whether the tile `frame` describes may take the interior epilogue: it
  /// lies inside M x N, and every operand read or written with vector
  /// accesses (tile and column inputs, tile outputs) starts 16-byte aligned
  /// with rows 16-byte aligned.
  Value interiorCondition(ImplicitLocOpBuilder &b) const;

  // What follows is the builder's state and the helpers its parts and its
  // nodes (EpilogueNodes.h) share.
  Value trueValue(ImplicitLocOpBuilder &b) const {
    return arith::ConstantIntOp::create(b, b.getI1Type(), 1);
  }
  using Run = gpu_lowering::Run;
  /// Per slot values, indexed [group][lane].
  using SlotValues = SmallVector<SmallVector<Value, 2>>;
  using PartialBlock = gpu_lowering::PartialBlock;

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
  /// pairwise combine's exp and log1p); -inf when every value is -inf. Each
  /// exponential is 2^(v log2(e) - max log2(e)): one fma and one exp2 per
  /// value (as flash attention computes its softmax), where exp's range
  /// reduction takes eight instructions.
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
    Value log2e = arith::ConstantOp::create(
        b, b.getF32FloatAttr(static_cast<float>(M_LOG2E)));
    Value negScaledShift =
        arith::NegFOp::create(b, arith::MulFOp::create(b, shift, log2e));
    // The exponentials are approximate (afn: ex2.approx.ftz, see
    // --coda-fast-math-to-nvvm): each term is at most 1, and one below
    // 2^-126 adds nothing to a sum of at least 1.
    Value sum = arith::ConstantOp::create(b, b.getF32FloatAttr(0));
    for (Value v : values)
      sum = arith::AddFOp::create(
          b, sum,
          math::Exp2Op::create(b,
                               math::FmaOp::create(b, v, log2e, negScaledShift),
                               arith::FastMathFlags::afn));
    Value lse = arith::AddFOp::create(b, hi, math::LogOp::create(b, sum));
    return arith::SelectOp::create(b, empty, negInf, lse);
  }
  /// Combines `value` with the same value of the lanes `offsets` away
  /// (butterfly: every lane ends with the same result).
  Value shuffleCombine(ImplicitLocOpBuilder &b, ReductionKind kind, Value value,
                       ArrayRef<int32_t> offsets) const {
    for (int32_t offset : offsets) {
      Value other =
          gpu::ShuffleOp::create(b, value, offset, 32, gpu::ShuffleMode::XOR)
              .getShuffleResult();
      value = buildReductionCombine(b, b.getLoc(), kind, value, other);
    }
    return value;
  }

  Type partialElementType(unsigned i) {
    return cast<PartialType>(op.getYieldOp().getValues()[i].getType())
        .getElementType();
  }

  /// The epilogue of one row of the thread, given each slot's accumulator;
  /// returns the running column partials.
  /// `fragmentRow`: the row's number among the thread's (2f + h of
  /// fragment f, half h), -1 in the shared-tile layout.
  SmallVector<Value> emitRow(ImplicitLocOpBuilder &lb, Value localRow,
                             int64_t fragmentRow,
                             function_ref<Value(Slot)> accumulator,
                             ValueRange colAccs);
  /// What the epilogue of one of the thread's rows computes with.
  struct Row {
    int64_t fragmentRow;
    Value one, lastCol, row, inRow, rowClamped;
    /// Fragments in an edge tile: the output's columns from the lane's
    /// first on, 0 beyond M (see beginRow).
    Value room;
    /// Per slot, the region's values: block arguments and results.
    SmallVector<IRMapping> mappings;
    /// Pair inputs: the tile's first pair and the last one.
    Value firstPair, lastPair;
    /// The runs of each group run.
    SmallVector<SmallVector<unsigned>> runsOfGroupRun;
  };
  IRMapping &mapping(Row &r, Slot s) const {
    return r.mappings[s.group * lanesPerGroup + s.lane];
  }
  /// The mappings of group `g`'s lanes, as evaluateEpilogueBody takes them.
  MutableArrayRef<IRMapping> lanesOf(Row &r, int64_t g) const {
    return MutableArrayRef<IRMapping>(&r.mappings[g * lanesPerGroup],
                                      lanesPerGroup);
  }
  /// Fragments: slot `s`'s column offset from the lane's first column.
  int64_t slotOffset(Slot s) const {
    auto [j, e] = layout.fragmentPos[s.group][s.lane];
    return 8 * j + e;
  }
  /// The row's position, bounds and clamped row.
  Row beginRow(ImplicitLocOpBuilder &lb, Value localRow,
               int64_t fragmentRow) const;
  /// Whether slot `s`'s element, or all of `run`, lies in the output.
  Value slotInBounds(ImplicitLocOpBuilder &lb, const Row &r, Slot s) const;
  Value runInBounds(ImplicitLocOpBuilder &lb, const Row &r,
                    const Run &run) const;
  void mapAccumulators(ImplicitLocOpBuilder &lb, Row &r,
                       function_ref<Value(Slot)> accumulator);
  /// The reads the whole row shares, before any group run: the pipelined
  /// slots' wait and refill around the inputs' readRow, the pair inputs'
  /// bounds, the inputs' stageRow.
  void readRow(ImplicitLocOpBuilder &lb, Row &r);
  /// Maps `arg` to `value` at every slot of group run `gr`.
  void mapEverySlot(Row &r, unsigned gr, Value arg, Value value);
  /// The values of each run of group run `gr` of input `k`, from its row
  /// buffer, or (a tile or column input) from global memory or its
  /// prefetched registers.
  void mapRowBufferInput(ImplicitLocOpBuilder &lb, Row &r, unsigned k,
                         unsigned gr);
  void mapTileOrColumnInput(ImplicitLocOpBuilder &lb, Row &r, unsigned k,
                            unsigned gr);
  /// Slot `s`'s value of a partial's reduction, its identity beyond the
  /// output.
  Value partialTerm(ImplicitLocOpBuilder &lb, Row &r, Slot s, Value value,
                    ReductionKind kind);
  /// The nodes of the epilogue's inputs and outputs (made by build).
  SmallVector<std::unique_ptr<InputNode>> inputNodes;
  SmallVector<std::unique_ptr<OutputNode>> outputNodes;
  void finishColumnPartials(ImplicitLocOpBuilder &b, ValueRange colAccs);
  /// Column scratch `scratchIndex` beside the ring or the accumulator tile:
  /// one f32 row of the tile per warp (fragments, whose lanes 0-3 write
  /// it once the 8 lanes of each column have combined) or per pass row
  /// (shared tile, every thread writing its columns).
  struct ColumnScratch {
    Value view;
    int64_t rows;
    Value row, writer;
  };
  ColumnScratch columnScratch(ImplicitLocOpBuilder &b,
                              unsigned scratchIndex) const;
  /// Writes the thread's value of each slot (g * lanesPerGroup + l) to its
  /// row of `scratch`.
  void storeColumnScratch(ImplicitLocOpBuilder &b, const ColumnScratch &scratch,
                          ArrayRef<Value> values) const;
  /// One row of a walk: the row's values given its accumulators and the
  /// values carried from the rows before (`running`), returned updated.
  using RowFn = function_ref<SmallVector<Value>(
      ImplicitLocOpBuilder &, Value localRow, int64_t fragmentRow,
      function_ref<Value(Slot)> accumulator, ValueRange running)>;
  /// The walk over the thread's rows of the tile (the fragments' rows,
  /// unrolled, or the shared tile's passes in a loop), `init` carried
  /// through `row`; returns what the last row gave back.
  SmallVector<Value> walkRows(ImplicitLocOpBuilder &b, ValueRange init,
                              RowFn row);
  /// Before a walk: the pipelined inputs' first rows, before any row's math.
  void issueFirstRows(ImplicitLocOpBuilder &b);

  /// Statistics of groups along columns (EpilogueColumnGroups.cpp), each a
  /// whole column of the tile: one walk per statistic in program order
  /// evaluates what it reduces and combines the thread's rows, then the
  /// threads' values combine through the column scratch in a fixed order
  /// into the statistic's row in shared memory, which every row of the
  /// main walk reads.
  void computeColumnStatistics(ImplicitLocOpBuilder &b);
  SmallVector<Value> columnStatisticRow(ImplicitLocOpBuilder &lb,
                                        GroupReduceOp stat, Value localRow,
                                        int64_t fragmentRow,
                                        function_ref<Value(Slot)> accumulator,
                                        ValueRange running);
  void finishColumnStatistic(ImplicitLocOpBuilder &b, GroupReduceOp stat,
                             ValueRange running);
  /// Once every statistic is finished, one thread per column computes the
  /// values derived from them that the rows read (columnUniform) into
  /// rows of their own.
  void finishColumnDerived(ImplicitLocOpBuilder &b);
  /// Row `k` of the column statistics and derived values ([tileN] f32):
  /// statistic k in program order, or derived value k - (statistics).
  Value columnRowBuffer(ImplicitLocOpBuilder &b, int64_t k) const;
  /// The row of the column statistic or derived value `v`.
  int64_t columnRowOf(Value v) const;
  /// Maps `values` at each slot of `r`, read from their rows.
  void mapColumnRows(ImplicitLocOpBuilder &lb, Row &r, ArrayRef<Value> values);
  /// The statistics along columns finished so far, in program order (what
  /// a statistic's walk reads).
  SmallVector<Value> finishedColumnStatistics;
  /// The ops the rows evaluate: the body's but those the same down each
  /// column (EpiloguePlan::columnUniform).
  SmallVector<Operation *> rowOps;

  /// Whether `memref` admits vector accesses along its last dimension (unit
  /// static innermost stride), and the alignment such an access of `count`
  /// elements asks for.
  std::optional<int64_t> vectorAlignment(Value memref, int64_t count) const;
  /// True when the element at `indices` of `memref` sits at a multiple of
  /// `alignment` bytes.
  Value isAligned(ImplicitLocOpBuilder &b, Value memref, ValueRange indices,
                  int64_t alignment) const;
  /// True when every run of elements of `memref` that starts at a multiple
  /// of alignment / (element bytes) columns is `alignment`-aligned: the
  /// first element is, and so is each row's stride in bytes. The same for
  /// the whole kernel: the epilogue's runs start at multiples of their
  /// length (see the constructor).
  Value rowsAligned(ImplicitLocOpBuilder &b, Value memref,
                    int64_t alignment) const;
  /// Loads `count` consecutive elements of `memref` starting at `indices`
  /// (last index = first column): one vector load when they are in bounds
  /// (`inBounds`) and aligned, else element by element at clamped columns.
  /// `vectors` false: element by element always.
  SmallVector<Value> loadRun(ImplicitLocOpBuilder &b, Value memref,
                             SmallVector<Value> indices, int64_t count,
                             Value inBounds, Value lastCol,
                             bool vectors = true) const;
  /// Where a run of accesses may go: whether all of it lies in the output
  /// (`whole`), and whether its element `e` does.
  struct RunBounds {
    Value whole;
    std::function<Value(ImplicitLocOpBuilder &, int64_t)> element;
  };
  /// A run of `count` elements from column `first` of a row (`inRow`) of
  /// `limit` columns.
  RunBounds limitBounds(ImplicitLocOpBuilder &b, Value inRow, Value first,
                        int64_t count, Value limit) const;
  /// Fragments: a run whose element e has the column offset
  /// `first` + e / `perColumn` from the lane's first column, against the
  /// row's room (see emitRow; all in bounds in an interior tile).
  RunBounds roomBounds(ImplicitLocOpBuilder &b, Value room, int64_t first,
                       int64_t count, int64_t perColumn = 1) const;
  /// Stores `values` at consecutive columns from `indices`: one vector store
  /// when all are in bounds and aligned, else masked element stores.
  void storeRun(ImplicitLocOpBuilder &b, Value memref,
                SmallVector<Value> indices, ArrayRef<Value> values,
                const RunBounds &bounds) const;
  /// The columns from `col` on that lie below `limit`, at least 0.
  Value columnsLeft(ImplicitLocOpBuilder &b, Value col, Value limit) const {
    return arith::SelectOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, col, limit),
        arith::SubIOp::create(b, limit, col), index(b, 0));
  }
  /// `room` in row `row` of the output, 0 beyond M. Each row's own value
  /// (not one shared by all), so that nothing derived from it stays live
  /// from one row's copy to the next.
  Value rowRoom(ImplicitLocOpBuilder &b, Value row, Value room) const {
    return arith::SelectOp::create(
        b,
        arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, frame.sizeM),
        room, index(b, 0));
  }
  /// Copies `count` elements between a row segment of `memref` at `indices`
  /// and the staging buffer `stage` at `at` (to the buffer when `load`):
  /// one 16-byte access each way when `room` (the columns left in the
  /// row, 0 beyond M) holds them all and the rows are `aligned` (both
  /// unused in an interior tile), else an
  /// element loop over the columns in bounds. The loop leaves no values in
  /// registers (the accumulators fill them).
  void copyStaged(ImplicitLocOpBuilder &b, Value memref,
                  SmallVector<Value> indices, Value stage, Value at,
                  int64_t count, Value room, Value aligned, bool load) const;
  /// Whether this copy writes output `i` with TMA stores (an interior tile;
  /// see GemmKernelConfig::tmaStores).
  bool tmaStored(unsigned i) const {
    assert(!plan.outputs[i].tmaStore ||
           (i < frame.outputMaps.size() && frame.outputMaps[i]));
    return interior && plan.outputs[i].tmaStore;
  }
  /// Before the warp writes its staging buffer: in a kernel that stores
  /// with TMA, lane 0 (which issued them) waits until the stores issued
  /// from the buffer have read it.
  void awaitStagingBuffer(ImplicitLocOpBuilder &b, bool syncWarp = true) const;
  /// storeStaged for an output stored with TMA (tmaStored): the warp writes
  /// its 8 rows into the buffer as 128-byte-wide boxes in TMA's 128-byte
  /// swizzle (16-byte chunk c of a row at c xor (address bits 7-9), so that
  /// neither the lanes' writes nor TMA conflict on banks), then lane 0
  /// stores the boxes and commits them as one bulk group. `packed[j]` is
  /// the lane's two columns 8j + 2q, + 1 of the row: an i32 of two 16-bit
  /// elements, or an i16 of two 8-bit ones.
  void storeStagedWithTma(ImplicitLocOpBuilder &b, unsigned i, Value row,
                          ArrayRef<Value> packed) const;
  /// The warp's staging buffer's shared address (32 bits), opaque.
  Value stagingAddress32(ImplicitLocOpBuilder &b) const;
  /// storeStagedWithTma's writes of 16-bit pairs (stmatrix) and of 8-bit
  /// pairs (2-byte shared stores); each returns the buffer's address.
  Value writeMatrixBoxes(ImplicitLocOpBuilder &b, ArrayRef<Value> packed) const;
  Value writeBytePairBoxes(ImplicitLocOpBuilder &b,
                           ArrayRef<Value> pairs) const;
  /// The TMA stores of the boxes at `address` of output `i`'s rows from
  /// the warp's first `row`.
  void issueTmaStores(ImplicitLocOpBuilder &b, unsigned i, Value row,
                      Value address, Type element) const;
  /// Fragments: the 8-column group j of `run` (a run is the lane's two
  /// columns 8j + 2q, + 1 of one group).
  int64_t groupOf8(const Run &run) const {
    return layout.fragmentPos[run.front().group][run.front().lane].first;
  }
  /// The values of `run` in `loaded`, vectors of the lane's two columns of
  /// each 8-column group (see InputPrefetch::fragments).
  SmallVector<Value> fragmentValues(ImplicitLocOpBuilder &b,
                                    ArrayRef<Value> loaded,
                                    const Run &run) const {
    auto [j, e] = layout.fragmentPos[run.front().group][run.front().lane];
    SmallVector<Value> values;
    for (int64_t i = 0, n = run.size(); i < n; ++i)
      values.push_back(
          vector::ExtractOp::create(b, loaded[j], ArrayRef<int64_t>{e + i}));
    return values;
  }
  /// 16 w: the first of the warp's rows in each fragment (see
  /// fragmentRowOffset).
  Value warpFragmentRow(ImplicitLocOpBuilder &b) const {
    return arith::MulIOp::create(b, frame.warp, index(b, 16));
  }
  /// Where the warp's part of the staging buffers starts, in bytes from
  /// the dynamic shared memory's start.
  Value warpStagingBase(ImplicitLocOpBuilder &b) const {
    return arith::AddIOp::create(
        b, frame.sharedBase,
        arith::AddIOp::create(
            b, index(b, config.stagingOffset()),
            arith::MulIOp::create(b, frame.warp,
                                  index(b, config.stagingBytesPerWarp()))));
  }
  /// The values of a run read with `vectorLoad` (a vector of `type`) where
  /// `fast` holds (always when it is null), else with `scalarLoads`.
  SmallVector<Value>
  readRun(ImplicitLocOpBuilder &b, VectorType type, Value fast,
          function_ref<Value(ImplicitLocOpBuilder &)> vectorLoad,
          function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)> scalarLoads)
      const;
  /// The warp's staging buffer as stagingRows x `rowElements` elements of
  /// `element`, flat.
  Value stagingBuffer(ImplicitLocOpBuilder &b, int64_t rowElements,
                      Type element) const;
  /// Fragments: the number of group `g`'s pair in the tile as a constant
  /// plus the lane's part (see layOutFragments).
  std::pair<int64_t, Value> pairNumber(int64_t g) const {
    auto [j, e] = layout.fragmentPos[g].front();
    if (*pairStride == 1)
      return {4 * j, layout.laneQ};
    int64_t s = *pairStride;
    return {(8 * j) / (2 * s) * s + (8 * j) % (2 * s) + e, layout.twoQ};
  }
  /// What one lane writes of a staged output row: `values` at consecutive
  /// elements from `first` + `laneOffset` (within one 16-byte chunk).
  struct StagedRun {
    int64_t first;
    Value laneOffset;
    SmallVector<Value> values;
  };
  /// Writes the fragment row `row` of a 16-bit output (`rowElements` per
  /// tile row, from output column `firstCol`, `limit` columns in all)
  /// through the warp's staging buffer: the warp's lanes write their runs
  /// of its 8 rows (one per quad; rows padded by a chunk, see
  /// GemmKernelConfig::stagingRowStride, so that neither way conflicts on
  /// banks), then each lane copies 16 bytes of one row out (copyStaged).
  void storeStaged(ImplicitLocOpBuilder &b, Value out, Value row,
                   int64_t rowElements, Value firstCol, Value limit,
                   ArrayRef<StagedRun> staged) const;
  /// Reads the fragment row `row` of a 16-bit tile input through the warp's
  /// staging buffer, the reverse of storeStaged: each lane copies 16 bytes
  /// of one of the warp's 8 rows into the buffer, then reads its own
  /// runs. Returns the values of `runs`' slots, run by run.
  SmallVector<SmallVector<Value>> loadStaged(ImplicitLocOpBuilder &b,
                                             Value input, Value row) const;
  /// The lane's share of copying the warp's stagingRows rows from
  /// `firstRow` (the tile's columns) of a 16-bit tile input into `stage`:
  /// its 16-byte loads all issued before their stores, or, with `async`,
  /// cp.async copies that the caller commits and awaits (zero-filled
  /// beyond M and N; rows that are not 16-byte aligned are copied
  /// element by element at once). Elements beyond M or N are otherwise
  /// left as they are: whatever the epilogue computes from them is masked.
  void copyToStage(ImplicitLocOpBuilder &b, Value input, Value stage,
                   Value firstRow, Value lane, bool async) const;
  /// The lane's runs of the warp's rows in `stage` (see loadStaged), read
  /// with ldmatrix where they are whole 8 x 8 matrices; every lane has read
  /// them when it returns.
  SmallVector<SmallVector<Value>> readStage(ImplicitLocOpBuilder &b,
                                            Value stage, Value lane) const;
  /// The fragment rows a register epilogue's thread has (two per fragment).
  int64_t fragmentRows() const { return 2 * frame.accFragments.size(); }
  /// Slot `slot` of the `position`th pipelined input in the warp's buffer.
  Value pipelineSlot(ImplicitLocOpBuilder &b, unsigned position,
                     int64_t slot) const;
  /// Issues and commits, as one cp.async group, the copies of the warp's
  /// rows of fragment row `fragmentRow` of every pipelined input into their
  /// slots `fragmentRow` mod kPipelineSlots.
  void issuePipelinedRow(ImplicitLocOpBuilder &b, int64_t fragmentRow) const;
  /// One lane's share of copying the warp's stagingRows rows from
  /// `firstRow` between a matrix and the staging buffer, `rowElements`
  /// elements each from column `firstCol`: copy `t` (of
  /// stagingCopies) moves the 16-byte chunk at (row, col) of the matrix,
  /// at `at` in the buffer.
  struct StagingCopy {
    Value row, col, at;
  };
  /// `chunk`: elements per 16 bytes; `lane`: the lane's index (frame.lane
  /// unless given).
  StagingCopy stagingCopy(ImplicitLocOpBuilder &b, Value firstRow,
                          Value firstCol, int64_t rowElements, int64_t chunk,
                          int64_t t, Value lane = {}) const;
  /// A 32-bit `value` (i32 or f32, or a 16-bit float) through an opaque
  /// move: LLVM cannot hoist what is derived from it out of the loop it is
  /// made in, where holding those values through the K loop would spill,
  /// nor take what is derived from it for what another walk derives from
  /// `value` itself.
  Value opaque(ImplicitLocOpBuilder &b, Value value) const;
  /// The same for an index below 2^32.
  Value opaqueIndex(ImplicitLocOpBuilder &b, Value value) const;
  /// Whether `extent` elements from `origin` lie below `size`.
  Value within(ImplicitLocOpBuilder &b, Value origin, int64_t extent,
               Value size) const {
    return arith::CmpIOp::create(
        b, arith::CmpIPredicate::ule,
        arith::AddIOp::create(b, origin, index(b, extent)), size);
  }
  /// `values` with each consecutive pair narrowed from f32 together (one
  /// packed cvt.rn.{bf16,f16}x2.f32, or cvt.rn.satfinite.{e4m3,e5m2}x2.f32
  /// through truncToFp8) where both are scalar truncations of f32. A scalar
  /// cvt reading a WGMMA accumulator makes ptxas serialize the kernel's
  /// WGMMAs (C7514); the packed one does not, and halves the conversions.
  SmallVector<Value> narrowPairs(ImplicitLocOpBuilder &b,
                                 ArrayRef<Value> values) const;

  GemmOp op;
  const GemmKernelConfig &config;
  const EpiloguePlan &plan;
  const KernelFrame &frame;
  ValueRange inputs, outputs;
  std::optional<int64_t> pairStride;
  bool interior;
  SmallVector<OutputRole> roles;
  int64_t lanesPerGroup;

  /// The thread's share of the tile (EpilogueLayout.h), and its groups'
  /// columns in the output and (shared tile) whether they lie in it.
  SlotLayout layout;
  /// The blocks of each width of the epilogue's group statistics and
  /// grouped outputs (EpilogueGroups.cpp).
  llvm::SmallDenseMap<int64_t, ColumnBlocks> groupBlocks;
  void layOutGroups(ImplicitLocOpBuilder &b);
  /// Every group statistic of the row, in program order: what it reduces
  /// evaluated at each slot, combined over the thread's slots of each
  /// group and across the lanes that share it, and mapped at every slot of
  /// the group.
  void computeGroupStatistics(ImplicitLocOpBuilder &lb, Row &r);
  SlotValues cols, inCols;
  /// Per periodic input, its period as i32, and whether its rows may be
  /// read with vector accesses (base and row stride aligned for a run of
  /// the layout's widest run length, the period a multiple of it).
  SmallVector<Value> periods, periodicVectors;
  /// The values of `run` of periodic input `k` (column c at c mod P) in
  /// the row `row`: one vector access where the run does not wrap and is
  /// aligned, else element by element with one 32-bit remainder.
  SmallVector<Value> readPeriodicRun(ImplicitLocOpBuilder &b, unsigned k,
                                     const Run &run, Value row) const;
  /// Fragments: see gpu_lowering::staticPeriod.
  std::optional<int64_t> staticPeriod(unsigned k) const {
    return plan.inputs[k].period;
  }
  /// With a static period P: the column that `run` reads before lane q's
  /// 2q, (8j + e) mod P.
  int64_t periodicColumn(int64_t period, const Run &run) const {
    auto [j, e] = layout.fragmentPos[run.front().group][run.front().lane];
    return (8 * j + e) % period;
  }
  /// Per input whose rows are staged (stagesInputRows), its part of the
  /// warp's buffer; null for the others.
  SmallVector<Value> inputRowBuffers;
  void layOutInputRows(ImplicitLocOpBuilder &b);
  /// Copies the rows input `k` needs into its buffer: the tile's columns of
  /// one row (a column input, once per tile) or of the warp's stagingRows
  /// rows from `firstRow` (a periodic input, column c read at c mod P),
  /// with 16-byte accesses where aligned, else element by element.
  void stageInputRows(ImplicitLocOpBuilder &b, unsigned k,
                      Value firstRow) const;
  /// One lane's share of copying input `k`'s rows into its row buffer
  /// (stageInputRows): chunk `first` + lane of `chunks` 16-byte chunks,
  /// `chunksPerRow` to a row of the buffer; its parts: one lane's chunks,
  /// their sources, whether each exists, and the copy with 16-byte accesses
  /// or element by element.
  struct InputRowCopy {
    unsigned k;
    bool periodic;
    int64_t chunk, chunksPerRow, chunks;
    Value firstRow, lastRow;
    /// Chunk `first` + lane: its index, its place in the buffer, its first
    /// column and (periodic) its row.
    struct Chunk {
      Value index, at, col, row;
    };
  };
  InputRowCopy::Chunk inputRowChunk(ImplicitLocOpBuilder &cb,
                                    const InputRowCopy &c, int64_t first) const;
  SmallVector<Value> inputRowSource(ImplicitLocOpBuilder &sb,
                                    const InputRowCopy &c,
                                    const InputRowCopy::Chunk &ch,
                                    Value e) const;
  Value inputRowChunkExists(ImplicitLocOpBuilder &cb, const InputRowCopy &c,
                            const InputRowCopy::Chunk &ch, int64_t first) const;
  void copyInputRowChunks(ImplicitLocOpBuilder &tb,
                          const InputRowCopy &c) const;
  void copyInputRowElements(ImplicitLocOpBuilder &tb,
                            const InputRowCopy &c) const;
  /// The values of `run` (in the lane's row of the buffer) of staged input
  /// `k`.
  SmallVector<Value> readInputRun(ImplicitLocOpBuilder &b, unsigned k,
                                  const Run &run) const;
};

} // namespace mlir::coda::gpu_lowering

#endif // CODA_LIB_CONVERSION_CODATOGPU_EPILOGUEBUILDER_H
