//===- downstream-opt.cpp - an opt tool of a project that uses coda -------===//
//
// Upstream's dialects and passes plus coda's, registered through the
// installed package's headers and libraries.
//
//===----------------------------------------------------------------------===//

#include "coda/InitCoda.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::coda::registerCodaPasses();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::coda::registerCodaDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "an opt tool built against coda's package\n", registry));
}
