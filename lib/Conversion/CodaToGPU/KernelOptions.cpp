//===- KernelOptions.cpp - Spellings of the kernel options ----------------===//

#include "coda/Conversion/CodaToGPU/KernelOptions.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::coda;

llvm::cl::ValuesClass mlir::coda::scheduleOptionValues() {
  return llvm::cl::values(
      clEnumValN(GemmSchedule::single, "single",
                 "one warpgroup per CTA loads, computes and writes its tile"),
      clEnumValN(GemmSchedule::warpSpecialized, "warp-specialized",
                 "128 x 256 tiles as a producer warpgroup issuing TMA and "
                 "two consumer warpgroups on WGMMA (narrower tiles: single)"),
      clEnumValN(GemmSchedule::staged, "staged",
                 "persistent warp-specialized CTAs with 128 x 128 tiles whose "
                 "producer warps 2-3 run each tile's epilogue while the "
                 "consumers compute the next"),
      clEnumValN(GemmSchedule::cooperative, "cooperative",
                 "persistent CTAs whose two consumer warpgroups run the "
                 "epilogue from their accumulator registers while the "
                 "producer loads the next tile"),
      clEnumValN(GemmSchedule::pingPong, "ping-pong",
                 "persistent CTAs whose two consumer warpgroups take 128 x "
                 "128 tiles in turn, one's epilogue under the other's K "
                 "loop"));
}

llvm::cl::ValuesClass mlir::coda::rasterOptionValues() {
  return llvm::cl::values(
      clEnumValN(RasterOrder::alongN, "along-n",
                 "bands of `swizzle` tile rows, each walked along N"),
      clEnumValN(RasterOrder::alongM, "along-m",
                 "bands of `swizzle` tile columns, each walked down M"));
}

/// The attribute's spelling of a command-line value, or "" where `name` is
/// already spelled with underscores (not a command-line spelling).
static std::string attributeSpelling(llvm::StringRef name) {
  if (name.contains('_'))
    return "";
  std::string spelled = name.str();
  std::replace(spelled.begin(), spelled.end(), '-', '_');
  return spelled;
}

std::string mlir::coda::scheduleOptionName(GemmSchedule schedule) {
  std::string name = stringifyGemmSchedule(schedule).str();
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::optional<GemmSchedule>
mlir::coda::parseScheduleOption(llvm::StringRef name) {
  return symbolizeGemmSchedule(attributeSpelling(name));
}

std::optional<RasterOrder> mlir::coda::parseRasterOption(llvm::StringRef name) {
  return symbolizeRasterOrder(attributeSpelling(name));
}
