//===- PairOutput.cpp - one value per column pair -------------------------===//
//
// A `!coda.pair` yielded by `coda.pair_contract` (SwiGLU's silu(g) * u):
// one value per pair of columns, an M x N/2 output. In a register epilogue
// a 16-bit one leaves through the warp's staging buffer in 16-byte rows;
// otherwise each group run's pairs are stored at once.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct PairOutput : OutputNode {
  using OutputNode::OutputNode;

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value> running) override {
    // Pair j of block k lands in column k s + j: the tile's pairs start at
    // blockN / 2.
    Value tilePairs = arith::DivUIOp::create(b, e.frame.blockN, e.index(b, 2));
    Value pairLimit = arith::DivUIOp::create(b, e.frame.sizeN, e.index(b, 2));
    if (e.plan.outputs[i].staged) {
      // A group run's pairs: pairStatic + the lane's part of the number.
      SmallVector<EpilogueBuilder::StagedRun> stagedRuns;
      for (ArrayRef<int64_t> groupRun : e.layout.groupRuns) {
        auto [first, laneOffset] = e.pairNumber(groupRun.front());
        stagedRuns.push_back({first, laneOffset, values(r, groupRun)});
      }
      e.storeStaged(b, e.outputs[i], r.row, e.config.tileN / 2, tilePairs,
                    pairLimit, stagedRuns);
      return;
    }
    for (ArrayRef<int64_t> groupRun : e.layout.groupRuns) {
      SmallVector<Value> pairs = values(r, groupRun);
      Value pairCol = arith::AddIOp::create(b, tilePairs,
                                            e.layout.groups[groupRun.front()]);
      e.storeRun(b, e.outputs[i], {r.row, pairCol}, pairs,
                 e.limitBounds(b, r.inRow, pairCol, pairs.size(), pairLimit));
    }
  }

  /// The pairs of a group run (each group's first lane holds its pair).
  SmallVector<Value> values(EpilogueBuilder::Row &r,
                            ArrayRef<int64_t> groupRun) {
    SmallVector<Value> pairs;
    for (int64_t g : groupRun)
      pairs.push_back(e.mapping(r, {g, 0}).lookup(yielded()));
    return pairs;
  }
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makePairOutput(EpilogueBuilder &e, unsigned i) {
  return std::make_unique<PairOutput>(e, i);
}
