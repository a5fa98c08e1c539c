//===- Compile.h - compile a module to a directory of GPU binaries -*- C++ -*-===//
//
// What coda-compile and the Python package's `compile` share.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_PIPELINES_COMPILE_H
#define CODA_PIPELINES_COMPILE_H

#include "coda/Conversion/Passes.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace mlir::coda {

struct CompileOptions {
  /// Run --coda-fuse first (linalg input) and write fusion-report.txt.
  /// Without it, a linalg matrix product left in the input is an error
  /// (--coda-to-gpu refuses it rather than compile a loop kernel).
  bool fuse = true;
  /// Apply MLIR's pass manager and timing command-line options
  /// (--mlir-timing, --mlir-print-ir-after-all, crash reproducers, ...): for
  /// tools that registered them (registerPassManagerCLOptions,
  /// registerDefaultTimingManagerCLOptions).
  bool applyCommandLineOptions = false;
  /// Run --coda-derive-backward (after fusing): the kernels of each
  /// function's backward program too.
  bool deriveBackward = false;
  /// With deriveBackward: forward functions also return what their backward
  /// reads instead of recomputing (--coda-derive-backward=save=1).
  bool saveForBackward = false;
  /// bin (cubin), isa (PTX) or fatbin.
  std::string format = "bin";
  /// The GEMM kernels' chip and configuration options (--coda-to-gpu's).
  CodaToGPUOptions kernels;
  /// Whether a tile, stages, schedule or cluster option of `kernels` was
  /// given by the user rather than left at its default.
  bool scheduleOptionsGiven = false;
  /// Pin each GEMM's configuration by --coda-select-gemm-config's measured
  /// rules; `kernels` serves the GEMMs they do not cover (all GEMMs when
  /// false). Unset: select unless scheduleOptionsGiven, so that a schedule
  /// asked for by option applies to every GEMM.
  std::optional<bool> selectConfig;
  /// With selection: assemble the selected kernels with ptxas first and
  /// move each GEMM whose kernel spills to a configuration that does not
  /// (selectSpillFreeConfigs).
  bool checkSpills = true;
  std::string ptxasOptions;
};

/// Compiles `module` in place and writes `directory`: <module>.cubin (or .ptx,
/// .fatbin) per GPU module, manifest.json, host.mlir and, with `fuse`,
/// fusion-report.txt. Progress lines go to `log`; errors are reported as
/// diagnostics (or on `log` for file system errors). Returns the written paths.
FailureOr<SmallVector<std::string>>
compileToDirectory(ModuleOp module, const CompileOptions &options,
                   StringRef directory, llvm::raw_ostream &log);

} // namespace mlir::coda

#endif // CODA_PIPELINES_COMPILE_H
