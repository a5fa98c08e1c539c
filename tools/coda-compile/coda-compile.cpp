//===- coda-compile.cpp - ahead-of-time compiler for coda programs --------===//
//
// MLIR in (linalg, fused first, or coda), a directory out: the GPU
// binary of every gpu.module (<module>.cubin, or <module>.ptx with
// --format=isa), manifest.json (the kernels' ABI, docs/KernelABI.md),
// host.mlir (the lowered host code, which shows the launch order) and
// fusion-report.txt (unless --fuse=false).
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/KernelOptions.h"
#include "coda/InitCoda.h"
#include "coda/Pipelines/Compile.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

/// coda-compile's own options, and MLIR's (timing, IR printing, crash
/// reproducers, diagnostics): --help shows these two categories only
/// (LLVM's own stay hidden, also from --help-hidden).
static cl::OptionCategory codaCategory("coda-compile options");
static cl::OptionCategory mlirCategory("MLIR options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.mlir>"),
                                      cl::Required, cl::cat(codaCategory));
static cl::opt<std::string> outputDir("o", cl::desc("output directory"),
                                      cl::value_desc("dir"), cl::Required,
                                      cl::cat(codaCategory));
static cl::opt<bool>
    fuse("fuse",
         cl::desc("run --coda-fuse first, turning linalg matrix products and "
                  "the memory-bound ops around them into coda.gemm kernels "
                  "(default; --fuse=false compiles the input as written, "
                  "and a linalg matrix product left is then an error)"),
         cl::init(true), cl::cat(codaCategory));
static cl::opt<bool>
    deriveBackward("derive-backward",
                   cl::desc("also compile each function's backward program "
                            "(--coda-derive-backward)"),
                   cl::cat(codaCategory));
static cl::opt<bool> saveForBackward(
    "save-for-backward",
    cl::desc("with --derive-backward: forward functions also return the "
             "intermediate results and accumulators their backward reads, "
             "instead of it recomputing them (--coda-derive-backward=save=1)"),
    cl::cat(codaCategory));
static cl::opt<std::string> chip("chip", cl::desc("GPU architecture"),
                                 cl::init("sm_90a"), cl::cat(codaCategory));
static cl::opt<std::string> format("format",
                                   cl::desc("bin (cubin), isa (PTX) or fatbin"),
                                   cl::init("bin"), cl::cat(codaCategory));
static cl::opt<int64_t> tileM("tile-m", cl::desc("GEMM tile rows"),
                              cl::init(128), cl::cat(codaCategory));
static cl::opt<int64_t> tileN("tile-n", cl::desc("GEMM tile columns"),
                              cl::init(256), cl::cat(codaCategory));
static cl::opt<int64_t> stages("stages", cl::desc("TMA ring slots"),
                               cl::init(4), cl::cat(codaCategory));
static cl::opt<coda::GemmSchedule>
    schedule("schedule", cl::desc("how the warps of a kernel share its tiles"),
             coda::scheduleOptionValues(),
             cl::init(coda::GemmSchedule::warpSpecialized),
             cl::cat(codaCategory));
static cl::opt<bool> selectConfig(
    "select-config",
    cl::desc("choose each GEMM's kernel configuration by the measured rules "
             "of --coda-select-gemm-config (the default unless a tile, "
             "stages, schedule or cluster option is given; GEMMs the rules do "
             "not cover take those options)"),
    cl::init(true), cl::cat(codaCategory));
static cl::opt<bool> checkSpills(
    "check-spills",
    cl::desc("with selection, assemble the selected GEMM kernels with ptxas "
             "first and move each GEMM whose kernel spills registers to a "
             "configuration that does not"),
    cl::init(true), cl::cat(codaCategory));
static cl::opt<int64_t>
    clusterM("cluster-m",
             cl::desc("CTAs per cluster along M (1 or 2; with --schedule="
                      "cooperative or ping-pong) sharing the rhs tile "
                      "through TMA multicast"),
             cl::init(1), cl::cat(codaCategory));
static cl::opt<coda::RasterOrder> raster(
    "raster",
    cl::desc("the order in which persistent kernels take their tiles"),
    coda::rasterOptionValues(), cl::init(coda::RasterOrder::alongN),
    cl::cat(codaCategory));
static cl::opt<int64_t> swizzle("swizzle",
                                cl::desc("tiles across a raster band"),
                                cl::init(8), cl::cat(codaCategory));
static cl::opt<std::string> ptxasOptions("ptxas-options",
                                         cl::desc("extra ptxas options"),
                                         cl::init(""), cl::cat(codaCategory));

static int compile() {
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllGPUToLLVMIRTranslations(registry);
  coda::registerCodaDialects(registry);
  MLIRContext context(registry);
  // An error points at the op's line in the input; MLIR's "see current
  // operation" note would add the op in generic form, its operands unnamed
  // (--mlir-print-op-on-diagnostic asks for it).
  if (!cl::getRegisteredOptions()
           .lookup("mlir-print-op-on-diagnostic")
           ->getNumOccurrences())
    context.printOpOnDiagnostic(false);

  llvm::errs() << "coda-compile: reading " << inputFile << "\n";
  llvm::SourceMgr sourceMgr;
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << "coda-compile: cannot read " << inputFile << ": " << error
                 << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  coda::CompileOptions options;
  options.fuse = fuse;
  options.applyCommandLineOptions = true;
  options.deriveBackward = deriveBackward;
  options.saveForBackward = saveForBackward;
  options.format = format;
  options.kernels.chip = chip;
  options.kernels.tileM = tileM;
  options.kernels.tileN = tileN;
  options.kernels.stages = stages;
  options.kernels.schedule = schedule;
  options.kernels.clusterM = clusterM;
  options.kernels.raster = raster;
  options.kernels.swizzle = swizzle;
  options.scheduleOptionsGiven =
      tileM.getNumOccurrences() || tileN.getNumOccurrences() ||
      stages.getNumOccurrences() || schedule.getNumOccurrences() ||
      clusterM.getNumOccurrences() ||
      raster.getNumOccurrences() || swizzle.getNumOccurrences();
  if (selectConfig.getNumOccurrences())
    options.selectConfig = selectConfig;
  options.checkSpills = checkSpills;
  options.ptxasOptions = ptxasOptions;
  if (failed(coda::compileToDirectory(*module, options, outputDir,
                                      llvm::errs())))
    return 1;
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  coda::configureCudaToolkit();
  registerAllPasses();
  coda::registerCodaPasses();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  registerAsmPrinterCLOptions();
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.starts_with("mlir-"))
      option->addCategory(mlirCategory);
  cl::HideUnrelatedOptions({&codaCategory, &mlirCategory});
  cl::ParseCommandLineOptions(argc, argv,
                              "coda ahead-of-time compiler: MLIR to GPU "
                              "binaries and a kernel manifest\n");
  return compile();
}
