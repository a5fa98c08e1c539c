//===- Epilogue.cpp - the epilogue of a coda.gemm kernel -------------------===//
//
// Evaluates the epilogue region over a CTA's output tile, reading epilogue
// inputs from global memory and writing tile, pair, interleaved, partial and
// selection outputs with bounds masks. Two thread layouts share everything
// but where the accumulators come from:
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

#include "EpiloguePlan.h"

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

#include <map>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

constexpr int64_t kColumnsPerThread = kEpilogueColumnsPerThread;
/// Passes over the shared accumulator tile in one iteration of the
/// epilogue's row loop.
constexpr int64_t kSharedTileRowsUnrolled = 4;
/// 16-byte chunks whose loads a lane issues before storing them when it
/// stages input rows.
constexpr int64_t kStagingLoadsInFlight = 8;
/// Elements of `element` in a 16-byte chunk (16 for an FP8 output).
int64_t chunkElements(Type element) {
  return 128 / element.getIntOrFloatBitWidth();
}
/// WGMMA fragments: 64 rows, 8-column groups of 2 columns per lane.
constexpr int64_t kFragmentRows = 64;
/// A register epilogue thread's rows are 64 f + 16 w + l / 4 (+ 8 h) for
/// fragment f, warp w (of its warpgroup), lane l and half h: the offset of
/// fragment row (f, h) from the thread's first row.
constexpr int64_t fragmentRowOffset(int64_t f, int64_t h) {
  return f * kFragmentRows + 8 * h;
}
/// The 16-byte copies each lane makes to move a warp's stagingRows rows of
/// `rowElements` elements, `chunk` to 16 bytes (see
/// EpilogueBuilder::stagingCopy).
constexpr int64_t stagingCopies(int64_t rowElements, int64_t chunk) {
  return GemmKernelConfig::stagingRows * rowElements / chunk / 32;
}

} // namespace

/// The vector<values.size() x element> of `values`. Bytes are packed two
/// to an i16 first: NVPTX builds a vector of bytes from 16-bit halves and
/// may leave one of them an undefined register, on which ptxas 13.0 crashes
/// (a segmentation fault at -O1 and above).
static Value fromElements(ImplicitLocOpBuilder &b, Type element,
                          ArrayRef<Value> values) {
  int64_t count = values.size();
  auto type = VectorType::get({count}, element);
  if (element.getIntOrFloatBitWidth() != 8 || count % 2)
    return vector::FromElementsOp::create(b, type, values);
  auto i16x1 = VectorType::get({1}, b.getI16Type());
  SmallVector<Value> halves;
  for (int64_t e = 0; e < count; e += 2) {
    Value pair = vector::FromElementsOp::create(
        b, VectorType::get({2}, element), values.slice(e, 2));
    halves.push_back(vector::ExtractOp::create(
        b, vector::BitCastOp::create(b, i16x1, pair), ArrayRef<int64_t>{0}));
  }
  return vector::BitCastOp::create(
      b, type,
      vector::FromElementsOp::create(
          b, VectorType::get({count / 2}, b.getI16Type()), halves));
}

namespace {

/// One element a thread handles: group `group` (of its groups) and `lane`
/// (0, or 1 for the second column of a pair).
struct Slot {
  int64_t group, lane;
};

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
                  ValueRange inputs, ValueRange outputs, bool interior = false)
      : op(op), config(config), plan(plan), frame(frame), inputs(inputs),
        outputs(outputs), pairStride(op.getPairStride()), interior(interior) {
    for (const OutputPlan &output : plan.outputs)
      roles.push_back(output.role);
    lanesPerGroup = pairStride ? 2 : 1;
  }

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

private:
  Value trueValue(ImplicitLocOpBuilder &b) const {
    return arith::ConstantIntOp::create(b, b.getI1Type(), 1);
  }
  using Run = SmallVector<Slot>;
  /// Per slot values, indexed [group][lane].
  using SlotValues = SmallVector<SmallVector<Value, 2>>;
  /// The slots that one row partial of a row combines in this thread, and
  /// the partial's index among the tile's.
  struct PartialBlock {
    SmallVector<Slot> slots;
    Value indexInTile;
  };

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
          math::Exp2Op::create(
              b, math::FmaOp::create(b, v, log2e, negScaledShift),
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

  /// The thread's groups, their columns and runs, for each layout.
  void layOutSharedTile(ImplicitLocOpBuilder &b);
  void layOutFragments(ImplicitLocOpBuilder &b);
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
    /// Per input, what the whole row shares: a staged input's runs, a row
    /// or scalar input's value.
    SmallVector<SmallVector<SmallVector<Value>>> stagedValues;
    SmallVector<Value> shared;
    /// Pair inputs: the tile's first pair and the last one.
    Value firstPair, lastPair;
    /// The runs of each group run.
    SmallVector<SmallVector<unsigned>> runsOfGroupRun;
    /// Staged tile outputs' runs, narrowed as they are computed: (output,
    /// run) -> values.
    DenseMap<std::pair<unsigned, unsigned>, SmallVector<Value>> narrowed;
    /// The row's reads of periodic inputs with a static period: (input,
    /// column mod P, run length) -> values.
    std::map<std::tuple<unsigned, int64_t, int64_t>, SmallVector<Value>>
        periodicReads;
    /// Eager row partials' running values, per output and block.
    DenseMap<unsigned, SmallVector<Value>> runningPartials;
  };
  IRMapping &mapping(Row &r, Slot s) const {
    return r.mappings[s.group * lanesPerGroup + s.lane];
  }
  /// Fragments: slot `s`'s column offset from the lane's first column.
  int64_t slotOffset(Slot s) const {
    auto [j, e] = fragmentPos[s.group][s.lane];
    return 8 * j + e;
  }
  /// Whether output `i` is row partials combined as each group run is
  /// computed (OutputPlan::eager).
  bool eagerPartials(unsigned i) const {
    return plan.outputs[i].eager && roles[i] == OutputRole::rowPartials;
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
  /// The reads the whole row shares, before any group run.
  void readRowInputs(ImplicitLocOpBuilder &lb, Row &r);
  void beginGroupRuns(ImplicitLocOpBuilder &lb, Row &r);
  /// Each input's values of group run `gr`, by how the input moves.
  void mapGroupRunInputs(ImplicitLocOpBuilder &lb, Row &r, unsigned gr);
  void mapStagedInput(Row &r, unsigned k, unsigned gr);
  void mapRowBufferInput(ImplicitLocOpBuilder &lb, Row &r, unsigned k,
                         unsigned gr);
  void mapTileOrColumnInput(ImplicitLocOpBuilder &lb, Row &r, unsigned k,
                            unsigned gr);
  void mapPairInput(ImplicitLocOpBuilder &lb, Row &r, unsigned k,
                    unsigned gr);
  void mapPeriodicInput(ImplicitLocOpBuilder &lb, Row &r, unsigned k,
                        unsigned gr);
  /// What the outputs take of group run `gr` as soon as it is computed.
  void consumeGroupRun(ImplicitLocOpBuilder &lb, Row &r, unsigned gr);
  /// Slot `s`'s value of a partial's reduction, its identity beyond the
  /// output.
  Value partialTerm(ImplicitLocOpBuilder &lb, Row &r, Slot s, Value value,
                    ReductionKind kind);
  void storeInterleaved(ImplicitLocOpBuilder &lb, Row &r, unsigned i,
                        ArrayRef<unsigned> runIndices);
  /// Each output's part of the row, by role, once the row is computed.
  void storeRowOutputs(ImplicitLocOpBuilder &lb, Row &r,
                       MutableArrayRef<Value> nextCol);
  void storeTileOutput(ImplicitLocOpBuilder &lb, Row &r, unsigned i);
  void storePairOutput(ImplicitLocOpBuilder &lb, Row &r, unsigned i);
  void storeRowPartials(ImplicitLocOpBuilder &lb, Row &r, unsigned i);
  void accumulateColumnPartials(ImplicitLocOpBuilder &lb, Row &r, unsigned i,
                                MutableArrayRef<Value> running);
  void storeRowSelect(ImplicitLocOpBuilder &lb, Row &r, unsigned i);
  /// Writes this tile's column partials from each thread's running values.
  void finishColumnPartials(ImplicitLocOpBuilder &b, ValueRange colAccs);

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
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, row, frame.sizeM),
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
  /// Whether output `i`, input `k` go through the staging buffers.
  bool staged(unsigned i) const { return plan.outputs[i].staged; }
  bool stagedInput(unsigned k) const { return plan.inputs[k].staged; }
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
  /// its 8 rows with stmatrix into the buffer as 64-column boxes in TMA's
  /// 128-byte swizzle (16-byte chunk c of a row at c xor (address bits 7-9),
  /// so that neither stmatrix nor TMA conflict on banks), then lane 0
  /// stores the boxes and commits them as one bulk group.
  void storeStagedWithTma(ImplicitLocOpBuilder &b, unsigned i, Value row,
                          ArrayRef<Value> packed) const;
  /// Fragments: the 8-column group j of `run` (a run is the lane's two
  /// columns 8j + 2q, + 1 of one group).
  int64_t groupOf8(const Run &run) const {
    return fragmentPos[run.front().group][run.front().lane].first;
  }
  /// The values of `run` in `loaded`, vectors of the lane's two columns of
  /// each 8-column group (see InputPrefetch::fragments).
  SmallVector<Value> fragmentValues(ImplicitLocOpBuilder &b,
                                    ArrayRef<Value> loaded,
                                    const Run &run) const {
    auto [j, e] = fragmentPos[run.front().group][run.front().lane];
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
  SmallVector<Value> readRun(
      ImplicitLocOpBuilder &b, VectorType type, Value fast,
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
    auto [j, e] = fragmentPos[g].front();
    if (*pairStride == 1)
      return {4 * j, laneQ};
    int64_t s = *pairStride;
    return {(8 * j) / (2 * s) * s + (8 * j) % (2 * s) + e, twoQ};
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
  /// A 32-bit `value` through an opaque move: LLVM cannot hoist what is
  /// derived from it out of the loop it is made in, where holding those
  /// values through the K loop would spill.
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

  // The layout: the thread's groups (each group's number is its pair index
  // in the tile, or its column without pairs), their columns in the tile and
  // in the output, runs of slots at consecutive columns, runs of groups with
  // consecutive numbers (pair outputs), the row partials' blocks with the
  // lane offsets that combine a partial and the lanes that write it.
  SmallVector<Value> groups;
  SlotValues localCols, cols, inCols;
  SmallVector<Run> runs;
  SmallVector<SmallVector<int64_t>> groupRuns;
  SmallVector<PartialBlock> partialBlocks;
  SmallVector<int32_t> partialOffsets;
  Value partialLeader;
  /// Fragments: each slot's 8-column group j and column e within the lane's
  /// two; the lane's q = lane mod 4 and 2q.
  SmallVector<SmallVector<std::pair<int64_t, int64_t>, 2>> fragmentPos;
  Value laneQ, twoQ;
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
    auto [j, e] = fragmentPos[run.front().group][run.front().lane];
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
  /// The values of `run` (in the lane's row of the buffer) of staged input
  /// `k`.
  SmallVector<Value> readInputRun(ImplicitLocOpBuilder &b, unsigned k,
                                  const Run &run) const;
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
  if (bytes < 2 || !llvm::isPowerOf2_64(bytes))
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

Value EpilogueBuilder::rowsAligned(ImplicitLocOpBuilder &b, Value memref,
                                   int64_t alignment) const {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<Value> origin(type.getRank(), index(b, 0));
  Value aligned = isAligned(b, memref, origin, alignment);
  auto metadata = memref::ExtractStridedMetadataOp::create(b, memref);
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  for (Value stride : metadata.getStrides().drop_back())
    aligned = arith::AndIOp::create(
        b, aligned,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq,
            arith::RemUIOp::create(
                b, arith::MulIOp::create(b, stride, index(b, bytes)),
                index(b, alignment)),
            index(b, 0)));
  return aligned;
}

EpilogueBuilder::RunBounds
EpilogueBuilder::limitBounds(ImplicitLocOpBuilder &b, Value inRow,
                             Value first, int64_t count, Value limit) const {
  Value end = arith::AddIOp::create(b, first, index(b, count));
  Value whole = arith::AndIOp::create(
      b, inRow, arith::CmpIOp::create(b, arith::CmpIPredicate::ule, end, limit));
  return {whole, [=](ImplicitLocOpBuilder &eb, int64_t e) -> Value {
            Value col = arith::AddIOp::create(eb, first, index(eb, e));
            return arith::AndIOp::create(
                eb, inRow,
                arith::CmpIOp::create(eb, arith::CmpIPredicate::ult, col,
                                      limit));
          }};
}

EpilogueBuilder::RunBounds
EpilogueBuilder::roomBounds(ImplicitLocOpBuilder &b, Value room, int64_t first,
                            int64_t count, int64_t perColumn) const {
  if (interior)
    return {trueValue(b), [this](ImplicitLocOpBuilder &eb, int64_t) {
              return trueValue(eb);
            }};
  Value whole = arith::CmpIOp::create(
      b, arith::CmpIPredicate::sle,
      index(b, first + (count + perColumn - 1) / perColumn), room);
  return {whole, [=](ImplicitLocOpBuilder &eb, int64_t e) -> Value {
            return arith::CmpIOp::create(eb, arith::CmpIPredicate::slt,
                                         index(eb, first + e / perColumn),
                                         room);
          }};
}

SmallVector<Value> EpilogueBuilder::loadRun(ImplicitLocOpBuilder &b,
                                            Value memref,
                                            SmallVector<Value> indices,
                                            int64_t count, Value inBounds,
                                            Value lastCol, bool vectors) const {
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
  if (!alignment || !vectors)
    return scalarLoads(b);
  auto vectorType = VectorType::get({count}, element);
  Value fast =
      interior ? Value()
               : arith::AndIOp::create(b, inBounds,
                                       rowsAligned(b, memref, *alignment))
                     .getResult();
  return readRun(
      b, vectorType, fast,
      [&](ImplicitLocOpBuilder &vb) -> Value {
        return vector::LoadOp::create(vb, vectorType, memref, indices,
                                      /*nontemporal=*/false,
                                      llvm::MaybeAlign(*alignment));
      },
      scalarLoads);
}

SmallVector<Value> EpilogueBuilder::readRun(
    ImplicitLocOpBuilder &b, VectorType type, Value fast,
    function_ref<Value(ImplicitLocOpBuilder &)> vectorLoad,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)> scalarLoads)
    const {
  Value loaded;
  if (!fast) {
    loaded = vectorLoad(b);
  } else {
    auto branch = scf::IfOp::create(
        b, fast,
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder vb(loc, ob);
          scf::YieldOp::create(vb, vectorLoad(vb));
        },
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder eb(loc, ob);
          scf::YieldOp::create(
              eb, vector::FromElementsOp::create(eb, type, scalarLoads(eb))
                      .getResult());
        });
    loaded = branch.getResult(0);
  }
  SmallVector<Value> values;
  for (int64_t e = 0, n = type.getNumElements(); e < n; ++e)
    values.push_back(
        vector::ExtractOp::create(b, loaded, ArrayRef<int64_t>{e}));
  return values;
}

