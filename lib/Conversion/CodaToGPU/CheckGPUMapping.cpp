//===- CheckGPUMapping.cpp - no parallel loop left on the host ------------===//

#include "coda/ABI/KernelAbi.h"
#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODACHECKGPUMAPPING
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;

namespace {
/// Whether `launch`'s constant block sizes exceed sm_90's limits (1024,
/// 1024 and 64 threads along x, y, z, 1024 in all), said on the launch.
bool checkBlock(gpu::LaunchOp launch) {
  const ::coda::abi::LaunchLimits limits{};
  static const char *axes[] = {"x", "y", "z"};
  gpu::KernelDim3 sizes = launch.getBlockSizeOperandValues();
  Value dims[] = {sizes.x, sizes.y, sizes.z};
  int64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    std::optional<int64_t> size = getConstantIntValue(dims[i]);
    if (!size)
      return false;
    threads *= *size;
    if (*size > limits.block[i]) {
      launch.emitError("this loop nest maps to ")
          << *size << " threads along " << axes[i]
          << ", beyond the device's " << limits.block[i];
      return true;
    }
  }
  if (threads > limits.threadsPerBlock) {
    launch.emitError("this loop nest maps to ")
        << threads << " threads per block, beyond the device's "
        << limits.threadsPerBlock;
    return true;
  }
  return false;
}

struct CodaCheckGPUMappingPass
    : mlir::coda::impl::CodaCheckGPUMappingBase<CodaCheckGPUMappingPass> {
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
    // A block the device cannot launch is refused here, not at the launch.
    getOperation().walk([&](gpu::LaunchOp launch) {
      failed |= checkBlock(launch);
    });
    if (failed)
      signalPassFailure();
  }
};
} // namespace
