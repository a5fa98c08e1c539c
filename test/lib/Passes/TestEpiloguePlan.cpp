//===- TestEpiloguePlan.cpp - print each GEMM kernel's epilogue plan ------===//
//
// --coda-test-epilogue-plan: a remark on every coda.gemm (on memrefs) with
// the placement of each epilogue input and output in each of its kernels
// (lib/Conversion/CodaToGPU/EpiloguePlan.h), so that lit tests check the
// placement rules as decisions rather than through the IR they shape. The
// configuration is the GEMM's coda.gemm_config, else --coda-to-gpu's
// default.
//
//===----------------------------------------------------------------------===//

#include "EpiloguePlan.h"

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

struct TestEpiloguePlanPass
    : PassWrapper<TestEpiloguePlanPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestEpiloguePlanPass)

  StringRef getArgument() const final { return "coda-test-epilogue-plan"; }
  StringRef getDescription() const final {
    return "Report each GEMM kernel's epilogue plan as a remark";
  }

  void runOnOperation() override {
    std::unique_ptr<gpu_lowering::GemmTarget> target =
        gpu_lowering::getGemmTarget("sm_90a");
    CodaToGPUOptions options;
    getOperation().walk([&](GemmOp op) {
      FailureOr<SmallVector<gpu_lowering::GemmVariant>> variants =
          gpu_lowering::configureGemm(op, *target, options);
      if (failed(variants))
        return signalPassFailure();
      for (const gpu_lowering::GemmVariant &variant : *variants) {
        const gpu_lowering::GemmKernelConfig &config = variant.config;
        std::string text;
        llvm::raw_string_ostream os(text);
        os << "epilogue plan of " << stringifyGemmSchedule(config.schedule)
           << " " << config.tileM << "x" << config.tileN
           << (config.epilogueOnly ? " epilogue-only" : "") << ": ";
        gpu_lowering::planEpilogue(op, config).print(os);
        op.emitRemark(StringRef(text).rtrim());
      }
    });
  }
};

} // namespace

namespace mlir::coda {
void registerTestEpiloguePlanPass() {
  PassRegistration<TestEpiloguePlanPass>();
}
} // namespace mlir::coda