SmallVector<Value>
EpilogueBuilder::narrowPairs(ImplicitLocOpBuilder &b,
                             ArrayRef<Value> values) const {
  SmallVector<Value> result(values);
  auto narrowed = [](Value v) -> arith::TruncFOp {
    auto trunc = v.getDefiningOp<arith::TruncFOp>();
    if (!trunc || !trunc.getIn().getType().isF32() || trunc.getRoundingmode())
      return {};
    return trunc;
  };
  for (size_t e = 0; e + 1 < values.size(); e += 2) {
    arith::TruncFOp lo = narrowed(values[e]), hi = narrowed(values[e + 1]);
    if (!lo || !hi || lo.getType() != hi.getType())
      continue;
    if (isa<Float8E4M3FNType, Float8E5M2Type>(lo.getType())) {
      SmallVector<Value> bytes = truncToFp8(
          b, {lo.getIn(), hi.getIn()}, cast<FloatType>(lo.getType()));
      result[e] = bytes[0];
      result[e + 1] = bytes[1];
      continue;
    }
    // LLVM scalarizes a vector fptrunc whose elements have other uses, so
    // the packed conversion is asked for by name (element 0 is `lo`).
    auto rn = NVVM::FPRoundingModeAttr::get(b.getContext(),
                                            NVVM::FPRoundingMode::RN);
    auto pairType = VectorType::get({2}, lo.getType());
    Value pair;
    if (lo.getType().isBF16())
      pair = NVVM::ConvertF32x2ToBF16x2Op::create(b, b.getLoc(), pairType, hi.getIn(),
                                                  lo.getIn(), Value(), rn);
    else if (lo.getType().isF16())
      pair = NVVM::ConvertF32x2ToF16x2Op::create(b, b.getLoc(), pairType, hi.getIn(),
                                                  lo.getIn(), Value(), rn);
    else
      continue;
    result[e] = vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{0});
    result[e + 1] = vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{1});
  }
  return result;
}

void EpilogueBuilder::storeRun(ImplicitLocOpBuilder &b, Value memref,
                               SmallVector<Value> indices,
                               ArrayRef<Value> unpacked,
                               const RunBounds &bounds) const {
  SmallVector<Value> values = narrowPairs(b, unpacked);
  int64_t count = values.size();
  Value first = indices.back();
  auto scalarStores = [&](ImplicitLocOpBuilder &sb) {
    for (auto [e, value] : llvm::enumerate(values)) {
      SmallVector<Value> at(indices);
      at.back() = arith::AddIOp::create(sb, first, index(sb, e));
      storeIf(sb, bounds.element(sb, e), value, memref, at);
    }
  };
  std::optional<int64_t> alignment = vectorAlignment(memref, count);
  if (!alignment) {
    scalarStores(b);
    return;
  }
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  if (interior) {
    Value v = fromElements(b, element, values);
    vector::StoreOp::create(b, v, memref, indices, /*nontemporal=*/false,
                            llvm::MaybeAlign(*alignment));
    return;
  }
  Value fast = arith::AndIOp::create(b, bounds.whole,
                                     rowsAligned(b, memref, *alignment));
  scf::IfOp::create(
      b, fast,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        Value v = fromElements(tb, element, values);
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

void EpilogueBuilder::copyStaged(ImplicitLocOpBuilder &b, Value memref,
                                 SmallVector<Value> indices, Value stage,
                                 Value at, int64_t count, Value room,
                                 Value aligned, bool load) const {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  auto chunkType = VectorType::get({count}, element);
  auto vectorCopy = [&](ImplicitLocOpBuilder &vb) {
    auto align = llvm::MaybeAlign(16);
    if (load)
      vector::StoreOp::create(
          vb,
          vector::LoadOp::create(vb, chunkType, memref, indices,
                                 /*nontemporal=*/false, align),
          stage, ValueRange{at}, /*nontemporal=*/false, align);
    else
      vector::StoreOp::create(
          vb,
          vector::LoadOp::create(vb, chunkType, stage, ValueRange{at},
                                 /*nontemporal=*/false, align),
          memref, indices, /*nontemporal=*/false, align);
  };
  if (interior) {
    vectorCopy(b);
    return;
  }
  Value fast = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::sge, room,
                            index(b, count)),
      aligned);
  scf::IfOp::create(
      b, fast,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        vectorCopy(tb);
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        Value n = arith::MaxSIOp::create(
            eb, arith::MinSIOp::create(eb, room, index(eb, count)),
            index(eb, 0));
        scf::ForOp::create(
            eb, index(eb, 0), n, index(eb, 1), ValueRange{},
            [&](OpBuilder &fb, Location floc, Value e, ValueRange) {
              ImplicitLocOpBuilder lb(floc, fb);
              SmallVector<Value> position(indices);
              position.back() = arith::AddIOp::create(lb, indices.back(), e);
              Value slot = arith::AddIOp::create(lb, at, e);
              if (load)
                memref::StoreOp::create(
                    lb, memref::LoadOp::create(lb, memref, position), stage,
                    ValueRange{slot});
              else
                memref::StoreOp::create(
                    lb, memref::LoadOp::create(lb, stage, ValueRange{slot}),
                    memref, position);
              scf::YieldOp::create(lb);
            });
        scf::YieldOp::create(eb);
      });
}

