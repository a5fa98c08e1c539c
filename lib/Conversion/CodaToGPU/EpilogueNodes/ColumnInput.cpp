//===- ColumnInput.cpp - one value per output column ----------------------===//
//
// `col %x = %v`: a vector broadcast down the columns (a bias, RMSNorm's
// weight). In a register epilogue its row of the tile's columns is copied
// once per tile into the warp's buffer where that fits (from chunks loaded
// before the mainloop in an interior tile), or the lane's first columns are
// loaded before the mainloop; otherwise each run is read from global memory.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct ColumnInput : InputNode {
  using InputNode::InputNode;

  void beginTile(ImplicitLocOpBuilder &b) override {
    if (e.inputRowBuffers[k])
      e.stageInputRows(b, k, Value());
  }

  void mapGroupRun(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
                   unsigned gr) override {
    if (e.inputRowBuffers[k])
      e.mapRowBufferInput(b, r, k, gr);
    else
      e.mapTileOrColumnInput(b, r, k, gr);
  }
};

} // namespace

std::unique_ptr<InputNode>
mlir::coda::gpu_lowering::makeColumnInput(EpilogueBuilder &e, unsigned k) {
  return std::make_unique<ColumnInput>(e, k);
}
