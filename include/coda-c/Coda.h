/*===-- coda-c/Coda.h - C API of coda's dialect and passes --------*- C -*-===*\
|*                                                                            *|
|* The C interface a downstream compiler (or a binding) uses to load coda's   *|
|* dialect into its context and to run coda's passes and pipelines, in the    *|
|* style of MLIR's own C API (mlir-c/).                                       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef CODA_C_CODA_H
#define CODA_C_CODA_H

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The coda dialect: `mlirGetDialectHandle__coda__()`.
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Coda, coda);

/// Adds to `registry` the coda dialect, the dialects its passes produce and
/// the interface models its bufferization needs (what coda-opt registers for
/// coda).
MLIR_CAPI_EXPORTED void mlirRegisterCodaDialects(MlirDialectRegistry registry);

/// Registers every coda pass and named pipeline (`coda-fuse`,
/// `coda-to-gpu`, ...) with the global registry, so that
/// `mlirParsePassPipeline` accepts them.
MLIR_CAPI_EXPORTED void mlirRegisterCodaPasses(void);

#ifdef __cplusplus
}
#endif

/* One constructor and one registration function per pass, generated from
   the pass definitions: mlirCreateCodaTransformsCodaFuse(), ... */
#include "coda/Conversion/Passes.capi.h.inc"
#include "coda/Dialect/Coda/Transforms/Passes.capi.h.inc"

#endif // CODA_C_CODA_H
