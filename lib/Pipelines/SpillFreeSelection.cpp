//===- SpillFreeSelection.cpp - selected GEMM configurations that fit -----===//
//
// The selector's rules weigh what an epilogue holds per thread, but how many
// registers ptxas needs for an arbitrary epilogue only ptxas knows. So a
// compile that selects configurations first compiles a copy of the module to
// PTX, assembles it with `ptxas -v`, and pins every GEMM whose kernel spills
// more than two registers (or draws a C75xx performance warning) to the next
// configuration of
// getSpillFallbackConfigs, until none does or none is left.
//
//===----------------------------------------------------------------------===//

#include "SpillFreeSelection.h"

#include "coda/ABI/KernelAbi.h"
#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Per kernel that spills more than the allowance or draws a C75xx warning
/// in `report` (ptxas -v), what ptxas said of it.
llvm::StringMap<std::string> unfitKernels(StringRef report) {
  llvm::StringMap<std::string> unfit;
  StringRef current;
  SmallVector<StringRef> lines;
  report.split(lines, '\n');
  for (StringRef line : lines) {
    if (line.contains("Function properties for ")) {
      current = line.rsplit("Function properties for ").second.trim();
      continue;
    }
    size_t spills = line.find(" bytes spill stores");
    if (spills != StringRef::npos && !current.empty()) {
      StringRef count = line.take_front(spills).rsplit(' ').second;
      int64_t bytes = 0;
      if (!count.getAsInteger(10, bytes) && bytes > kSpillAllowanceBytes)
        unfit[current] = (count + " bytes of spill stores").str();
      continue;
    }
    // "... (C7515) Potential Performance Loss: ... in the function 'name'".
    if (line.contains("(C75")) {
      auto [before, quoted] = line.rsplit('\'');
      StringRef name = before.rsplit('\'').second;
      if (!name.empty())
        unfit[name] = line.drop_until([](char c) { return c == '('; }).str();
    }
  }
  return unfit;
}

/// What `ptxas -v` says of one PTX module, or failure where it does not
/// assemble (the compile proper reports why).
FailureOr<std::string> assemble(StringRef ptx, StringRef chip, StringRef ptxas,
                                StringRef ptxasOptions) {
  SmallString<128> source, cubin, report;
  if (llvm::sys::fs::createTemporaryFile("coda-spills", "ptx", source) ||
      llvm::sys::fs::createTemporaryFile("coda-spills", "cubin", cubin) ||
      llvm::sys::fs::createTemporaryFile("coda-spills", "txt", report))
    return failure();
  llvm::FileRemover removeSource(source), removeCubin(cubin),
      removeReport(report);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(source, ec);
    if (ec)
      return failure();
    os << ptx;
  }
  std::string arch = ("-arch=" + chip).str();
  SmallVector<StringRef> args = {ptxas, arch, "-v", source, "-o", cubin};
  StringRef(ptxasOptions).split(args, ' ', -1, /*KeepEmpty=*/false);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(report),
                                          StringRef(report)};
  if (llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects) != 0)
    return failure();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(report);
  if (!text)
    return failure();
  return (*text)->getBuffer().str();
}

/// A GEMM whose kernel ptxas cannot fit: what ptxas said of it and the
/// configuration it was built with.
struct Unfit {
  std::string what;
  DictionaryAttr abi;
};

/// Whether `config` is the configuration of the kernel with ABI `kernelAbi`.
bool builtWith(DictionaryAttr kernelAbi, GemmConfigAttr config) {
  auto schedule = kernelAbi.getAs<StringAttr>(::coda::abi::key::schedule);
  auto tile = kernelAbi.getAs<ArrayAttr>(::coda::abi::key::tile);
  auto cluster = kernelAbi.getAs<ArrayAttr>(::coda::abi::key::cluster);
  auto at = [](ArrayAttr array, unsigned i) {
    return cast<IntegerAttr>(array[i]).getInt();
  };
  // Both say nothing where the lowering's own choice stands.
  auto unroll = kernelAbi.getAs<IntegerAttr>(::coda::abi::key::epilogue_unroll);
  int64_t builtUnroll = unroll ? unroll.getInt() : kDefaultEpilogueUnroll;
  int64_t configUnroll = config.getEpilogueUnroll() ? config.getEpilogueUnroll()
                                                    : kDefaultEpilogueUnroll;
  return schedule && tile && cluster && builtUnroll == configUnroll &&
         schedule.getValue() == stringifyGemmSchedule(config.getSchedule()) &&
         at(tile, 0) == config.getTileM() && at(tile, 1) == config.getTileN() &&
         at(cluster, 0) == config.getClusterM();
}

