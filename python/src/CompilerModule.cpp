//===- CompilerModule.cpp - Python bindings to the coda compiler ----------===//
//
// `coda._coda_compiler`: parse and verify MLIR, run pass pipelines. Errors are
// collected from MLIR's diagnostics and raised as Python exceptions only after
// control has left MLIR (exceptions never unwind through MLIR frames).
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/KernelOptions.h"
#include "coda/InitCoda.h"
#include "coda/Pipelines/Compile.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/raw_ostream.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

namespace py = pybind11;
using namespace mlir;

namespace {

/// Raised for IR that does not parse or verify, or a pipeline that fails.
struct CompilerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An MLIR context with every upstream dialect and coda, collecting every
/// diagnostic as "loc: severity: message" lines.
class Session {
public:
  Session() : context(makeRegistry()) {
    context.getDiagEngine().registerHandler([this](Diagnostic &diag) {
      llvm::raw_string_ostream os(diagnostics);
      os << diag.getLocation() << ": "
         << (diag.getSeverity() == DiagnosticSeverity::Error ? "error"
                                                             : "note")
         << ": " << diag << "\n";
      for (Diagnostic &note : diag.getNotes())
        os << note.getLocation() << ": note: " << note << "\n";
    });
  }

  /// Parses and verifies `source`; on failure returns nothing.
  OwningOpRef<ModuleOp> parse(const std::string &source) {
    return parseSourceString<ModuleOp>(source, &context,
                                       /*sourceName=*/"<python>");
  }

  /// Runs `pipeline` (textual pass pipeline) on `module`.
  LogicalResult run(ModuleOp module, const std::string &pipeline) {
    std::string errors;
    llvm::raw_string_ostream errorStream(errors);
    FailureOr<OpPassManager> parsed = parsePassPipeline(pipeline, errorStream);
    if (failed(parsed)) {
      diagnostics += "invalid pass pipeline '" + pipeline + "': " + errors;
      return failure();
    }
    // Anchor the pass manager where the parsed pipeline is anchored, or the
    // passes would nest one level too deep and never run.
    PassManager pm(&context, parsed->getOpAnchorName());
    static_cast<OpPassManager &>(pm) = std::move(*parsed);
    return pm.run(module);
  }

  [[noreturn]] void fail(const std::string &what) {
    std::string message = what;
    if (!diagnostics.empty())
      message += ":\n" + diagnostics;
    diagnostics.clear();
    throw CompilerError(message);
  }

private:
  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    registerAllDialects(registry);
    registerAllExtensions(registry);
    registerAllGPUToLLVMIRTranslations(registry);
    coda::registerCodaDialects(registry);
    return registry;
  }

  MLIRContext context;
  std::string diagnostics;
};

