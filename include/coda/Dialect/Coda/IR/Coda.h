//===- Coda.h - coda dialect ------------------------------------*- C++ -*-===//
//
// The coda dialect, its types, attributes and operations.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_IR_CODA_H
#define CODA_DIALECT_CODA_IR_CODA_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "coda/Dialect/Coda/IR/CodaDialect.h.inc"
#include "coda/Dialect/Coda/IR/CodaEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "coda/Dialect/Coda/IR/CodaAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "coda/Dialect/Coda/IR/CodaTypes.h.inc"

#define GET_OP_CLASSES
#include "coda/Dialect/Coda/IR/CodaOps.h.inc"

namespace mlir::coda {
/// The identity element of a reduction of `kind` over `type`.
TypedAttr getReductionIdentity(ReductionKind kind, FloatType type);

/// The discardable attribute naming what a coda.gemm or coda.reduce_partials
/// computes within its function, for callers that launch kernels one by one
/// (a string; the kernel manifest's `role`). --coda-derive-backward names
/// each kernel of a backward function: `forward:gemm<j>` and
/// `forward:finish<k>` (the forward function's j-th GEMM or k-th finish,
/// recomputed), `adjoint:gemm<j>` (the kernel that writes GEMM j's
/// accumulator gradient), `grad:gemm<j>.lhs`, `grad:gemm<j>.rhs` (the GEMMs
/// of its operands' gradients) and `grad:gemm<j>.input<i>` (the finish of
/// its epilogue input i's gradient partials).
constexpr llvm::StringLiteral kKernelRoleAttrName = "coda.role";

/// The GEMM configurations pinned on `op` (its verified coda.gemm_config),
/// in dispatch order: none, one, or several chosen by K.
SmallVector<GemmConfigAttr> getPinnedGemmConfigs(Operation *op);
} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_IR_CODA_H
