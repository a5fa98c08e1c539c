//===- ScalarInput.cpp - one value for the whole tile ---------------------===//
//
// `scalar %x = %s`: a kernel argument every slot shares.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct ScalarInput : InputNode {
  using InputNode::InputNode;

  void mapGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                   unsigned gr) override {
    e.mapEverySlot(r, gr, e.op.getInputArg(k), e.inputs[k]);
  }
};

} // namespace

std::unique_ptr<InputNode>
mlir::coda::gpu_lowering::makeScalarInput(EpilogueBuilder &e, unsigned k) {
  return std::make_unique<ScalarInput>(e, k);
}
