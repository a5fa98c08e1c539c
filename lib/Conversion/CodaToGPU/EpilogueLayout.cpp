//===- EpilogueLayout.cpp - which slots of a tile a thread owns -----------===//
//
// The thread's groups, their columns and runs, the group runs of pair
// outputs and the lanes that combine each row partial, for the shared-tile
// layout and the WGMMA fragment layout (EpilogueLayout.h).
//
//===----------------------------------------------------------------------===//

#include "EpilogueLayout.h"

#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

static Value index(ImplicitLocOpBuilder &b, int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}

/// The row partials' blocks of `layout` (config.rowPartialTile's).
static void setPartialBlocks(SlotLayout &layout, ColumnBlocks blocks) {
  layout.partialBlocks = std::move(blocks.blocks);
  layout.partialOffsets = std::move(blocks.offsets);
  layout.partialLeader = blocks.leader;
}

SlotLayout mlir::coda::gpu_lowering::layOutSharedTile(
    ImplicitLocOpBuilder &b, const GemmKernelConfig &config, Value tid,
    std::optional<int64_t> pairStride) {
  SlotLayout layout;
  int64_t lanesPerGroup = pairStride ? 2 : 1;
  int64_t groupsPerThread = kEpilogueColumnsPerThread / lanesPerGroup;
  int64_t threadsPerRow = config.tileN / kEpilogueColumnsPerThread;
  Value laneInRow = arith::RemUIOp::create(b, tid, index(b, threadsPerRow));
  Value firstGroup =
      arith::MulIOp::create(b, laneInRow, index(b, groupsPerThread));
  for (int64_t g = 0; g < groupsPerThread; ++g) {
    layout.groups.push_back(arith::AddIOp::create(b, firstGroup, index(b, g)));
    layout.localCols.push_back(SmallVector<Value, 2>(
        getGroupColumns(b, b.getLoc(), layout.groups.back(), pairStride)));
  }
  // Runs of slots whose columns are consecutive in memory.
  if (!pairStride || *pairStride == 1) {
    layout.runs.emplace_back();
    for (int64_t g = 0; g < groupsPerThread; ++g)
      for (int64_t l = 0; l < lanesPerGroup; ++l)
        layout.runs.back().push_back({g, l});
  } else if (*pairStride % groupsPerThread == 0) {
    for (int64_t l = 0; l < 2; ++l) {
      layout.runs.emplace_back();
      for (int64_t g = 0; g < groupsPerThread; ++g)
        layout.runs.back().push_back({g, l});
    }
  } else {
    for (int64_t g = 0; g < groupsPerThread; ++g)
      for (int64_t l = 0; l < 2; ++l)
        layout.runs.push_back({{g, l}});
  }
  layout.groupRuns.emplace_back();
  for (int64_t g = 0; g < groupsPerThread; ++g)
    layout.groupRuns.back().push_back(g);
  layout.laneInRow = laneInRow;
  if (config.rowPartialTile)
    setPartialBlocks(layout,
                     layOutColumnBlocks(b, config, layout,
                                        config.rowPartialTile));
  return layout;
}