std::string print(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

std::string runPipeline(const std::string &source,
                        const std::string &pipeline) {
  Session session;
  OwningOpRef<ModuleOp> module = session.parse(source);
  if (!module)
    session.fail("the input does not parse or verify");
  if (failed(session.run(*module, pipeline)))
    session.fail("the pipeline failed");
  return print(*module);
}

std::string verify(const std::string &source) {
  Session session;
  OwningOpRef<ModuleOp> module = session.parse(source);
  if (!module)
    session.fail("the input does not parse or verify");
  return print(*module);
}

std::vector<std::string>
compile(const std::string &source, const std::string &directory, bool fuse,
        bool deriveBackward, bool saveForBackward, const std::string &chip,
        const std::string &format, std::optional<int64_t> tileM,
        std::optional<int64_t> tileN, std::optional<int64_t> stages,
        std::optional<std::string> schedule, std::optional<int64_t> clusterM, std::optional<std::string> raster,
        std::optional<int64_t> swizzle, std::optional<bool> selectConfig,
        const std::string &ptxasOptions) {
  Session session;
  OwningOpRef<ModuleOp> module = session.parse(source);
  if (!module)
    session.fail("the input does not parse or verify");
  coda::CompileOptions options;
  options.fuse = fuse;
  options.deriveBackward = deriveBackward;
  options.saveForBackward = saveForBackward;
  options.kernels.chip = chip;
  options.format = format;
  // Options left as None keep coda-compile's defaults.
  auto take = [&](auto &slot, const auto &given) {
    if (!given)
      return;
    slot = *given;
    options.scheduleOptionsGiven = true;
  };
  take(options.kernels.tileM, tileM);
  take(options.kernels.tileN, tileN);
  take(options.kernels.stages, stages);
  if (schedule) {
    std::optional<coda::GemmSchedule> value =
        coda::parseScheduleOption(*schedule);
    if (!value)
      session.fail("schedule must be 'single', 'warp-specialized', 'staged', "
                   "'cooperative' or 'ping-pong', got '" +
                   *schedule + "'");
    take(options.kernels.schedule, value);
  }
  take(options.kernels.clusterM, clusterM);
  if (raster) {
    std::optional<coda::RasterOrder> order = coda::parseRasterOption(*raster);
    if (!order)
      session.fail("raster must be 'along-n' or 'along-m', got '" + *raster +
                   "'");
    take(options.kernels.raster, order);
  }
  take(options.kernels.swizzle, swizzle);
  options.selectConfig = selectConfig;
  options.ptxasOptions = ptxasOptions;
  std::string log;
  llvm::raw_string_ostream logStream(log);
  FailureOr<SmallVector<std::string>> written =
      coda::compileToDirectory(*module, options, directory, logStream);
  if (failed(written))
    session.fail("compilation failed\n" + log);
  return std::vector<std::string>(written->begin(), written->end());
}

} // namespace

PYBIND11_MODULE(_coda_compiler, m) {
  m.doc() = "coda compiler: parse, verify and run pass pipelines on MLIR";
  coda::configureCudaToolkit();
  registerAllPasses();
  coda::registerCodaPasses();

  static py::exception<CompilerError> compilerError(m, "CompilerError");
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error)
        std::rethrow_exception(error);
    } catch (const CompilerError &e) {
      compilerError(e.what());
    }
  });

  m.attr("SPILL_ALLOWANCE_BYTES") = coda::kSpillAllowanceBytes;
  m.def("find_ptxas", &coda::findPtxas,
        "The ptxas coda-compile assembles and checks spills with ('' if "
        "none).");
  m.def("run_pipeline", &runPipeline, py::arg("source"), py::arg("pipeline"),
        "Parse `source`, run the textual pass pipeline (for example "
        "'builtin.module(coda-lower-to-linalg)') and return the printed IR.");
  m.def("compile", &compile, py::arg("source"), py::arg("directory"),
        py::arg("fuse") = true, py::arg("derive_backward") = false,
        py::arg("save_for_backward") = false, py::arg("chip") = "sm_90a",
        py::arg("format") = "bin", py::arg("tile_m") = py::none(),
        py::arg("tile_n") = py::none(), py::arg("stages") = py::none(),
        py::arg("schedule") = py::none(), py::arg("cluster_m") = py::none(),
        py::arg("raster") = py::none(), py::arg("swizzle") = py::none(),
        py::arg("select_config") = py::none(), py::arg("ptxas_options") = "",
        "Compile `source` for the GPU into `directory` (what coda-compile "
        "does, its options by the same names): GPU binaries, manifest.json, "
        "host.mlir and fusion-report.txt (fuse=False: the input as written, "
        "where a linalg matrix product is an error); with "
        "derive_backward=True each function's backward program too "
        "(save_for_backward: the forward returns what the backward reads). "
        "Each GEMM takes the configuration of --coda-select-gemm-config's "
        "rules unless a tile, stages, schedule or cluster option is given "
        "(or select_config=False). Returns the written paths.");
  m.def("verify", &verify, py::arg("source"),
        "Parse and verify `source`; return it printed in canonical form.");
}
