//===- DependentLaunch.cpp - kernels launched ahead of their predecessor --===//
//
// Hopper's programmatic dependent launch: a kernel launched with
// programmatic stream serialization may be scheduled before the grid
// before it in the stream has finished, provided it waits for that grid
// (griddepcontrol.wait) before it touches memory. Each kernel waits first.
// None lets the kernel after it be scheduled early
// (griddepcontrol.launch_dependents): at the start of every kernel that
// made the Llama layer 2-3 % slower, and after each CTA's last tile's K
// loop (as CUTLASS's kernels signal) it gained nothing over waiting alone
// (docs/performance.md, "Kernels launched before the one ahead of them
// ends"); without it a kernel is scheduled as the one before it exits.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODADEPENDENTLAUNCH
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

struct CodaDependentLaunchPass
    : mlir::coda::impl::CodaDependentLaunchBase<CodaDependentLaunchPass> {
  void runOnOperation() override {
    for (auto kernel : getOperation().getOps<gpu::GPUFuncOp>()) {
      if (!kernel.isKernel() || kernel->hasAttr(kDependentLaunchAttrName))
        continue;
      OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
      NVVM::GriddepcontrolOp::create(b, kernel.getLoc(),
                                     NVVM::GridDepActionKind::wait);
      kernel->setAttr(kDependentLaunchAttrName, b.getUnitAttr());
    }
  }
};

} // namespace
