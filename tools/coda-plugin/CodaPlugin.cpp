//===- CodaPlugin.cpp - coda as a plugin for stock mlir-opt ---------------===//
//
// Exposes the coda dialect and passes to an mlir-opt built elsewhere:
//   mlir-opt --load-dialect-plugin=CodaPlugin.so --load-pass-plugin=CodaPlugin.so
//
//===----------------------------------------------------------------------===//

#include "coda/InitCoda.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "CodaDialect", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            mlir::coda::registerCodaDialects(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "CodaPasses", LLVM_VERSION_STRING,
          []() { mlir::coda::registerCodaPasses(); }};
}
