//===- EpilogueGroups.cpp - group statistics within the row ---------------===//
//
// `coda.group_reduce <kind> %v row group W` on the GPU: a group of W columns
// of a row lies in one tile, held by the lanes of a ColumnBlocks block (a
// quad in the fragment layout, W / 8 consecutive lanes in the shared-tile
// one). Each thread combines its slots of the group, a butterfly of
// shuffles combines the lanes (every lane ends with the statistic), and the
// row's epilogue then reads it at every slot of the group.
//
//===----------------------------------------------------------------------===//

#include "EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

void EpilogueBuilder::layOutGroups(ImplicitLocOpBuilder &b) {
  for (Operation &inner : op.getBody().without_terminator()) {
    int64_t width = getGroupWidth(inner);
    if (width && !groupBlocks.count(width))
      groupBlocks[width] = layOutColumnBlocks(b, config, layout, width);
  }
}

/// `term` combined with the same term of the lane `offset` away.
static GroupTerm shuffleGroupTerm(ImplicitLocOpBuilder &b, GroupStatistic kind,
                                  GroupTerm term, int32_t offset) {
  auto shuffle = [&](Value v) {
    return gpu::ShuffleOp::create(b, v, offset, 32, gpu::ShuffleMode::XOR)
        .getShuffleResult();
  };
  GroupTerm other{shuffle(term.value), Value()};
  if (term.position) {
    Value position32 =
        arith::IndexCastOp::create(b, b.getI32Type(), term.position);
    other.position = arith::IndexCastOp::create(b, b.getIndexType(),
                                                shuffle(position32));
  }
  return buildGroupCombine(b, b.getLoc(), kind, term, other);
}

void EpilogueBuilder::computeGroupStatistics(ImplicitLocOpBuilder &lb,
                                             Row &r) {
  // The row's statistics are mapped already when the main loop meets them.
  auto mapped = [](OpBuilder &, GroupReduceOp, MutableArrayRef<IRMapping>) {};
  for (GroupReduceOp stat : op.getBody().getOps<GroupReduceOp>()) {
    // Statistics down the columns are finished before the rows.
    if (stat.getAxis() != ReductionAxis::row)
      continue;
    SmallVector<Operation *> slice = getGroupOperandSlice(op, stat.getValue());
    for (auto [gr, groupRun] : llvm::enumerate(layout.groupRuns)) {
      for (std::unique_ptr<InputNode> &node : inputNodes)
        node->mapGroupRun(lb, r, gr);
      for (int64_t g : groupRun)
        evaluateEpilogueOps(lb, slice, r.row, cols[g], lanesOf(r, g), mapped);
    }
    GroupStatistic kind = stat.getKind();
    bool argmax = kind == GroupStatistic::argmax;
    Value identity = arith::ConstantOp::create(
        lb, getGroupIdentity(kind, lb.getF32Type()));
    const ColumnBlocks &blocks = groupBlocks.at(stat.getWidth());
    for (const PartialBlock &block : blocks.blocks) {
      // Slots beyond the output take the identity (and, for argmax, a
      // position no column has).
      GroupTerm acc{identity, argmax ? frame.sizeN : Value()};
      for (Slot s : block.slots) {
        Value value = toF32(lb, mapping(r, s).lookup(stat.getValue()));
        GroupTerm term{arith::SelectOp::create(lb, slotInBounds(lb, r, s),
                                               value, identity),
                       argmax ? cols[s.group][s.lane] : Value()};
        acc = buildGroupCombine(lb, lb.getLoc(), kind, acc, term);
      }
      for (int32_t offset : blocks.offsets)
        acc = shuffleGroupTerm(lb, kind, acc, offset);
      Value result =
          argmax ? acc.position
                 : fromF32(lb, acc.value, stat.getResult().getType());
      for (Slot s : block.slots)
        mapping(r, s).map(stat.getResult(), result);
    }
  }
}
