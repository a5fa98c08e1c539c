//===- EpilogueLayout.h - which slots of a tile a thread owns ---*- C++ -*-===//
//
// The two thread layouts of a GEMM epilogue as values: which of the tile's
// elements (slots) a thread handles, in which groups, runs and group runs,
// and which lanes combine each row partial. The shared-tile layout gives a
// thread kEpilogueColumnsPerThread consecutive columns of a row; the
// fragment layout is WGMMA's accumulator registers: thread (warp w, lane l)
// holds rows 16w + l/4 (+8) of each 64-row fragment and columns
// 8j + 2(l mod 4) (+1) of every 8-column group j.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_EPILOGUELAYOUT_H
#define CODA_LIB_CONVERSION_CODATOGPU_EPILOGUELAYOUT_H

#include "EpiloguePlan.h"

namespace mlir::coda::gpu_lowering {

/// One element a thread handles: group `group` (of its groups) and `lane`
/// (0, or 1 for the second column of a pair).
struct Slot {
  int64_t group, lane;
};
/// Slots at consecutive columns, accessed together.
using Run = SmallVector<Slot>;
/// The slots that one row partial of a row combines in this thread, and
/// the partial's index among the tile's.
struct PartialBlock {
  SmallVector<Slot> slots;
  Value indexInTile;
};

/// A thread's share of the tile: its groups (each group's number is its
/// pair index in the tile, or its column without pairs), their columns in
/// the tile, runs of slots at consecutive columns, runs of groups with
/// consecutive numbers (pair outputs), the row partials' blocks with the
/// lane offsets that combine a partial and the lanes that write it.
struct SlotLayout {
  SmallVector<Value> groups;
  SmallVector<SmallVector<Value, 2>> localCols;
  SmallVector<Run> runs;
  SmallVector<SmallVector<int64_t>> groupRuns;
  SmallVector<PartialBlock> partialBlocks;
  SmallVector<int32_t> partialOffsets;
  Value partialLeader;
  /// Fragments: each slot's 8-column group j and column e within the lane's
  /// two; the lane's q = lane mod 4 and 2q.
  SmallVector<SmallVector<std::pair<int64_t, int64_t>, 2>> fragmentPos;
  Value laneQ, twoQ;
  /// The thread's lane among a row's (shared tile) or its warp lane
  /// (fragments).
  Value laneInRow, lane;
};

/// The blocks of `width` consecutive columns a row's slots fall into (a row
/// partial's tile, a group statistic's groups): the slots of each block in
/// this thread with the block's index in the tile, the lane offsets whose
/// butterfly combines a block across the lanes holding it, and whether this
/// lane is its block's first.
struct ColumnBlocks {
  SmallVector<PartialBlock> blocks;
  SmallVector<int32_t> offsets;
  Value leader;
};
/// `width` divides the tile and, with pairs, holds whole blocks of pairs.
ColumnBlocks layOutColumnBlocks(ImplicitLocOpBuilder &b,
                                const GemmKernelConfig &config,
                                const SlotLayout &layout, int64_t width);

/// The shared-tile layout of thread `tid`.
SlotLayout layOutSharedTile(ImplicitLocOpBuilder &b,
                            const GemmKernelConfig &config, Value tid,
                            std::optional<int64_t> pairStride);
/// The fragment layout of lane `lane`; group runs that read the same
/// columns of an input with a static period (`inputs`) are ordered next to
/// each other.
SlotLayout layOutFragments(ImplicitLocOpBuilder &b,
                           const GemmKernelConfig &config, Value lane,
                           std::optional<int64_t> pairStride,
                           ArrayRef<InputPlan> inputs);

} // namespace mlir::coda::gpu_lowering

#endif // CODA_LIB_CONVERSION_CODATOGPU_EPILOGUELAYOUT_H