Value EpilogueBuilder::stagingBuffer(ImplicitLocOpBuilder &b,
                                     int64_t rowElements, Type element) const {
  MLIRContext *ctx = b.getContext();
  auto stageType = MemRefType::get(
      {GemmKernelConfig::stagingRows *
       GemmKernelConfig::stagingRowStride(rowElements,
                                          chunkElements(element))},
      element,
      MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  return memref::ViewOp::create(b, stageType, frame.shared,
                                warpStagingBase(b), ValueRange{});
}

EpilogueBuilder::StagingCopy
EpilogueBuilder::stagingCopy(ImplicitLocOpBuilder &b, Value firstRow,
                             Value firstCol, int64_t rowElements,
                             int64_t chunk, int64_t t, Value lane) const {
  if (!lane)
    lane = frame.lane;
  int64_t chunksPerRow = rowElements / chunk;
  int64_t rowsPerCopy = 32 / chunksPerRow;
  Value myChunk = arith::RemUIOp::create(b, lane, index(b, chunksPerRow));
  Value r = arith::AddIOp::create(
      b, arith::DivUIOp::create(b, lane, index(b, chunksPerRow)),
      index(b, t * rowsPerCopy));
  Value chunkStart = arith::MulIOp::create(b, myChunk, index(b, chunk));
  return {
      arith::AddIOp::create(b, firstRow, r),
      arith::AddIOp::create(b, firstCol, chunkStart),
      arith::AddIOp::create(
          b,
          arith::MulIOp::create(
              b, r,
              index(b, GemmKernelConfig::stagingRowStride(rowElements, chunk))),
          chunkStart)};
}

Value EpilogueBuilder::opaque(ImplicitLocOpBuilder &b, Value value) const {
  return LLVM::InlineAsmOp::create(
             b, value.getType(), ValueRange{value}, "mov.b32 $0, $1;", "=r,r",
             /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

Value EpilogueBuilder::opaqueIndex(ImplicitLocOpBuilder &b, Value value) const {
  Value moved =
      opaque(b, arith::IndexCastUIOp::create(b, b.getI32Type(), value));
  return arith::IndexCastUIOp::create(b, b.getIndexType(), moved);
}

SmallVector<SmallVector<Value>>
EpilogueBuilder::loadStaged(ImplicitLocOpBuilder &b, Value input,
                            Value row) const {
  Type element = cast<MemRefType>(input.getType()).getElementType();
  Value stage = stagingBuffer(b, config.tileN, element);
  // The lane's buffer offsets are the same for every row; made from an
  // opaque copy of the lane index, they are computed where used instead of
  // held through the K loop.
  Value lane = opaqueIndex(b, frame.lane);
  Value firstRow =
      arith::SubIOp::create(b, row, arith::DivUIOp::create(b, lane, index(b, 4)));
  awaitStagingBuffer(b);
  copyToStage(b, input, stage, firstRow, lane, /*async=*/false);
  NVVM::SyncWarpOp::create(b,
                           arith::ConstantIntOp::create(b, b.getI32Type(), -1));
  return readStage(b, stage, lane);
}

void EpilogueBuilder::copyToStage(ImplicitLocOpBuilder &b, Value input,
                                  Value stage, Value firstRow, Value lane,
                                  bool async) const {
  int64_t rowElements = config.tileN;
  Type element = cast<MemRefType>(input.getType()).getElementType();
  int64_t chunk = chunkElements(element);
  int64_t copies = stagingCopies(rowElements, chunk);
  auto chunkType = VectorType::get({chunk}, element);
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  // cp.async of each of the lane's chunks, `srcElements` of it read (the
  // rest zero-filled) where given.
  auto asyncCopies = [&](ImplicitLocOpBuilder &cb,
                         function_ref<Value(const StagingCopy &)> srcElements) {
    for (int64_t t = 0; t < copies; ++t) {
      StagingCopy copy =
          stagingCopy(cb, firstRow, frame.blockN, rowElements, chunk, t, lane);
      Value n = srcElements ? srcElements(copy) : Value();
      SmallVector<Value> at{copy.row, copy.col};
      if (n) {
        // A chunk that reads nothing reads from the input's origin.
        Value none = arith::CmpIOp::create(cb, arith::CmpIPredicate::eq, n,
                                           index(cb, 0));
        for (Value &i : at)
          i = arith::SelectOp::create(cb, none, index(cb, 0), i);
      }
      nvgpu::DeviceAsyncCopyOp::create(
          cb, tokenType, stage, ValueRange{copy.at}, input, at,
          cb.getIndexAttr(chunk), n, cb.getUnitAttr());
    }
  };
  // The lane's 16-byte loads, all issued before their stores so that their
  // latencies overlap instead of adding up chunk after chunk.
  auto loadWhole = [&](ImplicitLocOpBuilder &wb) {
    SmallVector<std::pair<Value, Value>> chunks;
    for (int64_t t = 0; t < copies; ++t) {
      StagingCopy copy =
          stagingCopy(wb, firstRow, frame.blockN, rowElements, chunk, t, lane);
      chunks.push_back(
          {vector::LoadOp::create(wb, chunkType, input,
                                  ValueRange{copy.row, copy.col},
                                  /*nontemporal=*/false, llvm::MaybeAlign(16)),
           copy.at});
    }
    for (auto [value, at] : chunks)
      vector::StoreOp::create(wb, value, stage, ValueRange{at},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
  };
  if (interior) {
    if (async)
      asyncCopies(b, nullptr);
    else
      loadWhole(b);
    return;
  }
  Value room = columnsLeft(
      b, stagingCopy(b, firstRow, frame.blockN, rowElements, chunk, 0, lane).col,
      frame.sizeN);
  Value aligned = rowsAligned(b, input, 16);
  // Chunk by chunk with bounds, element by element where a chunk is not
  // whole or not aligned.
  auto checkedCopies = [&](ImplicitLocOpBuilder &eb) {
    for (int64_t t = 0; t < copies; ++t) {
      StagingCopy copy =
          stagingCopy(eb, firstRow, frame.blockN, rowElements, chunk, t, lane);
      copyStaged(eb, input, {copy.row, copy.col}, stage, copy.at, chunk,
                 rowRoom(eb, copy.row, room), aligned,
                 /*load=*/true);
    }
  };
  // One warp-uniform branch: aligned rows take cp.async, bounded by the
  // columns and rows left; others the checked copy.
  if (async) {
    scf::IfOp::create(
        b, aligned,
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder ab(loc, ob);
          asyncCopies(ab, [&](const StagingCopy &copy) -> Value {
            return arith::MinUIOp::create(ab, rowRoom(ab, copy.row, room),
                                          index(ab, chunk));
          });
          scf::YieldOp::create(ab);
        },
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder eb(loc, ob);
          checkedCopies(eb);
          scf::YieldOp::create(eb);
        });
    return;
  }
  // One warp-uniform branch: the batched copy where the warp's rows lie
  // whole inside the input and are aligned, else the checked copy.
  Value whole = arith::AndIOp::create(
      b, aligned,
      arith::AndIOp::create(
          b, within(b, frame.blockN, config.tileN, frame.sizeN),
          within(b, firstRow, GemmKernelConfig::stagingRows, frame.sizeM)));
  scf::IfOp::create(
      b, whole,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder wb(loc, ob);
        loadWhole(wb);
        scf::YieldOp::create(wb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        checkedCopies(eb);
        scf::YieldOp::create(eb);
      });
}

SmallVector<SmallVector<Value>>
EpilogueBuilder::readStage(ImplicitLocOpBuilder &b, Value stage,
                           Value lane) const {
  Type element = cast<MemRefType>(stage.getType()).getElementType();
  int64_t rowStride = GemmKernelConfig::stagingRowStride(
      config.tileN, chunkElements(element));
  Value allLanes = arith::ConstantIntOp::create(b, b.getI32Type(), -1);
  Value quadRow = arith::DivUIOp::create(b, lane, index(b, 4));
  // A run's columns: 8j + e + 2q on, from the head's fragment position.
  Value laneStart = arith::AddIOp::create(
      b, arith::MulIOp::create(b, quadRow, index(b, rowStride)), twoQ);
  SmallVector<SmallVector<Value>> result;
  // Runs that are whole 8 x 8 matrices of the buffer (run r: the lane's two
  // columns 8r + 2q, + 1 of its row) are read four at a time with ldmatrix,
  // which hands each lane exactly those two elements of each matrix:
  // lanes 8m..8m+7 name the 8 rows of matrix r + m (16-byte aligned, 4
  // banks apart). One instruction replaces four 4-byte loads.
  bool wholeMatrices =
      element.getIntOrFloatBitWidth() == 16 && runs.size() % 4 == 0;
  for (auto [r, run] : llvm::enumerate(runs)) {
    int64_t j = r;
    wholeMatrices &=
        run.size() == 2 &&
        fragmentPos[run[0].group][run[0].lane] == std::pair{j, int64_t(0)} &&
        fragmentPos[run[1].group][run[1].lane] == std::pair{j, int64_t(1)};
  }
  if (wholeMatrices) {
    Value matrixRow = arith::RemUIOp::create(b, lane, index(b, 8));
    Value matrix = arith::DivUIOp::create(b, lane, index(b, 8));
    Value laneRowStart = arith::AddIOp::create(
        b, arith::MulIOp::create(b, matrixRow, index(b, rowStride)),
        arith::MulIOp::create(b, matrix, index(b, 8)));
    auto fourMatrices = VectorType::get({4, 2}, element);
    for (int64_t r = 0, e = runs.size(); r < e; r += 4) {
      Value at = arith::AddIOp::create(b, laneRowStart, index(b, 8 * r));
      Value tiles =
          nvgpu::LdMatrixOp::create(b, fourMatrices, stage, ValueRange{at},
                                    /*transpose=*/false,
                                    /*numTiles=*/4);
      for (int64_t m = 0; m < 4; ++m) {
        result.emplace_back();
        for (int64_t i = 0; i < 2; ++i)
          result.back().push_back(
              vector::ExtractOp::create(b, tiles, ArrayRef<int64_t>{m, i}));
      }
    }
    NVVM::SyncWarpOp::create(b, allLanes);
    return result;
  }
  for (const Run &run : runs) {
    auto [j, e] = fragmentPos[run.front().group][run.front().lane];
    Value at = arith::AddIOp::create(b, laneStart, index(b, 8 * j + e));
    int64_t count = run.size();
    result.emplace_back();
    if (count == 1) {
      result.back().push_back(memref::LoadOp::create(b, stage, ValueRange{at}));
      continue;
    }
    Value loaded = vector::LoadOp::create(
        b, VectorType::get({count}, element), stage, ValueRange{at},
        /*nontemporal=*/false, llvm::MaybeAlign(2 * count));
    for (int64_t i = 0; i < count; ++i)
      result.back().push_back(
          vector::ExtractOp::create(b, loaded, ArrayRef<int64_t>{i}));
  }
  // Every lane has read its values before the buffer is written again.
  NVVM::SyncWarpOp::create(b, allLanes);
  return result;
}

Value EpilogueBuilder::pipelineSlot(ImplicitLocOpBuilder &b,
                                    unsigned position, int64_t slot) const {
  int64_t offset =
      config.pipelineSlotsOffset() +
      (position * GemmKernelConfig::kPipelineSlots + slot) *
          config.pipelineSlotBytes();
  Type element =
      cast<MemRefType>(inputs[plan.pipelined[position]].getType())
          .getElementType();
  auto slotType = MemRefType::get(
      {GemmKernelConfig::stagingRows *
       GemmKernelConfig::stagingRowStride(config.tileN, chunkElements(element))},
      element, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  return memref::ViewOp::create(
      b, slotType, frame.shared,
      arith::AddIOp::create(b, warpStagingBase(b), index(b, offset)),
      ValueRange{});
}

void EpilogueBuilder::issuePipelinedRow(ImplicitLocOpBuilder &b,
                                        int64_t fragmentRow) const {
  Value lane = opaqueIndex(b, frame.lane);
  Value firstRow = arith::AddIOp::create(
      b, arith::AddIOp::create(b, frame.blockM, warpFragmentRow(b)),
      index(b, fragmentRowOffset(fragmentRow / 2, fragmentRow % 2)));
  for (auto [position, k] : llvm::enumerate(plan.pipelined))
    copyToStage(b, inputs[k],
                pipelineSlot(b, position,
                             fragmentRow % GemmKernelConfig::kPipelineSlots),
                firstRow, lane, /*async=*/true);
  NVVM::CpAsyncCommitGroupOp::create(b);
}

void EpilogueBuilder::storeStaged(ImplicitLocOpBuilder &b, Value out,
                                  Value row, int64_t rowElements,
                                  Value firstCol, Value limit,
                                  ArrayRef<StagedRun> staged) const {
  Type element = cast<MemRefType>(out.getType()).getElementType();
  int64_t chunk = chunkElements(element);
  Value stage = stagingBuffer(b, rowElements, element);
  int64_t rowStride = GemmKernelConfig::stagingRowStride(rowElements, chunk);
  Value quadRow = arith::DivUIOp::create(b, frame.lane, index(b, 4));
  Value rowStart = arith::MulIOp::create(b, quadRow, index(b, rowStride));
  awaitStagingBuffer(b);
  for (const StagedRun &run : staged) {
    Value at = arith::AddIOp::create(
        b, arith::AddIOp::create(b, rowStart, run.laneOffset),
        index(b, run.first));
    int64_t count = run.values.size();
    Value v = count == 1 ? run.values.front()
                         : fromElements(b, element, run.values);
    if (count == 1)
      memref::StoreOp::create(b, v, stage, ValueRange{at});
    else
      vector::StoreOp::create(
          b, v, stage, ValueRange{at}, /*nontemporal=*/false,
          llvm::MaybeAlign(count * element.getIntOrFloatBitWidth() / 8));
  }
  Value allLanes = arith::ConstantIntOp::create(b, b.getI32Type(), -1);
  NVVM::SyncWarpOp::create(b, allLanes);
  Value firstRow = arith::SubIOp::create(b, row, quadRow);
  Value room, aligned;
  if (!interior) {
    room = columnsLeft(
        b, stagingCopy(b, firstRow, firstCol, rowElements, chunk, 0)
               .col,
        limit);
    aligned = rowsAligned(b, out, 16);
  }
  for (int64_t t = 0, e = stagingCopies(rowElements, chunk); t < e; ++t) {
    StagingCopy copy =
        stagingCopy(b, firstRow, firstCol, rowElements, chunk, t);
    copyStaged(b, out, {copy.row, copy.col}, stage, copy.at, chunk,
               interior ? Value() : rowRoom(b, copy.row, room), aligned,
               /*load=*/false);
  }
  // Every lane has read its chunks before the next row overwrites them.
  NVVM::SyncWarpOp::create(b, allLanes);
}

void EpilogueBuilder::awaitStagingBuffer(ImplicitLocOpBuilder &b,
                                         bool syncWarp) const {
  if (!config.tmaStores || frame.accFragments.empty())
    return;
  // Every lane waits (those that issued nothing at once): no branch, so that
  // the row's math and its stores stay one straight-line block that ptxas
  // can interleave (a branch between them keeps the whole row live and
  // spills).
  NVVM::CpAsyncBulkWaitGroupOp::create(b, /*group=*/0, b.getUnitAttr());
  if (syncWarp)
    NVVM::SyncWarpOp::create(
        b, arith::ConstantIntOp::create(b, b.getI32Type(), -1));
}

void EpilogueBuilder::storeStagedWithTma(ImplicitLocOpBuilder &b, unsigned i,
                                         Value row,
                                         ArrayRef<Value> packed) const {
  MLIRContext *ctx = b.getContext();
  int64_t boxColumns = GemmKernelConfig::storeBoxColumns;
  int64_t boxBytes = GemmKernelConfig::stagingRows * boxColumns * 2;
  // stmatrix is warp-synchronous (.sync.aligned): no lane writes before
  // lane 0 has waited.
  awaitStagingBuffer(b, /*syncWarp=*/false);
  // stmatrix .x4: lane l gives the address of row l mod 8 of matrix l / 8;
  // matrix m of call s is the 8-column chunk 4s + m of the warp's rows, in
  // box (4s + m) / 8 at chunk (4 (s mod 2) + m) xor phase(row), the phase
  // being the row's address bits 7-9. So every call's address is the
  // lane's first (bit 6 flipped for odd calls) plus a constant. Shared
  // addresses are 32-bit: one register each.
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, i32, v);
  };
  // The buffer's address passes through an opaque move each row: the
  // addresses derived from it (loop-invariant, 12 of them) would otherwise
  // be hoisted out of the tile loop and held through it, which spills.
  Value address = opaque(
      b,
      arith::IndexCastUIOp::create(
          b, i32,
          arith::AddIOp::create(
              b,
              memref::ExtractAlignedPointerAsIndexOp::create(b, frame.shared),
              warpStagingBase(b))));
  Value lane = arith::IndexCastUIOp::create(b, i32, frame.lane);
  Value rowInBox = arith::AndIOp::create(b, lane, c32(7));
  Value matrix = arith::ShRUIOp::create(b, lane, c32(3));
  Value rowAddress = arith::AddIOp::create(
      b, address, arith::ShLIOp::create(b, rowInBox, c32(7)));
  Value phase = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, rowAddress, c32(7)), c32(7));
  // The row's address is a multiple of 128: adding the chunk's offset is
  // an or, and flipping its bit 6 an xor of the sum.
  Value first = arith::OrIOp::create(
      b, rowAddress,
      arith::ShLIOp::create(b, arith::XOrIOp::create(b, matrix, phase),
                            c32(4)));
  auto sharedPtr = LLVM::LLVMPointerType::get(ctx, 3);
  Value firsts[2] = {
      LLVM::IntToPtrOp::create(b, sharedPtr, first),
      LLVM::IntToPtrOp::create(
          b, sharedPtr, arith::XOrIOp::create(b, first, c32(64)).getResult())};
  for (int64_t call = 0, e = int64_t(packed.size()) / 4; call < e; ++call) {
    // A constant offset from one of two bases: [base + imm] in PTX.
    Value ptr = LLVM::GEPOp::create(
        b, sharedPtr, b.getI8Type(), firsts[call % 2],
        ArrayRef<LLVM::GEPArg>{int32_t(call / 2 * boxBytes)});
    NVVM::StMatrixOp::create(b, ptr, packed.slice(4 * call, 4),
                             NVVM::MMALayout::row,
                             NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
                             NVVM::LdStMatrixEltType::B16);
  }
  // The async proxy (TMA) reads what the generic proxy wrote.
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  NVVM::SyncWarpOp::create(b, c32(-1));
  // Lane 0 stores the boxes (predicated, not branched: see
  // awaitStagingBuffer); every lane commits (an empty group elsewhere).
  Value laneZero =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, c32(0));
  Value firstRow = arith::IndexCastUIOp::create(
      b, i32,
      arith::SubIOp::create(
          b, row, arith::DivUIOp::create(b, frame.lane, index(b, 4))));
  Value firstCol = arith::IndexCastUIOp::create(b, i32, frame.blockN);
  for (int64_t box = 0, e = config.tileN / boxColumns; box < e; ++box) {
    Value source = LLVM::IntToPtrOp::create(
        b, sharedPtr,
        arith::AddIOp::create(b, address, c32(box * boxBytes)).getResult());
    Value col = arith::AddIOp::create(b, firstCol, c32(box * boxColumns));
    NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
        b, frame.outputMaps[i], source, ValueRange{col, firstRow},
        /*l2CacheHint=*/Value(), NVVM::TMAStoreMode::TILE, laneZero);
  }
  NVVM::CpAsyncBulkCommitGroupOp::create(b);
}

