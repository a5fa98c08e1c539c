//===- GroupValueOutput.cpp - one value per group of the row --------------===//
//
// `coda.group_value %v row group W`: a value the same over each group of W
// columns of a row (a quantization's scale), written once per group by the
// group's first lane (EpilogueBuilder::groupBlocks).
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct GroupValueOutput : OutputNode {
  using OutputNode::OutputNode;

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value>) override {
    auto group = cast<GroupValueOp>(yielded().getDefiningOp());
    int64_t width = group.getWidth();
    const ColumnBlocks &blocks = e.groupBlocks.at(width);
    Value firstGroup = arith::MulIOp::create(
        b, e.frame.tileCol, e.index(b, e.config.tileN / width));
    for (const PartialBlock &block : blocks.blocks) {
      // Every slot of the group holds the value; the first one's is taken.
      Value value = e.mapping(r, block.slots.front()).lookup(yielded());
      Value column = arith::AddIOp::create(b, firstGroup, block.indexInTile);
      Value exists = arith::CmpIOp::create(
          b, arith::CmpIPredicate::ult,
          arith::MulIOp::create(b, column, e.index(b, width)), e.frame.sizeN);
      e.storeIf(b,
                arith::AndIOp::create(
                    b, arith::AndIOp::create(b, blocks.leader, r.inRow),
                    exists),
                value, e.outputs[i], {r.row, column});
    }
  }
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeGroupValueOutput(EpilogueBuilder &e,
                                               unsigned i) {
  return std::make_unique<GroupValueOutput>(e, i);
}
