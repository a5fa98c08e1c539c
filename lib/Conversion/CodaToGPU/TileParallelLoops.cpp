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

/// Replaces the tile's loop `inner`, whose dimensions but `kept` run once,
/// by a loop over `kept` alone, so that its tileSize iterations map to the
/// threads along x (along z, a block takes at most 64 threads).
void keepOnlyDimension(scf::ParallelOp inner, unsigned kept) {
  if (inner.getNumLoops() == 1 || inner.getNumReductions() != 0)
    return;
  OpBuilder b(inner);
  auto single = scf::ParallelOp::create(
      b, inner.getLoc(), ValueRange{inner.getLowerBound()[kept]},
      ValueRange{inner.getUpperBound()[kept]}, ValueRange{inner.getStep()[kept]});
  Block *body = inner.getBody();
  for (unsigned d = 0, e = inner.getNumLoops(); d < e; ++d)
    body->getArgument(d).replaceAllUsesWith(
        d == kept ? single.getInductionVars()[0]
                  : inner.getLowerBound()[d]);
  Block *into = single.getBody();
  into->getOperations().splice(into->getTerminator()->getIterator(),
                               body->getOperations(), body->begin(),
                               body->getTerminator()->getIterator());
  inner.erase();
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
      scf::ParallelOp inner =
          scf::tileParallelLoop(loop, sizes, /*noMinMaxBounds=*/true).second;
      keepOnlyDimension(inner, tiled);
    }
  }
};
} // namespace
