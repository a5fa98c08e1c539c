//===- RowSelectOutput.cpp - the value at a data-dependent column ---------===//
//
// `coda.row_select %v at %col`: one value per row, the slot whose column is
// the row's target (cross-entropy's target logit); the lane that holds it
// writes it.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct RowSelectOutput : OutputNode {
  using OutputNode::OutputNode;

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value>) override {
    // Fragments: the target's offset from the lane's first column (2q), one
    // subtraction per row, against each slot's constant offset, so that no
    // column index stays live across the epilogue's rows.
    auto select = cast<RowSelectOp>(yielded().getDefiningOp());
    Value laneFirstCol;
    if (e.plan.fragments)
      laneFirstCol = arith::AddIOp::create(b, e.frame.blockN, e.layout.twoQ);
    for (int64_t g = 0, end = e.layout.groups.size(); g < end; ++g)
      for (int64_t l = 0; l < e.lanesPerGroup; ++l) {
        IRMapping &slotMapping = e.mapping(r, {g, l});
        Value target = slotMapping.lookup(select.getColumn());
        if (!target.getType().isIndex())
          target = arith::IndexCastOp::create(b, b.getIndexType(), target);
        Value matches =
            e.plan.fragments
                ? arith::CmpIOp::create(
                      b, arith::CmpIPredicate::eq,
                      arith::SubIOp::create(b, target, laneFirstCol),
                      e.index(b, e.slotOffset({g, l})))
                : arith::CmpIOp::create(b, arith::CmpIPredicate::eq, target,
                                        e.cols[g][l]);
        Value hit =
            arith::AndIOp::create(b, e.slotInBounds(b, r, {g, l}), matches);
        e.storeIf(b, hit, slotMapping.lookup(yielded()), e.outputs[i], {r.row});
      }
  }
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeRowSelectOutput(EpilogueBuilder &e, unsigned i) {
  return std::make_unique<RowSelectOutput>(e, i);
}
