//===- PairInput.cpp - one value per column pair --------------------------===//
//
// `pair %x = %t`: an M x N/2 tensor read once per column pair, both lanes of
// the pair taking the same value (SwiGLU's backward reads the output's
// gradient so). The row's first and last pair are the driver's (Row).
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct PairInput : InputNode {
  using InputNode::InputNode;

  void mapGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                   unsigned gr) override {
    // Both lanes of a group read their pair's element: pair j of the tile
    // is column blockN / 2 + j (clamped like the rows).
    for (int64_t g : e.layout.groupRuns[gr]) {
      Value pairCol = arith::MinUIOp::create(
          b,
          arith::AddIOp::create(b, r.firstPair,
                                e.plan.fragments
                                    ? e.index(b, e.pairNumber(g).first)
                                    : e.layout.groups[g]),
          r.lastPair);
      Value value = memref::LoadOp::create(b, e.inputs[k],
                                           ValueRange{r.rowClamped, pairCol});
      for (int64_t l = 0; l < e.lanesPerGroup; ++l)
        e.mapping(r, {g, l}).map(e.op.getInputArg(k), value);
    }
  }
};

} // namespace

std::unique_ptr<InputNode>
mlir::coda::gpu_lowering::makePairInput(EpilogueBuilder &e, unsigned k) {
  return std::make_unique<PairInput>(e, k);
}
