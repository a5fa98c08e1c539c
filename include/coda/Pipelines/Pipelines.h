//===- Pipelines.h - coda's named pass pipelines ----------------*- C++ -*-===//

#ifndef CODA_PIPELINES_PIPELINES_H
#define CODA_PIPELINES_PIPELINES_H

namespace mlir {
class OpPassManager;
namespace coda {

/// Reference lowering, bufferization and lowering to the LLVM dialect for
/// running coda programs on the CPU (mlir-runner, ExecutionEngine).
void buildCodaToLLVMCPUPipeline(OpPassManager &pm);

/// Registers the named pipelines (`--coda-to-llvm-cpu`).
void registerCodaPipelines();

} // namespace coda
} // namespace mlir

#endif // CODA_PIPELINES_PIPELINES_H
