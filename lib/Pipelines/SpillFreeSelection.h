//===- SpillFreeSelection.h - selected GEMM configurations that fit -*- C++
//-*-===//

#ifndef CODA_LIB_PIPELINES_SPILLFREESELECTION_H
#define CODA_LIB_PIPELINES_SPILLFREESELECTION_H

#include "coda/Conversion/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::coda {

/// Pins each coda.gemm of `module` without a configuration whose selected
/// kernel spills registers or draws a C75xx warning in ptxas to the next
/// spill fallback configuration, until every kernel fits or no fallback is
/// left; what it changes is said on `log`. The GEMMs' configurations are
/// otherwise left to the selector.
void selectSpillFreeConfigs(ModuleOp module, const CodaToGPUOptions &kernels,
                            StringRef ptxasOptions, llvm::raw_ostream &log);

} // namespace mlir::coda

#endif // CODA_LIB_PIPELINES_SPILLFREESELECTION_H
