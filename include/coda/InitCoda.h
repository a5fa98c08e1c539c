//===- InitCoda.h - register coda's dialects and passes ---------*- C++ -*-===//
//
// The one place coda-opt, the mlir-opt plugin and the Python module register
// what coda provides.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_INITCODA_H
#define CODA_INITCODA_H

namespace mlir {
class DialectRegistry;
namespace coda {

/// Adds the coda dialect (and the dialects its passes produce) to `registry`.
void registerCodaDialects(DialectRegistry &registry);

/// Registers coda's passes and named pipelines with the global registry.
void registerCodaPasses();

/// Points MLIR's NVVM serializer at the CUDA toolkit when no CUDA_ROOT,
/// CUDA_HOME or CUDA_PATH is set: the toolkit that holds the ptxas findPtxas
/// finds. Without it libdevice (exp, log, ...) would not be
/// linked and the PTX would call undefined functions.
void configureCudaToolkit();

} // namespace coda
} // namespace mlir

#endif // CODA_INITCODA_H
