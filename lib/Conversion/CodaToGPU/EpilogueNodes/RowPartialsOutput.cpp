//===- RowPartialsOutput.cpp - per-row partial reductions over the tile ---===//
//
// `coda.row_reduce <kind> %v tile T`: one partial per row and block of T
// columns (sum, max, ..., log-sum-exp), each thread's slots combined, then
// the lanes that share the block by butterfly shuffles in a fixed order; the
// block's first lane writes it. Where no output waits for the whole row
// (OutputPlan::eager), the slots are combined as each group run is computed.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct RowPartialsOutput : OutputNode {
  using OutputNode::OutputNode;

  bool eager() const { return e.plan.outputs[i].eager; }
  ReductionKind kind() const { return getPartialKind(yielded()); }

  void beginRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) override {
    if (eager())
      running.assign(e.layout.partialBlocks.size(), e.identity(b, kind()));
  }

  void consumeGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                       unsigned gr) override {
    // Combined in the blocks' slot order where group runs follow the
    // groups, as they do but for periodic inputs.
    if (!eager())
      return;
    for (auto [p, block] : llvm::enumerate(e.layout.partialBlocks))
      for (Slot s : block.slots) {
        if (llvm::is_contained(e.layout.groupRuns[gr], s.group))
          running[p] =
              buildReductionCombine(b, b.getLoc(), kind(), running[p],
                                    e.partialTerm(b, r, s, yielded(), kind()));
      }
  }

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value>) override {
    int64_t partialsPerTile = e.config.tileN / e.config.rowPartialTile;
    for (auto [p, block] : llvm::enumerate(e.layout.partialBlocks)) {
      Value acc = eager() ? running[p] : combineSlots(b, r, block);
      acc = e.shuffleCombine(b, kind(), acc, e.layout.partialOffsets);
      Value partial = arith::AddIOp::create(
          b,
          arith::MulIOp::create(b, e.frame.tileCol,
                                e.index(b, partialsPerTile)),
          block.indexInTile);
      // The partial's first lane writes it, unless the whole block of
      // columns lies beyond N.
      Value blockStart = arith::MulIOp::create(
          b, partial, e.index(b, e.config.rowPartialTile));
      Value exists = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                           blockStart, e.frame.sizeN);
      e.storeIf(b,
                arith::AndIOp::create(
                    b,
                    arith::AndIOp::create(b, e.layout.partialLeader, r.inRow),
                    exists),
                e.fromF32(b, acc, e.partialElementType(i)), e.outputs[i],
                {r.row, partial});
    }
  }

  /// The thread's slots of `block` combined at once.
  Value combineSlots(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                     const EpilogueBuilder::PartialBlock &block) {
    SmallVector<Value> masked;
    for (Slot s : block.slots)
      masked.push_back(e.partialTerm(b, r, s, yielded(), kind()));
    if (kind() == ReductionKind::logsumexp)
      return e.logSumExp(b, masked);
    Value acc = e.identity(b, kind());
    for (Value v : masked)
      acc = buildReductionCombine(b, b.getLoc(), kind(), acc, v);
    return acc;
  }

  /// Eager: the current row's running value of each block.
  SmallVector<Value> running;
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeRowPartialsOutput(EpilogueBuilder &e,
                                                unsigned i) {
  return std::make_unique<RowPartialsOutput>(e, i);
}