void EpilogueBuilder::layOutSharedTile(ImplicitLocOpBuilder &b) {
  int64_t groupsPerThread = kColumnsPerThread / lanesPerGroup;
  int64_t threadsPerRow = config.tileN / kColumnsPerThread;
  Value laneInRow =
      arith::RemUIOp::create(b, frame.tid, index(b, threadsPerRow));
  Value firstGroup =
      arith::MulIOp::create(b, laneInRow, index(b, groupsPerThread));
  for (int64_t g = 0; g < groupsPerThread; ++g) {
    groups.push_back(arith::AddIOp::create(b, firstGroup, index(b, g)));
    localCols.push_back(SmallVector<Value, 2>(
        getGroupColumns(b, b.getLoc(), groups.back(), pairStride)));
  }
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
  groupRuns.emplace_back();
  for (int64_t g = 0; g < groupsPerThread; ++g)
    groupRuns.back().push_back(g);
  // A row partial covers t / 8 consecutive lanes (t = its tile), all of this
  // thread's columns in one of them.
  if (config.rowPartialTile) {
    int64_t lanesPerPartial = config.rowPartialTile / kColumnsPerThread;
    PartialBlock block;
    for (int64_t g = 0; g < groupsPerThread; ++g)
      for (int64_t l = 0; l < lanesPerGroup; ++l)
        block.slots.push_back({g, l});
    block.indexInTile =
        arith::DivUIOp::create(b, laneInRow, index(b, lanesPerPartial));
    partialBlocks.push_back(block);
    for (int32_t offset = lanesPerPartial / 2; offset >= 1; offset /= 2)
      partialOffsets.push_back(offset);
    partialLeader = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(b, laneInRow, index(b, lanesPerPartial)),
        index(b, 0));
  }
}

void EpilogueBuilder::layOutFragments(ImplicitLocOpBuilder &b) {
  // Lane l holds columns 8j + 2q and 8j + 2q + 1, q = l mod 4.
  laneQ = arith::RemUIOp::create(b, frame.lane, index(b, 4));
  twoQ = arith::MulIOp::create(b, laneQ, index(b, 2));
  int64_t groupsOf8 = config.tileN / 8;
  auto column = [&](int64_t j, int64_t e) -> Value {
    return arith::AddIOp::create(b, twoQ, index(b, 8 * j + e));
  };
  auto addGroup = [&](Value number, ArrayRef<std::pair<int64_t, int64_t>> at) {
    groups.push_back(number);
    localCols.emplace_back();
    fragmentPos.emplace_back(at.begin(), at.end());
    for (auto [j, e] : at)
      localCols.back().push_back(column(j, e));
  };
  if (!pairStride) {
    for (int64_t j = 0; j < groupsOf8; ++j) {
      for (int64_t e = 0; e < 2; ++e)
        addGroup(column(j, e), {{j, e}});
      runs.push_back({{2 * j, 0}, {2 * j + 1, 0}});
      groupRuns.push_back({2 * j, 2 * j + 1});
    }
  } else if (*pairStride == 1) {
    // A lane's two columns are a pair: group 4j + q.
    for (int64_t j = 0; j < groupsOf8; ++j) {
      addGroup(arith::AddIOp::create(
                   b, arith::DivUIOp::create(b, twoQ, index(b, 2)),
                   index(b, 4 * j)),
               {{j, 0}, {j, 1}});
      runs.push_back({{j, 0}, {j, 1}});
      groupRuns.push_back({j});
    }
  } else {
    // Stride s (a multiple of 8): column c of the first half of a 2s block
    // pairs with c + s, which the same lane holds in group j + s / 8; the
    // pair's number is (c / 2s) s + c mod 2s.
    int64_t s = *pairStride;
    for (int64_t j = 0; j < groupsOf8; ++j) {
      if ((8 * j) % (2 * s) >= s)
        continue;
      int64_t first = groups.size();
      for (int64_t e = 0; e < 2; ++e)
        addGroup(arith::AddIOp::create(
                     b, twoQ,
                     index(b, (8 * j) / (2 * s) * s + (8 * j) % (2 * s) + e)),
                 {{j, e}, {j + s / 8, e}});
      for (int64_t l = 0; l < 2; ++l)
        runs.push_back({{first, l}, {first + 1, l}});
      groupRuns.push_back({first, first + 1});
    }
  }
  // Group runs that read the same columns of a periodic input with a
  // static period next to each other, so that the read they share (see
  // staticPeriod) is live only between them.
  for (unsigned k = 0; k < inputs.size(); ++k) {
    std::optional<int64_t> period = staticPeriod(k);
    if (!period)
      continue;
    auto key = [&](const SmallVector<int64_t> &groupRun) {
      return (8 * fragmentPos[groupRun.front()].front().first) % *period;
    };
    llvm::stable_sort(groupRuns, [&](const SmallVector<int64_t> &x,
                                     const SmallVector<int64_t> &y) {
      return key(x) < key(y);
    });
    break;
  }
  // The four lanes of a quad share the rows; each thread holds part of
  // every row partial of the tile.
  if (config.rowPartialTile) {
    int64_t t = config.rowPartialTile;
    for (int64_t p = 0; p < config.tileN / t; ++p) {
      PartialBlock block;
      block.indexInTile = index(b, p);
      for (auto [g, positions] : llvm::enumerate(fragmentPos))
        for (auto [l, pos] : llvm::enumerate(positions))
          if (8 * pos.first / t == p)
            block.slots.push_back({int64_t(g), int64_t(l)});
      partialBlocks.push_back(block);
    }
    partialOffsets = {1, 2};
    partialLeader = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(b, frame.lane, index(b, 4)), index(b, 0));
  }
}

