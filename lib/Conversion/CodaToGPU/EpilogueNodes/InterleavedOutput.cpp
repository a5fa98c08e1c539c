//===- InterleavedOutput.cpp - two values per column, side by side --------===//
//
// A `!coda.interleaved` yielded by `coda.interleave %even, %odd`: an
// M x 2N output whose columns 2n and 2n + 1 take the two values of column n
// (SwiGLU's backward writes dg and du so). Stored as each group run is
// computed, so that its values do not wait for the rest of the row.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct InterleavedOutput : OutputNode {
  using OutputNode::OutputNode;

  void consumeGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                       unsigned gr) override {
    auto interleave = yielded().getDefiningOp<InterleaveOp>();
    Value two = e.index(b, 2);
    Value limit = arith::MulIOp::create(b, e.frame.sizeN, two);
    for (unsigned runIndex : r.runsOfGroupRun[gr]) {
      const EpilogueBuilder::Run &run = e.layout.runs[runIndex];
      Slot head = run.front();
      SmallVector<Value> values;
      for (Slot slot : run) {
        values.push_back(e.mapping(r, slot).lookup(interleave.getEven()));
        values.push_back(e.mapping(r, slot).lookup(interleave.getOdd()));
      }
      // A run of columns [c, c + r) fills [2c, 2c + 2r): even, odd per
      // column.
      Value col = arith::MulIOp::create(b, e.cols[head.group][head.lane], two);
      e.storeRun(b, e.outputs[i], {r.row, col}, values,
                 e.plan.fragments
                     ? e.roomBounds(b, r.room, e.slotOffset(head),
                                    values.size(), /*perColumn=*/2)
                     : e.limitBounds(b, r.inRow, col, values.size(), limit));
    }
  }
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeInterleavedOutput(EpilogueBuilder &e,
                                                unsigned i) {
  return std::make_unique<InterleavedOutput>(e, i);
}
