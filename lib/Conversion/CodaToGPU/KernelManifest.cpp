//===- KernelManifest.cpp - the coda kernels' ABI as JSON -----------------===//

#include "GemmKernel.h"

#include "coda/ABI/KernelAbi.h"
#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAEXPORTKERNELMANIFEST
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
namespace key = ::coda::abi::key;

namespace {

llvm::json::Value toJson(Attribute attr) {
  if (auto dict = dyn_cast<DictionaryAttr>(attr)) {
    llvm::json::Object object;
    for (NamedAttribute entry : dict)
      object[entry.getName().strref()] = toJson(entry.getValue());
    return object;
  }
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    llvm::json::Array values;
    for (Attribute element : array)
      values.push_back(toJson(element));
    return values;
  }
  if (auto b = dyn_cast<BoolAttr>(attr))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getInt();
  if (auto s = dyn_cast<StringAttr>(attr))
    return s.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

struct CodaExportKernelManifestPass
    : mlir::coda::impl::CodaExportKernelManifestBase<
          CodaExportKernelManifestPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::json::Array kernels;
    getOperation().walk([&](gpu::GPUFuncOp kernel) {
      auto abi =
          kernel->getAttrOfType<DictionaryAttr>(mlir::coda::kKernelAbiAttrName);
      if (!abi)
        return;
      llvm::json::Object entry = std::move(*toJson(abi).getAsObject());
      entry[key::name] = kernel.getName().str();
      entry[key::module] =
          kernel->getParentOfType<gpu::GPUModuleOp>().getName().str();
      if (kernel->hasAttr(mlir::coda::kDependentLaunchAttrName))
        entry[key::dependent_launch] = true;
      kernels.push_back(std::move(entry));
    });
    llvm::json::Array functions;
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        functions.push_back(
            mlir::coda::gpu_lowering::buildHostProgram(function, kernels));
    llvm::json::Object manifest{
        {key::format, std::string(::coda::abi::kFormat)},
        {key::version, ::coda::abi::kVersion},
        {key::chip, chip},
        {key::kernels, std::move(kernels)},
        {key::functions, std::move(functions)}};
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
    if (!file) {
      getOperation().emitError()
          << "cannot write the kernel manifest: " << error;
      return signalPassFailure();
    }
    file->os() << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)))
               << "\n";
    file->keep();
  }
};

} // namespace