void EpilogueBuilder::layOutInputRows(ImplicitLocOpBuilder &b) {
  periods.assign(inputs.size(), Value());
  periodicVectors.assign(inputs.size(), Value());
  inputRowBuffers.assign(inputs.size(), Value());
  int64_t widestRun = 0;
  for (const Run &run : runs)
    widestRun = std::max<int64_t>(widestRun, run.size());
  for (auto [k, input] : llvm::enumerate(inputs)) {
    if (op.getInputForm(k) != AccessForm::periodic)
      continue;
    periods[k] = arith::IndexCastUIOp::create(
        b, b.getI32Type(), memref::DimOp::create(b, input, 1));
    if (std::optional<int64_t> alignment = vectorAlignment(input, widestRun))
      periodicVectors[k] = arith::AndIOp::create(
          b, rowsAligned(b, input, *alignment),
          arith::CmpIOp::create(
              b, arith::CmpIPredicate::eq,
              arith::RemUIOp::create(
                  b, periods[k],
                  arith::ConstantIntOp::create(b, b.getI32Type(), widestRun)),
              arith::ConstantIntOp::create(b, b.getI32Type(), 0)));
  }
  if (!config.stagedInputRowBytes || frame.accFragments.empty())
    return;
  MLIRContext *ctx = b.getContext();
  Value warpBase = warpStagingBase(b);
  for (auto [k, input] : llvm::enumerate(inputs)) {
    std::optional<int64_t> offset = plan.inputs[k].rowBufferOffset;
    if (!offset)
      continue;
    auto type = cast<MemRefType>(input.getType());
    int64_t elements =
        op.getInputForm(k) == AccessForm::col
            ? config.tileN
            : GemmKernelConfig::stagingRows *
                  GemmKernelConfig::stagingRowStride(config.tileN);
    auto bufferType = MemRefType::get(
        {elements}, type.getElementType(), MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
    inputRowBuffers[k] = memref::ViewOp::create(
        b, bufferType, frame.shared,
        arith::AddIOp::create(b, warpBase, index(b, *offset)), ValueRange{});
  }
}

void EpilogueBuilder::stageInputRows(ImplicitLocOpBuilder &b, unsigned k,
                                     Value firstRow) const {
  Value input = inputs[k];
  auto type = cast<MemRefType>(input.getType());
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  int64_t chunk = 16 / bytes;
  int64_t chunksPerRow = config.tileN / chunk;
  bool periodic = GemmOp(op).getInputForm(k) == AccessForm::periodic;
  int64_t rows = periodic ? GemmKernelConfig::stagingRows : 1;
  int64_t stride = GemmKernelConfig::stagingRowStride(config.tileN);
  int64_t chunks = rows * chunksPerRow;
  Value stage = inputRowBuffers[k];
  Type i32 = b.getI32Type();
  Value allLanes = arith::ConstantIntOp::create(b, i32, -1);
  // A column input's chunks loaded before the K loop (chunk lane + 32 i of
  // the row, whole passes): stored, once the warp's lanes are done reading
  // what the buffer held.
  if (ArrayRef<Value> prefetched = prefetchedValues(k); !prefetched.empty()) {
    NVVM::SyncWarpOp::create(b, allLanes);
    for (auto [i, value] : llvm::enumerate(prefetched))
      vector::StoreOp::create(b, value, stage,
                              ValueRange{columnChunkStart(b, i, chunk)},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    NVVM::SyncWarpOp::create(b, allLanes);
    return;
  }
  // 16-byte accesses need each chunk's source aligned: the rows, and (a
  // periodic input) the period a multiple of the chunk, so that a chunk
  // never wraps.
  Value fast = rowsAligned(b, input, 16);
  if (periodic)
    fast = arith::AndIOp::create(
        b, fast,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq,
            arith::RemUIOp::create(
                b, periods[k], arith::ConstantIntOp::create(b, i32, chunk)),
            arith::ConstantIntOp::create(b, i32, 0)));
  Value lastRow = arith::SubIOp::create(b, frame.sizeM, index(b, 1));
  // Chunk `first` + lane: its row and column in the buffer, and the
  // element of its column `col` + e to read.
  struct Chunk {
    Value index, at, col, row;
  };
  auto chunkAt = [&](ImplicitLocOpBuilder &cb, int64_t first) {
    Chunk ch;
    ch.index = arith::AddIOp::create(cb, frame.lane, index(cb, first));
    // Past the last chunk (a partial last pass): read the last one again.
    Value clamped =
        first + 32 <= chunks
            ? ch.index
            : arith::MinUIOp::create(cb, ch.index, index(cb, chunks - 1))
                  .getResult();
    Value r = arith::DivUIOp::create(cb, clamped, index(cb, chunksPerRow));
    Value c = arith::RemUIOp::create(cb, clamped, index(cb, chunksPerRow));
    ch.col = arith::AddIOp::create(
        cb, frame.blockN, arith::MulIOp::create(cb, c, index(cb, chunk)));
    ch.at = arith::AddIOp::create(
        cb, arith::MulIOp::create(cb, r, index(cb, stride)),
        arith::MulIOp::create(cb, c, index(cb, chunk)));
    if (periodic)
      ch.row = arith::MinUIOp::create(
          cb, arith::AddIOp::create(cb, firstRow, r), lastRow);
    return ch;
  };
  auto source = [&](ImplicitLocOpBuilder &sb, const Chunk &ch,
                    Value e) -> SmallVector<Value> {
    Value column = arith::AddIOp::create(sb, ch.col, e);
    if (!periodic)
      return {column};
    Value wrapped = arith::RemUIOp::create(
        sb, arith::IndexCastUIOp::create(sb, i32, column), periods[k]);
    return {ch.row,
            arith::IndexCastUIOp::create(sb, sb.getIndexType(), wrapped)};
  };
  auto exists = [&](ImplicitLocOpBuilder &cb, const Chunk &ch,
                    int64_t first) -> Value {
    if (first + 32 <= chunks)
      return trueValue(cb);
    return arith::CmpIOp::create(cb, arith::CmpIPredicate::ult, ch.index,
                                 index(cb, chunks));
  };
  // Every chunk whole: a column input's tile inside N (a periodic input's
  // columns all exist).
  Value whole =
      periodic ? fast
               : arith::AndIOp::create(
                     b, fast,
                     arith::CmpIOp::create(
                         b, arith::CmpIPredicate::ule,
                         arith::AddIOp::create(b, frame.blockN,
                                               index(b, config.tileN)),
                         frame.sizeN));
  // The warp's lanes are done reading what the buffer held.
  NVVM::SyncWarpOp::create(b, allLanes);
  scf::IfOp::create(
      b, whole,
      [&](OpBuilder &ob, Location loc) {
        // 16-byte copies, kStagingLoadsInFlight chunks' loads issued before
        // their stores: one branch for the whole copy, so that the loads'
        // latencies overlap instead of adding up chunk after chunk.
        ImplicitLocOpBuilder tb(loc, ob);
        auto chunkType = VectorType::get({chunk}, type.getElementType());
        for (int64_t batch = 0; batch < chunks;
             batch += 32 * kStagingLoadsInFlight) {
          SmallVector<std::pair<int64_t, Chunk>> batchChunks;
          SmallVector<Value> loaded;
          for (int64_t first = batch;
               first < std::min(chunks, batch + 32 * kStagingLoadsInFlight);
               first += 32) {
            Chunk ch = chunkAt(tb, first);
            loaded.push_back(vector::LoadOp::create(
                tb, chunkType, inputs[k], source(tb, ch, index(tb, 0)),
                /*nontemporal=*/false, llvm::MaybeAlign(16)));
            batchChunks.push_back({first, ch});
          }
          for (auto [entry, value] : llvm::zip_equal(batchChunks, loaded)) {
            auto [first, ch] = entry;
            auto store = [&, ch = ch, value = value](ImplicitLocOpBuilder &sb) {
              vector::StoreOp::create(sb, value, stage, ValueRange{ch.at},
                                      /*nontemporal=*/false,
                                      llvm::MaybeAlign(16));
            };
            if (first + 32 <= chunks) {
              store(tb);
              continue;
            }
            scf::IfOp::create(tb, exists(tb, ch, first),
                              [&](OpBuilder &sb, Location sloc) {
                                ImplicitLocOpBuilder stb(sloc, sb);
                                store(stb);
                                scf::YieldOp::create(stb);
                              });
          }
        }
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        // Element by element; a column input's elements beyond N are left
        // as they are (what the epilogue computes from them is masked).
        ImplicitLocOpBuilder tb(loc, ob);
        for (int64_t first = 0; first < chunks; first += 32) {
          Chunk ch = chunkAt(tb, first);
          Value n = periodic
                        ? index(tb, chunk)
                        : arith::MinUIOp::create(
                              tb, columnsLeft(tb, ch.col, frame.sizeN),
                              index(tb, chunk))
                              .getResult();
          scf::IfOp::create(
              tb, exists(tb, ch, first), [&](OpBuilder &cb, Location cloc) {
                ImplicitLocOpBuilder eb(cloc, cb);
                scf::ForOp::create(
                    eb, index(eb, 0), n, index(eb, 1), ValueRange{},
                    [&](OpBuilder &fb, Location floc, Value e, ValueRange) {
                      ImplicitLocOpBuilder lb(floc, fb);
                      memref::StoreOp::create(
                          lb,
                          memref::LoadOp::create(lb, inputs[k],
                                                 source(lb, ch, e)),
                          stage, ValueRange{arith::AddIOp::create(lb, ch.at, e)});
                      scf::YieldOp::create(lb);
                    });
                scf::YieldOp::create(eb);
              });
        }
        scf::YieldOp::create(tb);
      });
  NVVM::SyncWarpOp::create(b, allLanes);
}

SmallVector<Value>
EpilogueBuilder::readPeriodicRun(ImplicitLocOpBuilder &b, unsigned k,
                                 const Run &run, Value row) const {
  Value input = inputs[k];
  Type i32 = b.getI32Type();
  int64_t count = run.size();
  // Column c reads column c mod P, in bounds for every c.
  Value wrapped;
  std::optional<int64_t> period = staticPeriod(k);
  if (period) {
    wrapped = arith::AddIOp::create(
        b, arith::IndexCastUIOp::create(b, i32, twoQ),
        arith::ConstantIntOp::create(b, i32, periodicColumn(*period, run)));
  } else {
    Value column = arith::IndexCastUIOp::create(
        b, i32, cols[run.front().group][run.front().lane]);
    wrapped = arith::RemUIOp::create(b, column, periods[k]);
  }
  // Element by element: the run's next columns wrap by compare.
  auto scalarLoads = [&](ImplicitLocOpBuilder &sb) {
    SmallVector<Value> values;
    Value at = wrapped;
    Value one = arith::ConstantIntOp::create(sb, i32, 1);
    Value zero = arith::ConstantIntOp::create(sb, i32, 0);
    for (int64_t e = 0; e < count; ++e) {
      if (e > 0 && period) {
        // The run lies within (8j mod P) + 0..7 < P.
        at = arith::AddIOp::create(sb, at, one);
      } else if (e > 0) {
        Value next = arith::AddIOp::create(sb, at, one);
        at = arith::SelectOp::create(
            sb,
            arith::CmpIOp::create(sb, arith::CmpIPredicate::eq, next,
                                  periods[k]),
            zero, next);
      }
      values.push_back(memref::LoadOp::create(
          sb, input,
          ValueRange{row, arith::IndexCastUIOp::create(sb, sb.getIndexType(),
                                                       at)}));
    }
    return values;
  };
  std::optional<int64_t> alignment = vectorAlignment(input, count);
  // A tile at the edge reads a static period's columns one by one: no
  // branch per run (the interior tiles take the vector reads).
  if (!periodicVectors[k] || !alignment || (period && !interior))
    return scalarLoads(b);
  auto vectorType = VectorType::get(
      {count}, cast<MemRefType>(input.getType()).getElementType());
  auto vectorLoad = [&](ImplicitLocOpBuilder &vb) -> Value {
    return vector::LoadOp::create(
        vb, vectorType, input,
        ValueRange{row,
                   arith::IndexCastUIOp::create(vb, vb.getIndexType(), wrapped)},
        /*nontemporal=*/false, llvm::MaybeAlign(*alignment));
  };
  // Interior: the interior condition checked the period and the alignment,
  // and each run starts at a multiple of its length. Else one access where
  // the period is a multiple of the widest run and c mod P one of this
  // run's length, so that the run neither wraps nor straddles its
  // alignment.
  Value fast;
  if (!interior)
    fast = arith::AndIOp::create(
        b, periodicVectors[k],
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq,
            arith::RemUIOp::create(b, wrapped,
                                   arith::ConstantIntOp::create(b, i32, count)),
            arith::ConstantIntOp::create(b, i32, 0)));
  return readRun(b, vectorType, fast, vectorLoad, scalarLoads);
}

SmallVector<Value>
EpilogueBuilder::readInputRun(ImplicitLocOpBuilder &b, unsigned k,
                              const Run &run) const {
  Value input = inputs[k];
  Type element = cast<MemRefType>(input.getType()).getElementType();
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  auto [j, e] = fragmentPos[run.front().group][run.front().lane];
  Value at = arith::AddIOp::create(b, twoQ, index(b, 8 * j + e));
  if (GemmOp(op).getInputForm(k) == AccessForm::periodic)
    at = arith::AddIOp::create(
        b, at,
        arith::MulIOp::create(
            b, arith::DivUIOp::create(b, frame.lane, index(b, 4)),
            index(b, GemmKernelConfig::stagingRowStride(config.tileN))));
  int64_t count = run.size();
  if (count == 1)
    return {memref::LoadOp::create(b, inputRowBuffers[k], ValueRange{at})};
  Value loaded = vector::LoadOp::create(
      b, VectorType::get({count}, element), inputRowBuffers[k],
      ValueRange{at}, /*nontemporal=*/false, llvm::MaybeAlign(bytes * count));
  SmallVector<Value> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(
        vector::ExtractOp::create(b, loaded, ArrayRef<int64_t>{i}));
  return values;
}

EpilogueBuilder::Row EpilogueBuilder::beginRow(ImplicitLocOpBuilder &lb,
                                               Value localRow,
                                               int64_t fragmentRow) const {
  Row r;
  r.fragmentRow = fragmentRow;
  r.one = index(lb, 1);
  Value lastRow = arith::SubIOp::create(lb, frame.sizeM, r.one);
  r.lastCol = arith::SubIOp::create(lb, frame.sizeN, r.one);
  r.row = arith::AddIOp::create(lb, frame.blockM, localRow);
  r.inRow = interior ? trueValue(lb)
                     : arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                             r.row, frame.sizeM)
                           .getResult();
  // Fragments: the row's room, the output columns from the lane's first
  // (2q) on, 0 beyond M. Slot (j, e) is in bounds when 8j + e < room: one
  // compare against a per-row value, so that no column-wise predicate or
  // index stays live from one row to the next (the accumulators fill the
  // registers).
  if (plan.fragments && !interior)
    r.room = arith::SelectOp::create(
        lb, r.inRow,
        arith::SubIOp::create(
            lb, arith::SubIOp::create(lb, frame.sizeN, frame.blockN), twoQ),
        index(lb, 0));
  r.rowClamped =
      interior ? r.row
               : arith::MinUIOp::create(lb, r.row, lastRow).getResult();
  r.mappings.resize(groups.size() * lanesPerGroup);
  return r;
}

Value EpilogueBuilder::slotInBounds(ImplicitLocOpBuilder &lb, const Row &r,
                                    Slot s) const {
  if (interior)
    return trueValue(lb);
  if (plan.fragments)
    return arith::CmpIOp::create(lb, arith::CmpIPredicate::slt,
                                 index(lb, slotOffset(s)), r.room);
  return arith::AndIOp::create(lb, r.inRow, inCols[s.group][s.lane]);
}

Value EpilogueBuilder::runInBounds(ImplicitLocOpBuilder &lb, const Row &r,
                                   const Run &run) const {
  if (interior)
    return trueValue(lb);
  if (plan.fragments)
    return roomBounds(lb, r.room, slotOffset(run.front()), run.size()).whole;
  Value end = arith::AddIOp::create(
      lb, cols[run.front().group][run.front().lane], index(lb, run.size()));
  return arith::CmpIOp::create(lb, arith::CmpIPredicate::ule, end,
                               frame.sizeN);
}

void EpilogueBuilder::mapAccumulators(ImplicitLocOpBuilder &lb, Row &r,
                                      function_ref<Value(Slot)> accumulator) {
  // An edge tile's accumulators through opaque moves, where the plan says
  // (EpiloguePlan::opaqueEdgeAccumulators).
  for (int64_t g = 0, e = groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      Value acc = accumulator({g, l});
      if (!interior && plan.opaqueEdgeAccumulators && acc.getType().isF32())
        acc = LLVM::InlineAsmOp::create(
                  lb, acc.getType(), ValueRange{acc}, "mov.b32 $0, $1;",
                  "=f,f", /*has_side_effects=*/false,
                  /*is_align_stack=*/false,
                  LLVM::tailcallkind::TailCallKind::None,
                  LLVM::AsmDialectAttr(), ArrayAttr())
                  .getResult(0);
      mapping(r, {g, l}).map(op.getAccumulatorArg(), acc);
    }
}

