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