SlotLayout mlir::coda::gpu_lowering::layOutFragments(
    ImplicitLocOpBuilder &b, const GemmKernelConfig &config, Value lane,
    std::optional<int64_t> pairStride, ArrayRef<InputPlan> inputs) {
  SlotLayout layout;
  // Lane l holds columns 8j + 2q and 8j + 2q + 1, q = l mod 4.
  layout.laneQ = arith::RemUIOp::create(b, lane, index(b, 4));
  layout.twoQ = arith::MulIOp::create(b, layout.laneQ, index(b, 2));
  int64_t groupsOf8 = config.tileN / 8;
  auto column = [&](int64_t j, int64_t e) -> Value {
    return arith::AddIOp::create(b, layout.twoQ, index(b, 8 * j + e));
  };
  auto addGroup = [&](Value number, ArrayRef<std::pair<int64_t, int64_t>> at) {
    layout.groups.push_back(number);
    layout.localCols.emplace_back();
    layout.fragmentPos.emplace_back(at.begin(), at.end());
    for (auto [j, e] : at)
      layout.localCols.back().push_back(column(j, e));
  };
  if (!pairStride) {
    for (int64_t j = 0; j < groupsOf8; ++j) {
      for (int64_t e = 0; e < 2; ++e)
        addGroup(column(j, e), {{j, e}});
      layout.runs.push_back({{2 * j, 0}, {2 * j + 1, 0}});
      layout.groupRuns.push_back({2 * j, 2 * j + 1});
    }
  } else if (*pairStride == 1) {
    // A lane's two columns are a pair: group 4j + q.
    for (int64_t j = 0; j < groupsOf8; ++j) {
      addGroup(arith::AddIOp::create(
                   b, arith::DivUIOp::create(b, layout.twoQ, index(b, 2)),
                   index(b, 4 * j)),
               {{j, 0}, {j, 1}});
      layout.runs.push_back({{j, 0}, {j, 1}});
      layout.groupRuns.push_back({j});
    }
  } else {
    // Stride s (a multiple of 8): column c of the first half of a 2s block
    // pairs with c + s, which the same lane holds in group j + s / 8; the
    // pair's number is (c / 2s) s + c mod 2s.
    int64_t s = *pairStride;
    for (int64_t j = 0; j < groupsOf8; ++j) {
      if ((8 * j) % (2 * s) >= s)
        continue;
      int64_t first = layout.groups.size();
      for (int64_t e = 0; e < 2; ++e)
        addGroup(arith::AddIOp::create(
                     b, layout.twoQ,
                     index(b, (8 * j) / (2 * s) * s + (8 * j) % (2 * s) + e)),
                 {{j, e}, {j + s / 8, e}});
      for (int64_t l = 0; l < 2; ++l)
        layout.runs.push_back({{first, l}, {first + 1, l}});
      layout.groupRuns.push_back({first, first + 1});
    }
  }
  // Group runs that read the same columns of a periodic input with a
  // static period next to each other, so that the read they share (see
  // staticPeriod) is live only between them.
  for (const InputPlan &input : inputs) {
    std::optional<int64_t> period = input.period;
    if (!period)
      continue;
    auto key = [&](const SmallVector<int64_t> &groupRun) {
      return (8 * layout.fragmentPos[groupRun.front()].front().first) % *period;
    };
    llvm::stable_sort(layout.groupRuns, [&](const SmallVector<int64_t> &x,
                                            const SmallVector<int64_t> &y) {
      return key(x) < key(y);
    });
    break;
  }
  layout.lane = lane;
  if (config.rowPartialTile)
    setPartialBlocks(layout,
                     layOutColumnBlocks(b, config, layout,
                                        config.rowPartialTile));
  return layout;
}

ColumnBlocks mlir::coda::gpu_lowering::layOutColumnBlocks(
    ImplicitLocOpBuilder &b, const GemmKernelConfig &config,
    const SlotLayout &layout, int64_t width) {
  ColumnBlocks result;
  if (layout.fragmentPos.empty()) {
    // A block covers width / 8 consecutive lanes, all of this thread's
    // columns in one of them.
    int64_t lanesPerBlock = width / kEpilogueColumnsPerThread;
    PartialBlock block;
    for (int64_t g = 0, e = layout.groups.size(); g < e; ++g)
      for (int64_t l = 0, f = layout.localCols[g].size(); l < f; ++l)
        block.slots.push_back({g, l});
    block.indexInTile =
        arith::DivUIOp::create(b, layout.laneInRow, index(b, lanesPerBlock));
    result.blocks.push_back(block);
    for (int32_t offset = lanesPerBlock / 2; offset >= 1; offset /= 2)
      result.offsets.push_back(offset);
    result.leader = arith::CmpIOp::create(
        b, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(b, layout.laneInRow, index(b, lanesPerBlock)),
        index(b, 0));
    return result;
  }
  // The four lanes of a quad share the rows; each thread holds part of
  // every block of the tile.
  for (int64_t p = 0; p < config.tileN / width; ++p) {
    PartialBlock block;
    block.indexInTile = index(b, p);
    for (auto [g, positions] : llvm::enumerate(layout.fragmentPos))
      for (auto [l, pos] : llvm::enumerate(positions))
        if (8 * pos.first / width == p)
          block.slots.push_back({int64_t(g), int64_t(l)});
    result.blocks.push_back(block);
  }
  result.offsets = {1, 2};
  result.leader = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, layout.lane, index(b, 4)), index(b, 0));
  return result;
}