void EpilogueBuilder::readRowInputs(ImplicitLocOpBuilder &lb, Row &r) {
  // Inputs the whole row shares, read once: staged tile inputs (through the
  // buffer, before any output is staged in it), row and scalar values.
  r.stagedValues.resize(inputs.size());
  r.shared.resize(inputs.size());
  // The pipelined inputs' copies of this row have landed (those of the
  // next row may still be in flight), the other lanes' too.
  constexpr int64_t slots = GemmKernelConfig::kPipelineSlots;
  if (!plan.pipelined.empty()) {
    NVVM::CpAsyncWaitGroupOp::create(
        lb, lb.getI32IntegerAttr(r.fragmentRow + 1 < fragmentRows() ? 1 : 0));
    NVVM::SyncWarpOp::create(
        lb, arith::ConstantIntOp::create(lb, lb.getI32Type(), -1));
  }
  for (auto [k, input] : llvm::enumerate(inputs)) {
    AccessForm form = op.getInputForm(k);
    if (std::optional<unsigned> position = plan.inputs[k].pipelineSlot) {
      r.stagedValues[k] =
          readStage(lb, pipelineSlot(lb, *position, r.fragmentRow % slots),
                    opaqueIndex(lb, frame.lane));
    } else if (ArrayRef<Value> prefetched = prefetchedValues(k);
               stagedInput(k) && !prefetched.empty()) {
      // The row's runs as they were prefetched (each run is the lane's
      // two columns of one 8-column group).
      int64_t perRow = config.tileN / 8;
      prefetched = prefetched.slice(r.fragmentRow * perRow, perRow);
      for (const Run &run : runs)
        r.stagedValues[k].push_back(fragmentValues(lb, prefetched, run));
    } else if (stagedInput(k)) {
      r.stagedValues[k] = loadStaged(lb, input, r.row);
    } else if (form == AccessForm::row) {
      r.shared[k] = memref::LoadOp::create(lb, input, ValueRange{r.rowClamped});
    } else if (form == AccessForm::scalar) {
      r.shared[k] = input;
    }
  }
  // The slots just read take the row kPipelineSlots on.
  if (!plan.pipelined.empty() && r.fragmentRow + slots < fragmentRows())
    issuePipelinedRow(lb, r.fragmentRow + slots);
  // Pair inputs: the last pair, and the tile's first pair. With fragments,
  // the lane's first pair through an opaque move, so that each group's pair
  // is that plus a constant computed where used (held through the K loop,
  // the groups' pairs took a register each).
  for (unsigned k = 0; k < inputs.size(); ++k)
    if (op.getInputForm(k) == AccessForm::pair && !r.lastPair) {
      r.lastPair = arith::SubIOp::create(
          lb, arith::DivUIOp::create(lb, frame.sizeN, index(lb, 2)), r.one);
      r.firstPair = arith::DivUIOp::create(lb, frame.blockN, index(lb, 2));
      if (plan.fragments)
        r.firstPair = opaqueIndex(
            lb, arith::AddIOp::create(lb, r.firstPair, pairNumber(0).second));
    }
  // The warp's rows of the periodic inputs it stages, for this row.
  for (unsigned k = 0; k < inputs.size(); ++k)
    if (inputRowBuffers[k] && op.getInputForm(k) == AccessForm::periodic)
      stageInputRows(
          lb, k,
          arith::SubIOp::create(
              lb, r.row,
              arith::DivUIOp::create(lb, frame.lane, index(lb, 4))));
}

void EpilogueBuilder::beginGroupRuns(ImplicitLocOpBuilder &lb, Row &r) {
  // The runs of each group run (a run's slots lie in one group run).
  r.runsOfGroupRun.resize(groupRuns.size());
  for (auto [runIndex, run] : llvm::enumerate(runs))
    for (auto [gr, groupRun] : llvm::enumerate(groupRuns))
      if (llvm::is_contained(groupRun, run.front().group))
        r.runsOfGroupRun[gr].push_back(runIndex);
  ValueRange yielded = op.getYieldOp().getValues();
  for (unsigned i = 0; i < yielded.size(); ++i)
    if (eagerPartials(i))
      r.runningPartials[i].assign(partialBlocks.size(),
                                  identity(lb, getPartialKind(yielded[i])));
}

void EpilogueBuilder::mapStagedInput(Row &r, unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr])
    for (auto [slot, value] :
         llvm::zip_equal(runs[runIndex], r.stagedValues[k][runIndex]))
      mapping(r, slot).map(arg, value);
}

void EpilogueBuilder::mapRowBufferInput(ImplicitLocOpBuilder &lb, Row &r,
                                        unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr])
    for (auto [slot, value] :
         llvm::zip_equal(runs[runIndex], readInputRun(lb, k, runs[runIndex])))
      mapping(r, slot).map(arg, value);
}

void EpilogueBuilder::mapTileOrColumnInput(ImplicitLocOpBuilder &lb, Row &r,
                                           unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  AccessForm form = op.getInputForm(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr]) {
    const Run &run = runs[runIndex];
    // A column input's runs of the groups it prefetched.
    if (ArrayRef<Value> prefetched = prefetchedValues(k);
        form == AccessForm::col && !prefetched.empty() &&
        groupOf8(run) < int64_t(prefetched.size())) {
      for (auto [slot, value] :
           llvm::zip_equal(run, fragmentValues(lb, prefetched, run)))
        mapping(r, slot).map(arg, value);
      continue;
    }
    Slot head = run.front();
    SmallVector<Value> at;
    if (form == AccessForm::tile)
      at.push_back(r.rowClamped);
    at.push_back(cols[head.group][head.lane]);
    // A column input's runs in a checked copy of the fragment layout
    // without pairs, element by element: a branch per run between a
    // vector and element loads keeps more values live than the registers
    // hold, and ptxas spills.
    SmallVector<Value> values = loadRun(
        lb, inputs[k], at, run.size(), runInBounds(lb, r, run), r.lastCol,
        /*vectors=*/interior || !plan.fragments || pairStride ||
            form != AccessForm::col);
    for (auto [slot, value] : llvm::zip_equal(run, values))
      mapping(r, slot).map(arg, value);
  }
}

void EpilogueBuilder::mapPairInput(ImplicitLocOpBuilder &lb, Row &r,
                                   unsigned k, unsigned gr) {
  // Both lanes of a group read their pair's element: pair j of the tile is
  // column blockN / 2 + j (clamped like the rows).
  for (int64_t g : groupRuns[gr]) {
    Value pairCol = arith::MinUIOp::create(
        lb,
        arith::AddIOp::create(lb, r.firstPair,
                              plan.fragments ? index(lb, pairNumber(g).first)
                                             : groups[g]),
        r.lastPair);
    Value value = memref::LoadOp::create(lb, inputs[k],
                                         ValueRange{r.rowClamped, pairCol});
    for (int64_t l = 0; l < lanesPerGroup; ++l)
      mapping(r, {g, l}).map(op.getInputArg(k), value);
  }
}

void EpilogueBuilder::mapPeriodicInput(ImplicitLocOpBuilder &lb, Row &r,
                                       unsigned k, unsigned gr) {
  for (unsigned runIndex : r.runsOfGroupRun[gr]) {
    const Run &run = runs[runIndex];
    SmallVector<Value> values;
    if (std::optional<int64_t> period = staticPeriod(k)) {
      // Runs whose columns are congruent mod P read once per row.
      SmallVector<Value> &read =
          r.periodicReads[{k, periodicColumn(*period, run),
                           int64_t(run.size())}];
      if (read.empty())
        read = readPeriodicRun(lb, k, run, r.rowClamped);
      values = read;
    } else {
      values = readPeriodicRun(lb, k, run, r.rowClamped);
    }
    for (auto [slot, value] : llvm::zip_equal(run, values))
      mapping(r, slot).map(op.getInputArg(k), value);
  }
}

void EpilogueBuilder::mapGroupRunInputs(ImplicitLocOpBuilder &lb, Row &r,
                                        unsigned gr) {
  for (unsigned k = 0, e = inputs.size(); k < e; ++k) {
    if (stagedInput(k)) {
      mapStagedInput(r, k, gr);
      continue;
    }
    if (inputRowBuffers[k]) {
      mapRowBufferInput(lb, r, k, gr);
      continue;
    }
    switch (op.getInputForm(k)) {
    case AccessForm::tile:
    case AccessForm::col:
      mapTileOrColumnInput(lb, r, k, gr);
      break;
    case AccessForm::pair:
      mapPairInput(lb, r, k, gr);
      break;
    case AccessForm::periodic:
      mapPeriodicInput(lb, r, k, gr);
      break;
    case AccessForm::row:
    case AccessForm::scalar:
      for (int64_t g : groupRuns[gr])
        for (int64_t l = 0; l < lanesPerGroup; ++l)
          mapping(r, {g, l}).map(op.getInputArg(k), r.shared[k]);
      break;
    }
  }
}

Value EpilogueBuilder::partialTerm(ImplicitLocOpBuilder &lb, Row &r, Slot s,
                                   Value value, ReductionKind kind) {
  return arith::SelectOp::create(lb, slotInBounds(lb, r, s),
                                 toF32(lb, mapping(r, s).lookup(value)),
                                 identity(lb, kind));
}

void EpilogueBuilder::storeInterleaved(ImplicitLocOpBuilder &lb, Row &r,
                                       unsigned i,
                                       ArrayRef<unsigned> runIndices) {
  auto interleave =
      op.getYieldOp().getValues()[i].getDefiningOp<InterleaveOp>();
  Value two = index(lb, 2);
  Value limit = arith::MulIOp::create(lb, frame.sizeN, two);
  for (unsigned runIndex : runIndices) {
    const Run &run = runs[runIndex];
    Slot head = run.front();
    SmallVector<Value> values;
    for (Slot slot : run) {
      values.push_back(mapping(r, slot).lookup(interleave.getEven()));
      values.push_back(mapping(r, slot).lookup(interleave.getOdd()));
    }
    // A run of columns [c, c + r) fills [2c, 2c + 2r): even, odd per
    // column.
    Value col = arith::MulIOp::create(lb, cols[head.group][head.lane], two);
    storeRun(lb, outputs[i], {r.row, col}, values,
             plan.fragments
                 ? roomBounds(lb, r.room, slotOffset(head), values.size(),
                              /*perColumn=*/2)
                 : limitBounds(lb, r.inRow, col, values.size(), limit));
  }
}

void EpilogueBuilder::consumeGroupRun(ImplicitLocOpBuilder &lb, Row &r,
                                      unsigned gr) {
  ValueRange yielded = op.getYieldOp().getValues();
  // Staged outputs' runs narrowed to 16 bits as soon as they are computed.
  for (auto [i, value] : llvm::enumerate(yielded)) {
    if (roles[i] != OutputRole::tile || !staged(i))
      continue;
    for (unsigned runIndex : r.runsOfGroupRun[gr]) {
      SmallVector<Value> values;
      for (Slot slot : runs[runIndex])
        values.push_back(mapping(r, slot).lookup(value));
      r.narrowed[{unsigned(i), runIndex}] = narrowPairs(lb, values);
    }
  }
  // Interleaved outputs are stored, and eager row partials combined
  // (OutputPlan::eager), as each group run is evaluated; combined in the
  // blocks' slot order where group runs follow the groups, as they do but
  // for periodic inputs.
  for (auto [i, value] : llvm::enumerate(yielded)) {
    if (roles[i] == OutputRole::interleaved)
      storeInterleaved(lb, r, i, r.runsOfGroupRun[gr]);
    if (!eagerPartials(i))
      continue;
    ReductionKind kind = getPartialKind(value);
    for (auto [p, block] : llvm::enumerate(partialBlocks))
      for (Slot s : block.slots) {
        if (llvm::is_contained(groupRuns[gr], s.group))
          r.runningPartials[i][p] = buildReductionCombine(
              lb, lb.getLoc(), kind, r.runningPartials[i][p],
              partialTerm(lb, r, s, value, kind));
      }
  }
}

void EpilogueBuilder::storeTileOutput(ImplicitLocOpBuilder &lb, Row &r,
                                      unsigned i) {
  Value value = op.getYieldOp().getValues()[i];
  if (tmaStored(i)) {
    // Each run is the lane's two columns 8j + 2q, 8j + 2q + 1 of a chunk
    // j: one 32-bit register of stmatrix.
    SmallVector<Value> packed(config.tileN / 8);
    for (auto [runIndex, run] : llvm::enumerate(runs)) {
      auto [j, e] = fragmentPos[run.front().group][run.front().lane];
      SmallVector<Value> values =
          r.narrowed.lookup({i, unsigned(runIndex)});
      Value pair = vector::FromElementsOp::create(
          lb, VectorType::get({2}, values.front().getType()), values);
      packed[j] = LLVM::BitcastOp::create(lb, lb.getI32Type(), pair);
    }
    storeStagedWithTma(lb, i, r.row, packed);
    return;
  }
  if (staged(i)) {
    // A run's columns: 8j + e + 2q on, from the head's fragment position.
    SmallVector<StagedRun> stagedRuns;
    for (auto [runIndex, run] : llvm::enumerate(runs)) {
      auto [j, e] = fragmentPos[run.front().group][run.front().lane];
      stagedRuns.push_back(
          {8 * j + e, twoQ, r.narrowed.lookup({i, unsigned(runIndex)})});
    }
    storeStaged(lb, outputs[i], r.row, config.tileN, frame.blockN,
                frame.sizeN, stagedRuns);
    return;
  }
  for (const Run &run : runs) {
    Slot head = run.front();
    SmallVector<Value> values;
    for (Slot slot : run)
      values.push_back(mapping(r, slot).lookup(value));
    Value col = cols[head.group][head.lane];
    storeRun(lb, outputs[i], {r.row, col}, values,
             plan.fragments
                 ? roomBounds(lb, r.room, slotOffset(head), run.size())
                 : limitBounds(lb, r.inRow, col, run.size(), frame.sizeN));
  }
}

