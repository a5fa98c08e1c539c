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
  auto config = dyn_cast<GemmConfigAttr>(attr.getValue());
  if (!config)
    return op->emitError("'") << name << "' must be a #coda.gemm_config";
  if (config.getTileM() <= 0 || config.getTileN() <= 0 ||
      config.getStages() <= 0 || config.getClusterM() <= 0)
    return op->emitError("'")
           << name << "' needs positive sizes, got " << config;
  return success();
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
