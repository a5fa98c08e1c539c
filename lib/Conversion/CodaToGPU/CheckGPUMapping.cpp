//===- CheckGPUMapping.cpp - no parallel loop left on the host ------------===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODACHECKGPUMAPPING
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;

namespace {
struct CodaCheckGPUMappingPass
    : coda::impl::CodaCheckGPUMappingBase<CodaCheckGPUMappingPass> {
  void runOnOperation() override {
    bool failed = false;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (loop->getParentOfType<gpu::LaunchOp>() ||
          loop->getParentOfType<gpu::GPUModuleOp>())
        return;
      loop.emitError("this loop nest could not be mapped to a GPU kernel and "
                     "would run on the host over device memory");
      failed = true;
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