void EpilogueBuilder::storePairOutput(ImplicitLocOpBuilder &lb, Row &r,
                                      unsigned i) {
  Value value = op.getYieldOp().getValues()[i];
  // Pair j of block k lands in column k s + j: the tile's pairs start at
  // blockN / 2.
  Value tilePairs = arith::DivUIOp::create(lb, frame.blockN, index(lb, 2));
  Value pairLimit = arith::DivUIOp::create(lb, frame.sizeN, index(lb, 2));
  if (staged(i)) {
    // A group run's pairs: pairStatic + the lane's part of the number.
    SmallVector<StagedRun> stagedRuns;
    for (ArrayRef<int64_t> groupRun : groupRuns) {
      SmallVector<Value> values;
      for (int64_t g : groupRun)
        values.push_back(mapping(r, {g, 0}).lookup(value));
      auto [first, laneOffset] = pairNumber(groupRun.front());
      stagedRuns.push_back({first, laneOffset, values});
    }
    storeStaged(lb, outputs[i], r.row, config.tileN / 2, tilePairs,
                pairLimit, stagedRuns);
    return;
  }
  for (ArrayRef<int64_t> groupRun : groupRuns) {
    SmallVector<Value> values;
    for (int64_t g : groupRun)
      values.push_back(mapping(r, {g, 0}).lookup(value));
    Value pairCol =
        arith::AddIOp::create(lb, tilePairs, groups[groupRun.front()]);
    storeRun(lb, outputs[i], {r.row, pairCol}, values,
             limitBounds(lb, r.inRow, pairCol, values.size(), pairLimit));
  }
}

void EpilogueBuilder::storeRowPartials(ImplicitLocOpBuilder &lb, Row &r,
                                       unsigned i) {
  // Each block's slots in this thread, then the lanes that share it by
  // butterfly shuffles in a fixed order.
  Value value = op.getYieldOp().getValues()[i];
  ReductionKind kind = getPartialKind(value);
  int64_t partialsPerTile = config.tileN / config.rowPartialTile;
  for (auto [p, block] : llvm::enumerate(partialBlocks)) {
    Value acc;
    if (eagerPartials(i)) {
      acc = r.runningPartials[i][p];
    } else {
      SmallVector<Value> masked;
      for (Slot s : block.slots)
        masked.push_back(partialTerm(lb, r, s, value, kind));
      acc = kind == ReductionKind::logsumexp ? logSumExp(lb, masked)
                                             : identity(lb, kind);
      if (kind != ReductionKind::logsumexp)
        for (Value v : masked)
          acc = buildReductionCombine(lb, lb.getLoc(), kind, acc, v);
    }
    acc = shuffleCombine(lb, kind, acc, partialOffsets);
    Value partial = arith::AddIOp::create(
        lb, arith::MulIOp::create(lb, frame.tileCol, index(lb, partialsPerTile)),
        block.indexInTile);
    // The partial's first lane writes it, unless the whole block of
    // columns lies beyond N.
    Value blockStart =
        arith::MulIOp::create(lb, partial, index(lb, config.rowPartialTile));
    Value exists = arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                         blockStart, frame.sizeN);
    storeIf(lb,
            arith::AndIOp::create(
                lb, arith::AndIOp::create(lb, partialLeader, r.inRow), exists),
            fromF32(lb, acc, partialElementType(i)), outputs[i],
            {r.row, partial});
  }
}

void EpilogueBuilder::accumulateColumnPartials(ImplicitLocOpBuilder &lb,
                                               Row &r, unsigned i,
                                               MutableArrayRef<Value> running) {
  Value value = op.getYieldOp().getValues()[i];
  ReductionKind kind = getPartialKind(value);
  for (int64_t g = 0, e = groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      Value masked = arith::SelectOp::create(
          lb, slotInBounds(lb, r, {g, l}),
          toF32(lb, mapping(r, {g, l}).lookup(value)), identity(lb, kind));
      Value &slot = running[g * lanesPerGroup + l];
      slot = buildReductionCombine(lb, lb.getLoc(), kind, slot, masked);
    }
}

void EpilogueBuilder::storeRowSelect(ImplicitLocOpBuilder &lb, Row &r,
                                     unsigned i) {
  // Fragments: the target's offset from the lane's first column (2q), one
  // subtraction per row, against each slot's constant offset, so that no
  // column index stays live across the epilogue's rows.
  Value value = op.getYieldOp().getValues()[i];
  auto select = cast<RowSelectOp>(value.getDefiningOp());
  Value laneFirstCol;
  if (plan.fragments)
    laneFirstCol = arith::AddIOp::create(lb, frame.blockN, twoQ);
  for (int64_t g = 0, e = groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      IRMapping &slotMapping = mapping(r, {g, l});
      Value target = slotMapping.lookup(select.getColumn());
      if (!target.getType().isIndex())
        target = arith::IndexCastOp::create(lb, lb.getIndexType(), target);
      Value matches =
          plan.fragments
              ? arith::CmpIOp::create(
                    lb, arith::CmpIPredicate::eq,
                    arith::SubIOp::create(lb, target, laneFirstCol),
                    index(lb, slotOffset({g, l})))
              : arith::CmpIOp::create(lb, arith::CmpIPredicate::eq, target,
                                      cols[g][l]);
      Value hit = arith::AndIOp::create(lb, slotInBounds(lb, r, {g, l}),
                                        matches);
      storeIf(lb, hit, slotMapping.lookup(value), outputs[i], {r.row});
    }
}

void EpilogueBuilder::storeRowOutputs(ImplicitLocOpBuilder &lb, Row &r,
                                      MutableArrayRef<Value> nextCol) {
  int64_t slotsPerThread = groups.size() * lanesPerGroup;
  unsigned colSlot = 0;
  for (unsigned i = 0, e = roles.size(); i < e; ++i) {
    switch (roles[i]) {
    case OutputRole::tile:
      storeTileOutput(lb, r, i);
      break;
    case OutputRole::interleaved:
      // Stored group run by group run (consumeGroupRun).
      break;
    case OutputRole::pair:
      storePairOutput(lb, r, i);
      break;
    case OutputRole::rowPartials:
      storeRowPartials(lb, r, i);
      break;
    case OutputRole::colPartials:
      accumulateColumnPartials(lb, r, i,
                               nextCol.slice(colSlot, slotsPerThread));
      colSlot += slotsPerThread;
      break;
    case OutputRole::rowSelect:
      storeRowSelect(lb, r, i);
      break;
    }
  }
}

SmallVector<Value> EpilogueBuilder::emitRow(
    ImplicitLocOpBuilder &lb, Value localRow, int64_t fragmentRow,
    function_ref<Value(Slot)> accumulator, ValueRange colAccs) {
  Row r = beginRow(lb, localRow, fragmentRow);
  SmallVector<Value> nextCol(colAccs);
  mapAccumulators(lb, r, accumulator);
  readRowInputs(lb, r);
  beginGroupRuns(lb, r);
  // Group run by group run: its inputs read, the region evaluated and its
  // 16-bit outputs narrowed, so that only one group run's inputs and f32
  // results are live beside the accumulators.
  for (auto [gr, groupRun] : llvm::enumerate(groupRuns)) {
    mapGroupRunInputs(lb, r, gr);
    for (int64_t g : groupRun) {
      MutableArrayRef<IRMapping> lanes(&r.mappings[g * lanesPerGroup],
                                       lanesPerGroup);
      evaluateEpilogueBody(lb, op, r.row, cols[g], lanes);
    }
    consumeGroupRun(lb, r, gr);
  }
  storeRowOutputs(lb, r, nextCol);
  return nextCol;
}

void EpilogueBuilder::finishColumnPartials(ImplicitLocOpBuilder &b,
                                           ValueRange colAccs) {
  // Each thread's running values go to shared memory beside the ring or
  // the accumulator tile, one row per (pass row | warp); then one thread per
  // column combines the rows in order and writes this tile's partial.
  bool fragments = !frame.accFragments.empty();
  int64_t scratchRows = fragments ? config.epilogueThreads / 32
                                  : config.epilogueRowsPerPass();
  MLIRContext *ctx = b.getContext();
  auto scratchType = MemRefType::get(
      {scratchRows, config.tileN}, b.getF32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  YieldOp yield = op.getYieldOp();
  ValueRange yielded = yield.getValues();
  int64_t slotsPerThread = groups.size() * lanesPerGroup;
  Value writer, scratchRow;
  if (fragments) {
    // The 8 lanes of a column (l / 4) first combine by shuffles; lanes 0-3
    // write the warp's row.
    writer = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, frame.lane,
                                   index(b, 4));
    scratchRow = frame.warp;
  } else {
    scratchRow = arith::DivUIOp::create(
        b, frame.tid, index(b, config.tileN / kColumnsPerThread));
  }
  // The previous tile's finish is done reading the scratch.
  frame.syncEpilogue(b);
  unsigned colSlot = 0, scratchIndex = 0;
  SmallVector<std::pair<unsigned, Value>> scratches;
  for (auto [i, value] : llvm::enumerate(yielded)) {
    if (roles[i] != OutputRole::colPartials)
      continue;
    int64_t offset = config.columnScratchOffset() +
                     scratchIndex++ * scratchRows * config.tileN * 4;
    Value scratch = memref::ViewOp::create(
        b, scratchType, frame.shared,
        arith::AddIOp::create(b, frame.sharedBase, index(b, offset)),
        ValueRange{});
    ReductionKind kind = getPartialKind(value);
    SmallVector<Value> values;
    for (int64_t s = 0; s < slotsPerThread; ++s) {
      Value v = colAccs[colSlot + s];
      if (fragments)
        v = shuffleCombine(b, kind, v, {4, 8, 16});
      values.push_back(v);
    }
    auto store = [&](ImplicitLocOpBuilder &sb) {
      for (int64_t g = 0; g < int64_t(groups.size()); ++g)
        for (int64_t l = 0; l < lanesPerGroup; ++l)
          memref::StoreOp::create(sb, values[g * lanesPerGroup + l], scratch,
                                  ValueRange{scratchRow, localCols[g][l]});
    };
    if (writer) {
      scf::IfOp::create(b, writer, [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder sb(loc, ob);
        store(sb);
        scf::YieldOp::create(sb);
      });
    } else {
      store(b);
    }
    colSlot += slotsPerThread;
    scratches.push_back({unsigned(i), scratch});
  }
  frame.syncEpilogue(b);
  for (auto [output, scratchBuffer] : scratches) {
    unsigned i = output;
    Value scratch = scratchBuffer;
    Value value = yielded[i];
    ReductionKind kind = getPartialKind(value);
    Type elementType = partialElementType(i);
    Value out = outputs[i];
    scf::ForOp::create(
        b, frame.tid, index(b, config.tileN), index(b, config.epilogueThreads),
        ValueRange{},
        [&](OpBuilder &ob, Location loc, Value localCol, ValueRange) {
          ImplicitLocOpBuilder lb(loc, ob);
          Value total = identity(lb, kind);
          for (int64_t r = 0; r < scratchRows; ++r)
            total = buildReductionCombine(
                lb, loc, kind, total,
                memref::LoadOp::create(lb, scratch,
                                       ValueRange{index(lb, r), localCol}));
          Value col = arith::AddIOp::create(lb, frame.blockN, localCol);
          Value inCol = arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                              col, frame.sizeN);
          storeIf(lb, inCol, fromF32(lb, total, elementType), out,
                  {frame.tileRow, col});
          scf::YieldOp::create(lb);
        });
  }
}

