//===- InitCoda.cpp - register coda's dialects and passes -----------------===//

#include "coda/InitCoda.h"

#include "coda/Conversion/Passes.h"
#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Transforms/BufferizableOpInterfaceImpl.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

void mlir::coda::registerCodaDialects(DialectRegistry &registry) {
  registry.insert<CodaDialect, arith::ArithDialect, math::MathDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
}

void mlir::coda::registerCodaPasses() {
  registerCodaConversionPasses();
  registerCodaTransformsPasses();
  registerCodaPipelines();
}

void mlir::coda::configureCudaToolkit() {
  for (const char *var : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (std::getenv(var))
      return;
  std::string ptxas = findPtxas();
  if (ptxas.empty())
    return;
  std::string root =
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(ptxas)).str();
  ::setenv("CUDA_HOME", root.c_str(), /*overwrite=*/0);
}
