//===- Pipelines.cpp - coda's named pass pipelines ------------------------===//

#include "coda/Pipelines/Pipelines.h"

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Conversion/CodaToLinalg/CodaToLinalg.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// Whether `chip` (sm_NN[a]) has griddepcontrol: sm_90 and later.
static bool hasGridDependencyControl(StringRef chip) {
  unsigned arch = 0;
  return chip.consume_front("sm_") &&
         !chip.take_while(llvm::isDigit).getAsInteger(10, arch) && arch >= 90;
}

void mlir::coda::buildCodaToLLVMCPUPipeline(OpPassManager &pm) {
  pm.addPass(createCodaSimplifyMath());
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
  // Arithmetic on types the CPU has no instructions for (the 8-bit floats
  // of FP8 GEMMs) becomes calls to MLIR's APFloat runtime library
  // (libmlir_apfloat_wrappers), exact as LLVM's APFloat is.
  pm.addPass(createArithToAPFloatConversionPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::coda::buildCodaToGPUBinaryPipeline(
    OpPassManager &pm, const CodaToGPUBinaryOptions &options) {
  CodaToGPUOptions kernels;
  kernels.chip = options.chip;
  kernels.tileM = options.tileM;
  kernels.tileN = options.tileN;
  kernels.stages = options.stages;
  kernels.schedule = options.schedule;
  kernels.clusterM = options.clusterM;
  buildCodaToGPUBinaryPipeline(pm, kernels, options.selectConfig,
                               options.format, options.manifest,
                               options.ptxasOptions);
}

void mlir::coda::buildCodaToGPUBinaryPipeline(
    OpPassManager &pm, const CodaToGPUOptions &kernels, bool selectConfig,
    StringRef format, StringRef manifest, StringRef ptxasOptions) {
  buildCodaToGemmKernelsPipeline(pm, kernels, selectConfig);
  buildCodaKernelsToBinaryPipeline(pm, kernels, format, manifest, ptxasOptions);
}

void mlir::coda::buildCodaToGemmKernelsPipeline(OpPassManager &pm,
                                                const CodaToGPUOptions &kernels,
                                                bool selectConfig) {
  pm.addPass(createCodaSimplifyMath());
  pm.addNestedPass<func::FuncOp>(createCodaSplitRowReductions());
  bufferization::OneShotBufferizePassOptions bufferization;
  bufferization.bufferizeFunctionBoundaries = true;
  bufferization.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferization));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCodaPrepareHostProgram());

  if (selectConfig)
    pm.addPass(createCodaSelectGemmConfig());
  pm.addPass(createCodaToGPU(kernels));
}

void mlir::coda::buildCodaKernelsToBinaryPipeline(
    OpPassManager &pm, const CodaToGPUOptions &kernels, StringRef format,
    StringRef manifest, StringRef ptxasOptions) {
  // What is left (partial finishes, statistics, weight preparation) becomes
  // plain parallel-loop kernels: a block of 128 threads per 128 iterations
  // of the innermost dimension.
  pm.addPass(createCodaLowerToLinalg());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createCodaTileParallelLoops());
  pm.addNestedPass<func::FuncOp>(createGpuMapParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  pm.addPass(createCodaCheckGPUMapping());
  pm.addPass(createCanonicalizerPass());

  // Ops without an NVVM counterpart become arith/math first.
  math::MathExpandOpsPassOptions expand;
  expand.opMnemonics = {"tan", "ctlz", "fpowi", "ipowi", "roundeven"};
  pm.addPass(math::createMathExpandOpsPass(expand));

  // Upstream's gpu-lower-to-nvvm-pipeline (MLIR 22), pass for pass, with
  // the outlining first (the manifest then sees every kernel and the host
  // code before its TMA descriptors are lowered) and --coda-tensormap-params
  // after the kernels' conversion to NVVM: the GEMM kernels take their TMA
  // descriptors by value.
  pm.addPass(createGpuKernelOutliningPass());
  if (hasGridDependencyControl(kernels.chip))
    pm.addNestedPass<gpu::GPUModuleOp>(createCodaDependentLaunch());
  if (!manifest.empty()) {
    CodaExportKernelManifestOptions exported;
    exported.path = manifest.str();
    exported.chip = kernels.chip;
    pm.addPass(createCodaExportKernelManifest(exported));
  }
  pm.addNestedPass<gpu::GPUModuleOp>(createCodaFp8ToNVVM());
  pm.addNestedPass<gpu::GPUModuleOp>(createCodaFastMathToNVVM());
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createConvertVectorToSCFPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = kernels.chip;
  target.features = "+ptx80";
  target.optLevel = 3;
  target.cmdOptions = ptxasOptions.str();
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertIndexToLLVMPassOptions index;
  index.indexBitwidth = 64;
  pm.addPass(createConvertIndexToLLVMPass(index));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.indexBitwidth = 64;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(toNVVM));
  pm.addNestedPass<gpu::GPUModuleOp>(createCodaTensorMapParams());
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createCSEPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());

  pm.addPass(createGpuToLLVMConversionPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = format.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::coda::registerCodaPipelines() {
  PassPipelineRegistration<CodaToGPUBinaryOptions>(
      "coda-to-gpu-binary",
      "Compile coda (or fused linalg on tensors) for the GPU: TMA + WGMMA "
      "kernels for every coda.gemm, simple kernels for the rest, serialized "
      "to PTX or a cubin",
      [](OpPassManager &pm, const CodaToGPUBinaryOptions &options) {
        buildCodaToGPUBinaryPipeline(pm, options);
      });
  PassPipelineRegistration<>(
      "coda-to-llvm-cpu",
      "Lower coda (through its reference lowering) and the rest of the module "
      "to the LLVM dialect for running on the CPU",
      buildCodaToLLVMCPUPipeline);
}
