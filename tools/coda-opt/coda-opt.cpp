//===- coda-opt.cpp - coda's optimizer driver -----------------------------===//
//
// mlir-opt with every upstream dialect, pass and GPU translation plus coda's
// dialect, passes and pipelines.
//
//===----------------------------------------------------------------------===//

#include "coda/InitCoda.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace mlir::coda {
/// Test-only passes from test/lib (`--coda-test-*`).
void registerCodaTestPasses();
} // namespace mlir::coda

int main(int argc, char **argv) {
  mlir::coda::configureCudaToolkit();
  mlir::registerAllPasses();
  mlir::coda::registerCodaPasses();
  mlir::coda::registerCodaTestPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::coda::registerCodaDialects(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "coda optimizer driver\n", registry));
}
