//===- ColumnGroupValueOutput.cpp - one value per column group ------------===//
//
// `coda.group_value %v col group 128`: a value the same down each group of
// a column (a 128 x 1 quantization's scale), which on the GPU is the whole
// column of the tile: the tile's first row writes it, one element per
// column (EpilogueColumnGroups.cpp).
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct ColumnGroupValueOutput : OutputNode {
  using OutputNode::OutputNode;

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value>) override {
    // Fragments: the tile's first row is fragment row 0 of warp 0.
    if (r.fragmentRow > 0)
      return;
    auto group = cast<GroupValueOp>(yielded().getDefiningOp());
    Value first = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, r.row,
                                        e.frame.blockM);
    Value groupRow =
        arith::DivUIOp::create(b, e.frame.blockM, e.index(b, group.getWidth()));
    for (int64_t g = 0, end = e.layout.groups.size(); g < end; ++g)
      for (int64_t l = 0; l < e.lanesPerGroup; ++l)
        e.storeIf(b,
                  arith::AndIOp::create(b, first, e.slotInBounds(b, r, {g, l})),
                  e.mapping(r, {g, l}).lookup(yielded()), e.outputs[i],
                  {groupRow, e.cols[g][l]});
  }
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeColumnGroupValueOutput(EpilogueBuilder &e,
                                                     unsigned i) {
  return std::make_unique<ColumnGroupValueOutput>(e, i);
}