/// The kernels of `module`'s GEMMs that ptxas cannot fit, by GEMM id, or
/// failure where the copy does not compile (the compile proper reports why).
FailureOr<llvm::DenseMap<int64_t, Unfit>> probe(ModuleOp module,
                                                const CodaToGPUOptions &kernels,
                                                StringRef ptxas,
                                                StringRef ptxasOptions) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  // Diagnostics of the copy are the compile proper's to report, once.
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  PassManager stage1(module.getContext(), ModuleOp::getOperationName());
  buildCodaToGemmKernelsPipeline(stage1, kernels, /*selectConfig=*/true);
  if (failed(stage1.run(*copy)))
    return failure();
  llvm::StringMap<std::pair<int64_t, DictionaryAttr>> gemmOf;
  copy->walk([&](gpu::GPUFuncOp kernel) {
    if (auto id = kernel->getAttrOfType<IntegerAttr>(kGemmIdAttrName)) {
      gemmOf[kernel.getName()] = {
          id.getInt(),
          kernel->getAttrOfType<DictionaryAttr>(kKernelAbiAttrName)};
      kernel->removeAttr(kGemmIdAttrName);
    }
  });
  PassManager stage2(module.getContext(), ModuleOp::getOperationName());
  buildCodaKernelsToBinaryPipeline(stage2, kernels, "isa", /*manifest=*/"",
                                   ptxasOptions);
  if (failed(stage2.run(*copy)))
    return failure();

  std::string report;
  WalkResult walk = copy->walk([&](gpu::BinaryOp binary) {
    for (Attribute object : binary.getObjects()) {
      FailureOr<std::string> assembled =
          assemble(cast<gpu::ObjectAttr>(object).getObject().getValue(),
                   kernels.chip, ptxas, ptxasOptions);
      if (failed(assembled))
        return WalkResult::interrupt();
      report += *assembled;
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  llvm::DenseMap<int64_t, Unfit> unfit;
  for (auto &entry : unfitKernels(report)) {
    auto gemm = gemmOf.find(entry.getKey());
    if (gemm != gemmOf.end())
      unfit[gemm->second.first] = {
          (entry.getKey() + ": " + entry.getValue()).str(),
          gemm->second.second};
  }
  return unfit;
}

} // namespace

void mlir::coda::selectSpillFreeConfigs(ModuleOp module,
                                        const CodaToGPUOptions &kernels,
                                        StringRef ptxasOptions,
                                        llvm::raw_ostream &log) {
  // The GEMMs whose configuration the selector chooses, numbered.
  SmallVector<GemmOp> gemms;
  module.walk([&](GemmOp op) {
    if (op->hasAttr(GemmConfigAttr::getAttrName()))
      return;
    op->setAttr(
        kGemmIdAttrName,
        IntegerAttr::get(IntegerType::get(op.getContext(), 64), gemms.size()));
    gemms.push_back(op);
  });
  if (gemms.empty())
    return;
  std::string ptxas = coda::findPtxas();
  if (ptxas.empty())
    log << "coda-compile: warning: no ptxas (set CUDA_HOME): the selected "
           "configurations were not checked for spills\n";
  SmallVector<GemmConfigAttr> fallbacks =
      getSpillFallbackConfigs(module.getContext());
  llvm::DenseMap<int64_t, unsigned> tried;
  while (!ptxas.empty()) {
    FailureOr<llvm::DenseMap<int64_t, Unfit>> unfit =
        probe(module, kernels, ptxas, ptxasOptions);
    if (failed(unfit))
      break;
    bool changed = false;
    for (auto &[id, kernel] : *unfit) {
      unsigned &next = tried[id];
      while (next < fallbacks.size() && kernel.abi &&
             builtWith(kernel.abi, fallbacks[next]))
        ++next;
      if (next >= fallbacks.size()) {
        // Said once; the last configuration tried stays.
        if (next++ == fallbacks.size())
          log << "coda-compile: warning: " << kernel.what
              << " in every configuration tried\n";
        continue;
      }
      log << "coda-compile: " << kernel.what << "; its GEMM takes "
          << fallbacks[next] << " instead\n";
      gemms[id]->setAttr(GemmConfigAttr::getAttrName(), fallbacks[next++]);
      changed = true;
    }
    if (!changed)
      break;
  }
  for (GemmOp op : gemms)
    op->removeAttr(kGemmIdAttrName);
}
