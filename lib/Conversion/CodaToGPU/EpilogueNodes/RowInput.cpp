//===- RowInput.cpp - one value per output row ----------------------------===//
//
// `row %x = %v`: a vector broadcast along the rows (RMSNorm's deferred row
// scale): one load per row, shared by the row's slots.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct RowInput : InputNode {
  using InputNode::InputNode;

  void readRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) override {
    value = memref::LoadOp::create(b, e.inputs[k], ValueRange{r.rowClamped});
  }

  void mapGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                   unsigned gr) override {
    e.mapEverySlot(r, gr, e.op.getInputArg(k), value);
  }

  /// The current row's value.
  Value value;
};

} // namespace

std::unique_ptr<InputNode>
mlir::coda::gpu_lowering::makeRowInput(EpilogueBuilder &e, unsigned k) {
  return std::make_unique<RowInput>(e, k);
}
