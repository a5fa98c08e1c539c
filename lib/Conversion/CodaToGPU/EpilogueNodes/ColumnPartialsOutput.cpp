//===- ColumnPartialsOutput.cpp - per-column partial reductions -----------===//
//
// `coda.col_reduce <kind> %v tile T`: one partial per column and tile of
// rows. Each thread carries a running value per slot across the tile's rows
// (in the driver's loop-carried values); the tile's finish
// (EpilogueBuilder::finishColumnPartials) combines the threads' values
// through shared memory in a fixed order.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct ColumnPartialsOutput : OutputNode {
  using OutputNode::OutputNode;

  int64_t slotsPerThread() const {
    return e.layout.groups.size() * e.lanesPerGroup;
  }

  void beginTile(ImplicitLocOpBuilder &b,
                 SmallVector<Value> &runningValues) override {
    first = runningValues.size();
    for (int64_t s = 0; s < slotsPerThread(); ++s)
      runningValues.push_back(e.identity(b, getPartialKind(yielded())));
  }

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value> runningValues) override {
    ReductionKind kind = getPartialKind(yielded());
    MutableArrayRef<Value> mine = runningValues.slice(first, slotsPerThread());
    for (int64_t g = 0, end = e.layout.groups.size(); g < end; ++g)
      for (int64_t l = 0; l < e.lanesPerGroup; ++l) {
        Value masked = arith::SelectOp::create(
            b, e.slotInBounds(b, r, {g, l}),
            e.toF32(b, e.mapping(r, {g, l}).lookup(yielded())),
            e.identity(b, kind));
        Value &slot = mine[g * e.lanesPerGroup + l];
        slot = buildReductionCombine(b, b.getLoc(), kind, slot, masked);
      }
  }

  /// Where its running values start among the tile's.
  size_t first = 0;
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeColumnPartialsOutput(EpilogueBuilder &e,
                                                   unsigned i) {
  return std::make_unique<ColumnPartialsOutput>(e, i);
}
