//===- TileParallelLoops.cpp - the innermost dimension to the threads -----===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODATILEPARALLELLOOPS
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;

namespace {
bool isSingleIteration(scf::ParallelOp loop, unsigned dim) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()[dim]);
  std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound()[dim]);
  std::optional<int64_t> step = getConstantIntValue(loop.getStep()[dim]);
  return lb && ub && step && *step > 0 && *ub - *lb <= *step;
}

struct CodaTileParallelLoopsPass
    : coda::impl::CodaTileParallelLoopsBase<CodaTileParallelLoopsPass> {
  using CodaTileParallelLoopsBase::CodaTileParallelLoopsBase;

  void runOnOperation() override {
    if (tileSize <= 0) {
      getOperation()->emitError("coda-tile-parallel-loops: tile-size must be "
                                "positive, got ")
          << static_cast<int64_t>(tileSize);
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> outermost;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (!loop->getParentOfType<scf::ParallelOp>())
        outermost.push_back(loop);
    });
    for (scf::ParallelOp loop : outermost) {
      // The innermost dimension of more than one iteration (a [T, 1]
      // column's rows, not its one column).
      unsigned tiled = loop.getNumLoops() - 1;
      while (tiled > 0 && isSingleIteration(loop, tiled))
        --tiled;
      SmallVector<int64_t> sizes(loop.getNumLoops(), 1);
      sizes[tiled] = tileSize;
      scf::tileParallelLoop(loop, sizes, /*noMinMaxBounds=*/true);
    }
  }
};
} // namespace
