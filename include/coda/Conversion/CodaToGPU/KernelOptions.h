//===- KernelOptions.h - Spellings of the kernel options -------*- C++ -*-===//
//
// The command-line spellings of the GEMM kernels' enum options, declared
// once for --coda-to-gpu, the coda-to-gpu-binary pipeline, coda-compile and
// the Python module: each is the attribute's name (#coda.gemm_config) with
// hyphens for underscores, as command-line options are spelled.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_CONVERSION_CODATOGPU_KERNELOPTIONS_H
#define CODA_CONVERSION_CODATOGPU_KERNELOPTIONS_H

#include "coda/Dialect/Coda/IR/Coda.h"

#include "llvm/Support/CommandLine.h"

#include <optional>

namespace mlir::coda {

/// The values of a `schedule` option: single, warp-specialized, staged,
/// cooperative, ping-pong.
llvm::cl::ValuesClass scheduleOptionValues();
/// The values of a `raster` option: along-n, along-m.
llvm::cl::ValuesClass rasterOptionValues();

/// `schedule` as the command line spells it (ping-pong), for diagnostics.
std::string scheduleOptionName(GemmSchedule schedule);

/// The schedule or raster order spelled `name` as on the command line, or
/// none where no value is spelled so.
std::optional<GemmSchedule> parseScheduleOption(llvm::StringRef name);
std::optional<RasterOrder> parseRasterOption(llvm::StringRef name);

} // namespace mlir::coda

#endif // CODA_CONVERSION_CODATOGPU_KERNELOPTIONS_H