void EpilogueBuilder::build(ImplicitLocOpBuilder &b) {
  bool fragments = plan.fragments;
  assert(fragments == !frame.accFragments.empty() &&
         "the plan's layout is the schedule's");
  if (fragments)
    layOutFragments(b);
  else
    layOutSharedTile(b);
  layOutInputRows(b);
  // Columns in the output, the same in every row, and (shared tile; the
  // fragments compare against each row's room) whether they lie in it.
  for (SmallVector<Value, 2> &group : localCols) {
    cols.emplace_back();
    inCols.emplace_back();
    for (Value local : group) {
      cols.back().push_back(arith::AddIOp::create(b, frame.blockN, local));
      if (!fragments)
        inCols.back().push_back(
            interior ? trueValue(b)
                     : arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                             cols.back().back(), frame.sizeN)
                           .getResult());
    }
  }

  // Running column partials: one per (col_reduce output, slot).
  YieldOp yield = op.getYieldOp();
  int64_t slotsPerThread = groups.size() * lanesPerGroup;
  SmallVector<Value> colInit;
  for (auto [i, role] : llvm::enumerate(roles))
    if (role == OutputRole::colPartials)
      for (int64_t s = 0; s < slotsPerThread; ++s)
        colInit.push_back(identity(b, getPartialKind(yield.getValues()[i])));

  SmallVector<Value> colAccs;
  if (fragments) {
    // The tile's columns of the column inputs it stages, once per tile.
    for (unsigned k = 0; k < inputs.size(); ++k)
      if (inputRowBuffers[k] && op.getInputForm(k) == AccessForm::col)
        stageInputRows(b, k, Value());
    // The pipelined inputs' first rows, before any row's math.
    if (config.pipelinedInputs) {
      assert(int64_t(plan.pipelined.size()) == config.pipelinedInputs &&
             "the configuration counts the inputs the epilogue pipelines");
      for (int64_t r = 0;
           r < std::min(GemmKernelConfig::kPipelineSlots, fragmentRows()); ++r)
        issuePipelinedRow(b, r);
    }
    // Rows 16 w + l / 4 + fragmentRowOffset(f, h); element (j, h, e) of a
    // fragment is its member 4j + 2h + e.
    Value quadRow = arith::AddIOp::create(
        b, warpFragmentRow(b),
        arith::DivUIOp::create(b, frame.lane, index(b, 4)));
    colAccs = colInit;
    for (auto [f, fragmentValue] : llvm::enumerate(frame.accFragments))
      for (int64_t h = 0; h < 2; ++h) {
        Value fragment = fragmentValue;
        Value localRow = arith::AddIOp::create(
            b, quadRow, index(b, fragmentRowOffset(f, h)));
        colAccs = emitRow(
            b, localRow, 2 * int64_t(f) + h,
            [&](Slot s) -> Value {
              auto [j, e] = fragmentPos[s.group][s.lane];
              return LLVM::ExtractValueOp::create(b, fragment,
                                                  j * 4 + h * 2 + e);
            },
            colAccs);
      }
  } else {
    int64_t threadsPerRow = config.tileN / kColumnsPerThread;
    int64_t rowsPerPass = config.epilogueRowsPerPass();
    int64_t passes = config.tileM / rowsPerPass;
    // Passes per iteration: the loop body is straight-line code (interior)
    // whose input loads ptxas can issue ahead of the previous rows' math,
    // so that a few rows' loads are in flight at once instead of one.
    int64_t unroll = std::min<int64_t>(kSharedTileRowsUnrolled, passes);
    while (passes % unroll)
      --unroll;
    Value threadRow =
        arith::DivUIOp::create(b, frame.tid, index(b, threadsPerRow));
    auto rowLoop = scf::ForOp::create(
        b, index(b, 0), index(b, passes), index(b, unroll), colInit,
        [&](OpBuilder &ob, Location loc, Value pass, ValueRange accs) {
          ImplicitLocOpBuilder lb(loc, ob);
          SmallVector<Value> running(accs);
          for (int64_t u = 0; u < unroll; ++u) {
            Value localRow = arith::AddIOp::create(
                lb, threadRow,
                arith::MulIOp::create(
                    lb, arith::AddIOp::create(lb, pass, index(lb, u)),
                    index(lb, rowsPerPass)));
            // The accumulator tile: in bounds and 16-byte aligned by
            // construction (rows of tileN + 4 floats, runs at multiples of
            // 4).
            DenseMap<std::pair<int64_t, int64_t>, Value> acc;
            for (const Run &run : runs) {
              Slot head = run.front();
              auto type =
                  VectorType::get({int64_t(run.size())}, lb.getF32Type());
              Value loaded = vector::LoadOp::create(
                  lb, type, frame.accTile,
                  ValueRange{localRow, localCols[head.group][head.lane]},
                  /*nontemporal=*/false,
                  llvm::MaybeAlign(std::min<int64_t>(run.size() * 4, 16)));
              for (auto [e, slot] : llvm::enumerate(run))
                acc[{slot.group, slot.lane}] = vector::ExtractOp::create(
                    lb, loaded, ArrayRef<int64_t>{int64_t(e)});
            }
            running = emitRow(
                lb, localRow, /*fragmentRow=*/-1,
                [&](Slot s) { return acc.lookup({s.group, s.lane}); },
                running);
          }
          scf::YieldOp::create(lb, running);
        });
    colAccs = rowLoop.getResults();
  }
  if (!colInit.empty())
    finishColumnPartials(b, colAccs);
}

EpiloguePrefetch EpilogueBuilder::prefetch(ImplicitLocOpBuilder &b,
                                           int64_t part, int64_t parts) const {
  EpiloguePrefetch result;
  result.interior = interiorCondition(b);
  SmallVector<InputPrefetch> prefetches;
  for (const InputPlan &input : plan.inputs)
    prefetches.push_back(input.prefetch);
  // This part's loads: [first, last) of all of them in order.
  int64_t total = 0;
  for (const InputPrefetch &input : prefetches)
    total += input.loads;
  int64_t first = total * part / parts, last = total * (part + 1) / parts;
  SmallVector<int64_t> taken(prefetches.size(), 0);
  SmallVector<Type> types;
  int64_t position = 0;
  for (auto [k, input] : llvm::enumerate(inputs)) {
    auto element = cast<MemRefType>(input.getType()).getElementType();
    for (int64_t i = 0; i < prefetches[k].loads; ++i, ++position) {
      if (position < first || position >= last)
        continue;
      ++taken[k];
      types.push_back(VectorType::get({prefetches[k].lanes}, element));
    }
  }
  // A part with no loads (fewer loads than parts).
  if (types.empty()) {
    result.values.resize(prefetches.size());
    return result;
  }
  auto ifOp = scf::IfOp::create(b, types, result.interior, /*withElse=*/true);
  {
    auto tb = ImplicitLocOpBuilder::atBlockBegin(b.getLoc(),
                                                 &ifOp.getThenRegion().front());
    SmallVector<Value> loaded;
    // Whether the next load is this part's (its address is built only
    // then).
    position = 0;
    auto takes = [&] {
      bool mine = position >= first && position < last;
      ++position;
      return mine;
    };
    auto load = [&](Value input, ValueRange indices) {
      auto type = cast<VectorType>(types[loaded.size()]);
      loaded.push_back(vector::LoadOp::create(
          tb, type, input, indices,
          /*nontemporal=*/false,
          llvm::MaybeAlign(type.getNumElements() *
                           type.getElementTypeBitWidth() / 8)));
    };
    // The lane's first row and column in the fragment layout (see
    // layOutFragments; build's rows are 16 w + l / 4 on).
    Value laneRow = arith::AddIOp::create(
        tb, arith::AddIOp::create(tb, frame.blockM, warpFragmentRow(tb)),
        arith::DivUIOp::create(tb, frame.lane, index(tb, 4)));
    Value laneCol = arith::AddIOp::create(
        tb, frame.blockN,
        arith::MulIOp::create(
            tb, arith::RemUIOp::create(tb, frame.lane, index(tb, 4)),
            index(tb, 2)));
    auto column = [&](int64_t j) -> Value {
      return arith::AddIOp::create(tb, laneCol, index(tb, 8 * j));
    };
    for (auto [k, input] : llvm::enumerate(inputs)) {
      const InputPrefetch &p = prefetches[k];
      if (p.kind == InputPrefetch::rowChunks) {
        // Pass i's chunk of the tile's columns, as stageInputRows copies it.
        for (int64_t i = 0; i < p.loads; ++i)
          if (takes())
            load(input, arith::AddIOp::create(tb, frame.blockN,
                                              columnChunkStart(tb, i, p.lanes))
                            .getResult());
        continue;
      }
      if (p.kind != InputPrefetch::fragments)
        continue;
      if (GemmOp(op).getInputForm(k) == AccessForm::col) {
        for (int64_t j = 0; j < p.loads; ++j)
          if (takes())
            load(input, column(j));
        continue;
      }
      // A tile input: fragment row by fragment row.
      int64_t perRow = config.tileN / 8;
      for (int64_t r = 0; r < p.loads / perRow; ++r) {
        Value row = arith::AddIOp::create(
            tb, laneRow, index(tb, fragmentRowOffset(r / 2, r % 2)));
        for (int64_t j = 0; j < perRow; ++j)
          if (takes())
            load(input, ValueRange{row, column(j)});
      }
    }
    scf::YieldOp::create(tb, loaded);
  }
  {
    auto eb = ImplicitLocOpBuilder::atBlockBegin(b.getLoc(),
                                                 &ifOp.getElseRegion().front());
    SmallVector<Value> zeros;
    for (Type type : types)
      zeros.push_back(
          arith::ConstantOp::create(eb, type, eb.getZeroAttr(type)));
    scf::YieldOp::create(eb, zeros);
  }
  // The results, input by input.
  ValueRange results = ifOp.getResults();
  for (int64_t count : taken) {
    result.values.emplace_back(results.take_front(count));
    results = results.drop_front(count);
  }
  return result;
}

ArrayRef<Value> EpilogueBuilder::prefetchedValues(unsigned k) const {
  if (!interior || frame.prefetched.values.empty())
    return {};
  return frame.prefetched.values[k];
}

Value EpilogueBuilder::interiorCondition(ImplicitLocOpBuilder &b) const {
  Value condition = arith::AndIOp::create(
      b, within(b, frame.blockM, config.tileM, frame.sizeM),
      within(b, frame.blockN, config.tileN, frame.sizeN));
  auto aligned = [&](Value memref) {
    condition =
        arith::AndIOp::create(b, condition, rowsAligned(b, memref, 16));
  };
  for (auto [k, input] : llvm::enumerate(inputs)) {
    AccessForm form = GemmOp(op).getInputForm(k);
    if ((form == AccessForm::tile || form == AccessForm::col) &&
        isa<MemRefType>(input.getType()))
      aligned(input);
    // Periodic inputs read with vector accesses: the period a multiple of
    // every run length (at most kEpilogueColumnsPerThread), so that no run
    // wraps.
    if (form == AccessForm::periodic &&
        vectorAlignment(input, kColumnsPerThread)) {
      aligned(input);
      condition = arith::AndIOp::create(
          b, condition,
          arith::CmpIOp::create(
              b, arith::CmpIPredicate::eq,
              arith::RemUIOp::create(b, memref::DimOp::create(b, input, 1),
                                     index(b, kColumnsPerThread)),
              index(b, 0)));
    }
  }
  for (auto [i, output] : llvm::enumerate(outputs)) {
    if (roles[i] == OutputRole::tile)
      aligned(output);
    // An interleaved output's runs: both values of a lane's two columns.
    // (This check costs SwiGLU's derivative under ping-pong 4 bytes of
    // spill, ptxas -v; checking each run's stores instead spilled 20 in the
    // FP8 adjoint: docs/performance.md.)
    if (roles[i] == OutputRole::interleaved)
      condition = arith::AndIOp::create(
          b, condition,
          rowsAligned(b, output,
                      4 * cast<MemRefType>(output.getType())
                              .getElementTypeBitWidth() / 8));
  }
  return condition;
}

} // namespace

void mlir::coda::gpu_lowering::emitEpilogue(ImplicitLocOpBuilder &b, GemmOp op,
                                            const GemmKernelConfig &config,
                                            const EpiloguePlan &plan,
                                            const KernelFrame &frame,
                                            ValueRange inputs,
                                            ValueRange outputs) {
  // A tile inside the output (all but the last row and column of tiles)
  // takes a copy without a bounds or alignment check per element, where it
  // pays: straight-line code (the register epilogue is unrolled over the
  // thread's whole share of the tile, the shared-tile one over a few rows)
  // in which the inputs' loads can be issued ahead.
  EpilogueBuilder checked(op, config, plan, frame, inputs, outputs);
  if (!plan.interiorCopy) {
    checked.build(b);
    return;
  }
  Value interior = frame.prefetched.interior ? frame.prefetched.interior
                                             : checked.interiorCondition(b);
  scf::IfOp::create(
      b, interior,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        EpilogueBuilder(op, config, plan, frame, inputs, outputs,
                        /*interior=*/true)
            .build(tb);
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        checked.build(eb);
        scf::YieldOp::create(eb);
      });
}

void mlir::coda::gpu_lowering::finishEpilogue(ImplicitLocOpBuilder &b,
                                              const GemmKernelConfig &config,
                                              const KernelFrame &frame) {
  if (!config.tmaStores)
    return;
  Value laneZero =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, frame.lane,
                            arith::ConstantIndexOp::create(b, 0));
  scf::IfOp::create(b, laneZero, [&](OpBuilder &ob, Location loc) {
    NVVM::CpAsyncBulkWaitGroupOp::create(ob, loc, /*group=*/0, UnitAttr());
    scf::YieldOp::create(ob, loc);
  });
}

EpiloguePrefetch mlir::coda::gpu_lowering::prefetchEpilogue(
    ImplicitLocOpBuilder &b, GemmOp op, const GemmKernelConfig &config,
    const EpiloguePlan &plan, const KernelFrame &frame, ValueRange inputs,
    ValueRange outputs, int64_t part, int64_t parts) {
  if (!plan.prefetches())
    return {};
  return EpilogueBuilder(op, config, plan, frame, inputs, outputs)
      .prefetch(b, part, parts);
}

EpiloguePrefetch
mlir::coda::gpu_lowering::mergePrefetches(ArrayRef<EpiloguePrefetch> parts) {
  EpiloguePrefetch merged;
  for (const EpiloguePrefetch &part : parts) {
    if (!part.interior)
      continue;
    if (!merged.interior)
      merged.interior = part.interior;
    merged.values.resize(std::max(merged.values.size(), part.values.size()));
    for (auto [k, values] : llvm::enumerate(part.values))
      llvm::append_range(merged.values[k], values);
  }
  return merged;
}
