//===- CodaDialect.cpp - coda dialect, types and attributes ---------------===//

#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::coda;

#include "coda/Dialect/Coda/IR/CodaDialect.cpp.inc"
#include "coda/Dialect/Coda/IR/CodaEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "coda/Dialect/Coda/IR/CodaAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "coda/Dialect/Coda/IR/CodaTypes.cpp.inc"

void CodaDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "coda/Dialect/Coda/IR/CodaOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "coda/Dialect/Coda/IR/CodaTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "coda/Dialect/Coda/IR/CodaAttrs.cpp.inc"
      >();
}

LogicalResult CodaDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  // Only the GEMM configuration is checked here; the lowering's own
  // attributes (coda.kernel, ...) belong to it.
  StringRef name = attr.getName().getValue();
  if (name != GemmConfigAttr::getAttrName())
    return success();
  if (!isa<GemmOp>(op))
    return op->emitError("'") << name << "' belongs on coda.gemm";
  auto checkSizes = [&](GemmConfigAttr config) -> LogicalResult {
    if (config.getTileM() <= 0 || config.getTileN() <= 0 ||
        config.getStages() <= 0 || config.getClusterM() <= 0 ||
        config.getSwizzle() <= 0 || config.getMaxK() < 0 ||
        config.getWaveCost() < 0 || config.getEpilogueUnroll() < 0)
      return op->emitError("'")
             << name << "' needs positive sizes, got " << config;
    return success();
  };
  if (auto config = dyn_cast<GemmConfigAttr>(attr.getValue())) {
    if (config.getMaxK() != 0 || config.getWaveCost() != 0)
      return op->emitError("'")
             << name << "' bounds K (max_k) or weighs waves (wave_cost) "
             << "only in an array of configurations, got " << config;
    return checkSizes(config);
  }
  auto configs = dyn_cast<ArrayAttr>(attr.getValue());
  if (!configs || configs.size() < 2 ||
      !llvm::all_of(configs, llvm::IsaPred<GemmConfigAttr>))
    return op->emitError("'")
           << name << "' must be a #coda.gemm_config or an array of two or "
           << "more dispatched by K or by waves";
  // Dispatched by waves: every configuration weighs its waves, none bounds K.
  if (cast<GemmConfigAttr>(configs[0]).getWaveCost() != 0) {
    for (Attribute element : configs) {
      auto config = cast<GemmConfigAttr>(element);
      if (failed(checkSizes(config)))
        return failure();
      if (config.getWaveCost() == 0 || config.getMaxK() != 0)
        return op->emitError("'")
               << name << "': in an array dispatched by waves every "
               << "configuration has a wave_cost and none a max_k, got "
               << config;
    }
    return success();
  }
  int64_t previous = 0;
  for (auto [i, element] : llvm::enumerate(configs)) {
    auto config = cast<GemmConfigAttr>(element);
    if (failed(checkSizes(config)))
      return failure();
    if (config.getWaveCost() != 0)
      return op->emitError("'")
             << name << "': an array dispatched by K weighs no waves "
             << "(wave_cost), got " << config;
    bool last = i + 1 == configs.size();
    if (last && config.getMaxK() != 0)
      return op->emitError("'")
             << name << "': the last configuration takes every larger K "
             << "and has no max_k, got " << config;
    if (!last && config.getMaxK() <= previous)
      return op->emitError("'")
             << name << "': every configuration but the last needs a max_k "
             << "above the previous one's, got " << config;
    previous = config.getMaxK();
  }
  return success();
}

SmallVector<GemmConfigAttr> mlir::coda::getPinnedGemmConfigs(Operation *op) {
  Attribute attr = op->getAttr(GemmConfigAttr::getAttrName());
  if (auto config = dyn_cast_if_present<GemmConfigAttr>(attr))
    return {config};
  SmallVector<GemmConfigAttr> configs;
  if (auto array = dyn_cast_if_present<ArrayAttr>(attr))
    for (Attribute element : array)
      configs.push_back(cast<GemmConfigAttr>(element));
  return configs;
}

TypedAttr mlir::coda::getReductionIdentity(ReductionKind kind,
                                           FloatType type) {
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  switch (kind) {
  case ReductionKind::sum:
    return FloatAttr::get(type, llvm::APFloat::getZero(semantics));
  case ReductionKind::max:
  case ReductionKind::logsumexp:
    return FloatAttr::get(type,
                          llvm::APFloat::getInf(semantics, /*Negative=*/true));
  }
  llvm_unreachable("unknown reduction kind");
}
