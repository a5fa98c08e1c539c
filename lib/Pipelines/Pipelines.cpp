//===- Pipelines.cpp - coda's named pass pipelines ------------------------===//

#include "coda/Pipelines/Pipelines.h"

#include "coda/Conversion/CodaToLinalg/CodaToLinalg.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::coda::buildCodaToLLVMCPUPipeline(OpPassManager &pm) {
  pm.addPass(createCodaLowerToLinalg());
  pm.addPass(createCanonicalizerPass());
  bufferization::OneShotBufferizePassOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Ops without a libm or LLVM counterpart (rsqrt, ...) become arith/math.
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"rsqrt", "tan", "ctlz", "fpowi", "ipowi", "roundeven"};
  pm.addPass(math::createMathExpandOpsPass(expand));
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::coda::registerCodaPipelines() {
  PassPipelineRegistration<>(
      "coda-to-llvm-cpu",
      "Lower coda (through its reference lowering) and the rest of the module "
      "to the LLVM dialect for running on the CPU",
      buildCodaToLLVMCPUPipeline);
}
