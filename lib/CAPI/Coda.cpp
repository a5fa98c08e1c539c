//===- Coda.cpp - C API of coda's dialect and passes ----------------------===//

#include "coda-c/Coda.h"

#include "coda/Conversion/Passes.h"
#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"
#include "coda/InitCoda.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Pass.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Coda, coda, mlir::coda::CodaDialect)

void mlirRegisterCodaDialects(MlirDialectRegistry registry) {
  mlir::coda::registerCodaDialects(*unwrap(registry));
}

void mlirRegisterCodaPasses(void) { mlir::coda::registerCodaPasses(); }

using namespace mlir;
using namespace mlir::coda;

#include "coda/Conversion/Passes.capi.cpp.inc"
#include "coda/Dialect/Coda/Transforms/Passes.capi.cpp.inc"
