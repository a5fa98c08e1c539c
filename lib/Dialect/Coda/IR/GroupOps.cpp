//===- GroupOps.cpp - group statistics of the output tile -----------------===//
//
// The verifiers of coda.group_reduce and coda.group_value: a group lies
// inside one output tile, a statistic's value depends on no pairwise op nor
// on statistics of other groups, and a value written once per group is the
// same over the group.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/Coda.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::coda;

/// The widest group along `axis` that lies inside every tile the lowering
/// may pick: output tiles are 64, 128 or 256 columns wide and 64 or 128 rows
/// high, and a thread covers 8 columns.
static int64_t maxGroupWidth(ReductionAxis axis) {
  return axis == ReductionAxis::row ? 256 : 128;
}
static constexpr int64_t kMinGroupWidth = 8;

/// "1 x 128" or "128 x 1".
static std::string groupShape(ReductionAxis axis, int64_t width) {
  std::string w = std::to_string(width);
  return axis == ReductionAxis::row ? "1 x " + w : w + " x 1";
}

static LogicalResult verifyGroupWidth(Operation *op, ReductionAxis axis,
                                      int64_t width) {
  int64_t widest = maxGroupWidth(axis);
  if (llvm::isPowerOf2_64(width) && width >= kMinGroupWidth &&
      width <= widest)
    return success();
  InFlightDiagnostic diag = op->emitOpError("groups of ")
                            << groupShape(axis, width)
                            << " cannot lie inside one output tile";
  if (axis == ReductionAxis::row)
    diag.attachNote() << "use a power of two from 8 to 256 columns; a "
                         "statistic over a whole row wider than one tile is "
                         "coda.row_reduce with coda.reduce_partials";
  else
    diag.attachNote() << "use a power of two from 8 to 128 rows; a "
                         "statistic over a whole column is coda.col_reduce "
                         "with coda.reduce_partials";
  return failure();
}

namespace {
/// Walks the epilogue values `value` is computed from, within `gemm`'s
/// body, calling `visit` on each; `visit` returns whether to look further
/// into what the value is computed from.
template <typename Visit>
WalkResult walkOperands(Value value, Visit visit) {
  SmallVector<Value> worklist{value};
  llvm::SmallPtrSet<Value, 16> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    FailureOr<bool> further = visit(v);
    if (failed(further))
      return WalkResult::interrupt();
    if (!*further)
      continue;
    if (Operation *def = v.getDefiningOp())
      worklist.append(def->operand_begin(), def->operand_end());
  }
  return WalkResult::advance();
}
} // namespace

LogicalResult GroupReduceOp::verify() {
  if (failed(verifyGroupWidth(*this, getAxis(), getWidth())))
    return failure();
  Type expected = getKind() == GroupStatistic::argmax
                      ? Type(IndexType::get(getContext()))
                      : getValue().getType();
  if (getResult().getType() != expected)
    return emitOpError("expects a ")
           << stringifyGroupStatistic(getKind()) << " result of type "
           << expected << ", got " << getResult().getType();
  // Every element of a group reads the statistic; what it is computed from
  // must be known at each element of the group alone.
  // (A `pair` input is read by pairwise ops only, so this covers it too.)
  WalkResult walk = walkOperands(getValue(), [&](Value v) -> FailureOr<bool> {
    Operation *def = v.getDefiningOp();
    if (isa_and_nonnull<PairMapOp, PairContractOp>(def)) {
      emitOpError("reduces a value computed by a pairwise op (")
          << def->getName() << "), which a group statistic cannot read";
      return failure();
    }
    if (auto inner = dyn_cast_or_null<GroupReduceOp>(def)) {
      if (inner.getAxis() != getAxis() || inner.getWidth() != getWidth()) {
        emitOpError("reduces a value computed from a statistic of ")
            << groupShape(inner.getAxis(), inner.getWidth())
            << " groups; it may read statistics of its own "
            << groupShape(getAxis(), getWidth()) << " groups only";
        return failure();
      }
      return false;
    }
    return true;
  });
  return failure(walk.wasInterrupted());
}

/// Why `v` may differ within a group along `axis`, or "" where it cannot.
static std::string nonUniformReason(GemmOp gemm, Value v, ReductionAxis axis,
                                    int64_t width) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg == gemm.getAccumulatorArg())
      return "the accumulator";
    unsigned i = arg.getArgNumber() - 1;
    AccessForm form = gemm.getInputForm(i);
    bool uniform = form == AccessForm::scalar ||
                   (form == AccessForm::row && axis == ReductionAxis::row) ||
                   (form == AccessForm::col && axis == ReductionAxis::col);
    return uniform ? "" : "input #" + std::to_string(i) + " (" +
                              stringifyAccessForm(form).str() + ")";
  }
  Operation *def = v.getDefiningOp();
  if (auto group = dyn_cast<GroupReduceOp>(def))
    return group.getAxis() == axis && int64_t(group.getWidth()) == width
               ? ""
               : "a statistic of " +
                     groupShape(group.getAxis(), group.getWidth()) +
                     " groups";
  if (isa<ColIndexOp>(def) && axis == ReductionAxis::row)
    return "coda.col_index";
  if (isa<RowIndexOp>(def) && axis == ReductionAxis::col)
    return "coda.row_index";
  if (isa<PairMapOp, PairContractOp>(def))
    return def->getName().getStringRef().str();
  return "";
}

LogicalResult GroupValueOp::verify() {
  if (failed(verifyGroupWidth(*this, getAxis(), getWidth())))
    return failure();
  auto gemm = (*this)->getParentOfType<GemmOp>();
  WalkResult walk = walkOperands(getValue(), [&](Value v) -> FailureOr<bool> {
    std::string reason = nonUniformReason(gemm, v, getAxis(), getWidth());
    if (!reason.empty()) {
      emitOpError("writes a value that is not the same over each ")
          << groupShape(getAxis(), getWidth()) << " group: it depends on "
          << reason
          << " (it may depend on statistics of its own groups, "
          << (getAxis() == ReductionAxis::row ? "row" : "column")
          << " and scalar inputs, and constants)";
      return failure();
    }
    // A statistic of its own groups is the same over each group whatever
    // it reduces.
    return !isa_and_nonnull<GroupReduceOp>(v.getDefiningOp());
  });
  return failure(walk.wasInterrupted());
}
