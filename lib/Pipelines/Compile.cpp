//===- Compile.cpp - compile a module to a directory of GPU binaries ------===//

#include "coda/Pipelines/Compile.h"
#include "SpillFreeSelection.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static LogicalResult writeFile(StringRef path, StringRef data,
                               llvm::raw_ostream &log) {
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
  if (!file) {
    log << "coda-compile: cannot write " << path << ": " << error << "\n";
    return failure();
  }
  file->os() << data;
  file->keep();
  return success();
}

FailureOr<SmallVector<std::string>>
mlir::coda::compileToDirectory(ModuleOp module, const CompileOptions &options,
                               StringRef directory, llvm::raw_ostream &log) {
  if (options.saveForBackward && !options.deriveBackward) {
    log << "coda-compile: saving for the backward needs the backward "
           "(--derive-backward)\n";
    return failure();
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(directory)) {
    log << "coda-compile: cannot create " << directory << ": " << ec.message()
        << "\n";
    return failure();
  }
  auto pathIn = [&](const Twine &name) {
    SmallString<256> path(directory);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  SmallVector<std::string> written;

  // Runs the passes `build` adds, with MLIR's command-line pass manager and
  // timing options where asked for (each run prints its timing report as it
  // ends).
  auto run = [&](function_ref<LogicalResult(PassManager &)> build) {
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    if (options.applyCommandLineOptions) {
      if (failed(applyPassManagerCLOptions(pm))) {
        log << "coda-compile: invalid pass manager options\n";
        return failure();
      }
      applyDefaultTimingPassManagerCLOptions(pm);
    }
    if (failed(build(pm)))
      return failure();
    if (failed(pm.run(module))) {
      log << "coda-compile: compilation failed\n";
      return failure();
    }
    return success();
  };
  log << "coda-compile: compiling for " << options.kernels.chip << " ("
      << options.format << ")\n";
  LogicalResult front = run([&](PassManager &pm) {
    if (options.fuse) {
      std::string report = pathIn("fusion-report.txt");
      if (failed(
              parsePassPipeline("coda-fuse{report-file=" + report + "}", pm))) {
        log << "coda-compile: cannot build the fusion pipeline\n";
        return failure();
      }
      written.push_back(report);
    }
    if (options.deriveBackward) {
      CodaDeriveBackwardOptions derive;
      derive.save = options.saveForBackward;
      pm.addPass(createCodaDeriveBackward(derive));
    }
    return success();
  });
  if (failed(front))
    return failure();
  bool selectConfig =
      options.selectConfig.value_or(!options.scheduleOptionsGiven);
  if (selectConfig && options.checkSpills)
    selectSpillFreeConfigs(module, options.kernels, options.ptxasOptions, log);
  LogicalResult gpu = run([&](PassManager &pm) {
    buildCodaToGPUBinaryPipeline(pm, options.kernels, selectConfig,
                                 options.format, pathIn("manifest.json"),
                                 options.ptxasOptions);
    return success();
  });
  if (failed(gpu))
    return failure();

  StringRef extension = options.format == "isa"   ? ".ptx"
                        : options.format == "bin" ? ".cubin"
                                                  : ".fatbin";
  WalkResult walk = module.walk([&](gpu::BinaryOp binary) {
    for (Attribute attr : binary.getObjects()) {
      StringRef data = cast<gpu::ObjectAttr>(attr).getObject().getValue();
      if (options.format == "isa" && data.contains(".extern .func") &&
          data.contains("__nv_")) {
        log << "coda-compile: " << binary.getName()
            << " calls libdevice functions that were not linked; set "
               "CUDA_HOME to the CUDA toolkit\n";
        return WalkResult::interrupt();
      }
      std::string path = pathIn(binary.getName() + extension);
      if (failed(writeFile(path, data, log)))
        return WalkResult::interrupt();
      log << "coda-compile: wrote " << path << "\n";
      written.push_back(path);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (written.empty())
    log << "coda-compile: warning: the input has no GPU code\n";

  std::string host;
  llvm::raw_string_ostream os(host);
  module.print(os, OpPrintingFlags().elideLargeElementsAttrs());
  std::string hostPath = pathIn("host.mlir");
  if (failed(writeFile(hostPath, host, log)))
    return failure();
  log << "coda-compile: wrote " << pathIn("manifest.json") << " and "
      << hostPath << "\n";
  written.push_back(pathIn("manifest.json"));
  written.push_back(hostPath);
  return written;
}
