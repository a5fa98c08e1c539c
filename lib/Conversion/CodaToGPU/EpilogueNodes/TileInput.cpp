//===- TileInput.cpp - an M x N input read at the element's position ------===//
//
// `tile %x = %t`: another tensor of the output's shape (a residual). In a
// register epilogue a 16-bit one enters through the warp's staging buffer
// (16-byte copies, ldmatrix), from registers loaded before the mainloop
// (interior tiles) or through pipelined cp.async slots; otherwise each run
// is read from global memory.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct TileInput : InputNode {
  using InputNode::InputNode;

  void readRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) override {
    // The row's runs, read once before any output is staged in the buffer.
    staged.clear();
    const InputPlan &plan = e.plan.inputs[k];
    if (plan.pipelineSlot) {
      staged = e.readStage(
          b,
          e.pipelineSlot(b, *plan.pipelineSlot,
                         r.fragmentRow % GemmKernelConfig::kPipelineSlots),
          e.opaqueIndex(b, e.frame.lane));
    } else if (ArrayRef<Value> prefetched = e.prefetchedValues(k);
               plan.staged && !prefetched.empty()) {
      // The row's runs as they were prefetched (each run is the lane's
      // two columns of one 8-column group).
      int64_t perRow = e.config.tileN / 8;
      prefetched = prefetched.slice(r.fragmentRow * perRow, perRow);
      for (const EpilogueBuilder::Run &run : e.layout.runs)
        staged.push_back(e.fragmentValues(b, prefetched, run));
    } else if (plan.staged) {
      staged = e.loadStaged(b, e.inputs[k], r.row);
    }
  }

  void mapGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                   unsigned gr) override {
    if (!e.plan.inputs[k].staged) {
      e.mapTileOrColumnInput(b, r, k, gr);
      return;
    }
    BlockArgument arg = e.op.getInputArg(k);
    for (unsigned runIndex : r.runsOfGroupRun[gr])
      for (auto [slot, value] :
           llvm::zip_equal(e.layout.runs[runIndex], staged[runIndex]))
        e.mapping(r, slot).map(arg, value);
  }

  /// A staged input's values of the current row, run by run.
  SmallVector<SmallVector<Value>> staged;
};

} // namespace

std::unique_ptr<InputNode>
mlir::coda::gpu_lowering::makeTileInput(EpilogueBuilder &e, unsigned k) {
  return std::make_unique<TileInput>(e, k);
}
