//===- PeriodicInput.cpp - a table row, column mod its period -------------===//
//
// `periodic %x = %t`: an M x P table read at column n mod P (RoPE's cos and
// sin per head). With a static period that divides the tile, the runs whose
// columns are congruent mod P share one read per row; else, in a register
// epilogue, the warp's rows are copied into its buffer where they fit, or
// each run is read from global memory (one vector access where it does not
// wrap).
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct PeriodicInput : InputNode {
  using InputNode::InputNode;

  void readRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) override {
    reads.clear();
  }

  void stageRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) override {
    // The warp's rows of the table for this row.
    if (e.inputRowBuffers[k])
      e.stageInputRows(
          b, k,
          arith::SubIOp::create(
              b, r.row,
              arith::DivUIOp::create(b, e.frame.lane, e.index(b, 4))));
  }

  void mapGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                   unsigned gr) override {
    if (e.inputRowBuffers[k]) {
      e.mapRowBufferInput(b, r, k, gr);
      return;
    }
    for (unsigned runIndex : r.runsOfGroupRun[gr]) {
      const EpilogueBuilder::Run &run = e.layout.runs[runIndex];
      SmallVector<Value> values;
      if (std::optional<int64_t> period = e.plan.inputs[k].period) {
        // Runs whose columns are congruent mod P read once per row.
        SmallVector<Value> &read =
            reads[{e.periodicColumn(*period, run), int64_t(run.size())}];
        if (read.empty())
          read = e.readPeriodicRun(b, k, run, r.rowClamped);
        values = read;
      } else {
        values = e.readPeriodicRun(b, k, run, r.rowClamped);
      }
      for (auto [slot, value] : llvm::zip_equal(run, values))
        e.mapping(r, slot).map(e.op.getInputArg(k), value);
    }
  }

  /// The current row's reads with a static period: (column mod P, run
  /// length) -> values.
  std::map<std::pair<int64_t, int64_t>, SmallVector<Value>> reads;
};

} // namespace

std::unique_ptr<InputNode>
mlir::coda::gpu_lowering::makePeriodicInput(EpilogueBuilder &e, unsigned k) {
  return std::make_unique<PeriodicInput>(e, k);
}
