//===- TileOutput.cpp - an M x N output at (m, n) -------------------------===//
//
// A value yielded as it is: written at (m, n). In a register epilogue a
// 16-bit (or, outside the cooperative schedule, 8-bit) one is narrowed as
// each group run is computed and leaves through the warp's staging buffer in
// 16-byte rows, or, in an interior tile where the plan says, with TMA
// stores; otherwise each run is stored with one vector store where
// in bounds and aligned, else element by element.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct TileOutput : OutputNode {
  using OutputNode::OutputNode;

  void beginRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) override {
    narrowed.clear();
  }

  void narrowGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                      unsigned gr) override {
    if (!e.plan.outputs[i].staged)
      return;
    for (unsigned runIndex : r.runsOfGroupRun[gr]) {
      SmallVector<Value> values;
      for (Slot slot : e.layout.runs[runIndex])
        values.push_back(e.mapping(r, slot).lookup(yielded()));
      narrowed[runIndex] = e.narrowPairs(b, values);
    }
  }

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value> running) override {
    if (e.tmaStored(i))
      return storeWithTma(b, r);
    if (e.plan.outputs[i].staged)
      return storeStaged(b, r);
    for (const EpilogueBuilder::Run &run : e.layout.runs) {
      Slot head = run.front();
      SmallVector<Value> values;
      for (Slot slot : run)
        values.push_back(e.mapping(r, slot).lookup(yielded()));
      Value col = e.cols[head.group][head.lane];
      e.storeRun(
          b, e.outputs[i], {r.row, col}, values,
          e.plan.fragments
              ? e.roomBounds(b, r.room, e.slotOffset(head), run.size())
              : e.limitBounds(b, r.inRow, col, run.size(), e.frame.sizeN));
    }
  }

  void storeWithTma(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {
    // Each run is the lane's two columns 8j + 2q, 8j + 2q + 1 of a chunk
    // j: one 32-bit register of stmatrix, or an i16 of two bytes.
    SmallVector<Value> packed(e.config.tileN / 8);
    for (auto [runIndex, run] : llvm::enumerate(e.layout.runs)) {
      auto [j, col] = e.layout.fragmentPos[run.front().group][run.front().lane];
      SmallVector<Value> values = narrowed.lookup(runIndex);
      Type element = values.front().getType();
      Value pair = vector::FromElementsOp::create(
          b, VectorType::get({2}, element), values);
      Type word = b.getIntegerType(2 * element.getIntOrFloatBitWidth());
      packed[j] = vector::ExtractOp::create(
          b,
          vector::BitCastOp::create(b, VectorType::get({1}, word), pair),
          ArrayRef<int64_t>{0});
    }
    e.storeStagedWithTma(b, i, r.row, packed);
  }

  void storeStaged(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {
    // A run's columns: 8j + e + 2q on, from the head's fragment position.
    SmallVector<EpilogueBuilder::StagedRun> stagedRuns;
    for (auto [runIndex, run] : llvm::enumerate(e.layout.runs)) {
      auto [j, col] = e.layout.fragmentPos[run.front().group][run.front().lane];
      stagedRuns.push_back(
          {8 * j + col, e.layout.twoQ, narrowed.lookup(runIndex)});
    }
    e.storeStaged(b, e.outputs[i], r.row, e.config.tileN, e.frame.blockN,
                  e.frame.sizeN, stagedRuns);
  }

  /// A staged output's runs of the current row, narrowed as computed.
  DenseMap<unsigned, SmallVector<Value>> narrowed;
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeTileOutput(EpilogueBuilder &e, unsigned i) {
  return std::make_unique<TileOutput>(e, i);
}
