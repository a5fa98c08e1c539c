//===- EpilogueEvaluation.h - evaluate a coda.gemm epilogue -----*- C++ -*-===//
//
// What every lowering of coda.gemm shares: the reduction combine step, the
// columns of a pairwise group, and the evaluation of the epilogue body for one
// output position once its block arguments are known. Lowerings differ only in
// how they read operands and write results.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_UTILS_EPILOGUEEVALUATION_H
#define CODA_DIALECT_CODA_UTILS_EPILOGUEEVALUATION_H

#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::coda {

/// `acc <kind> value`. logsumexp adds exponentials relative to the larger
/// operand so that it never overflows, and keeps the other side when one side
/// is empty (-inf).
Value buildReductionCombine(OpBuilder &b, Location loc, ReductionKind kind,
                            Value acc, Value value);

/// The columns of group `group`: the group itself, or with a pair stride s the
/// two columns (group / s) * 2s + group mod s and that plus s.
SmallVector<Value> getGroupColumns(OpBuilder &b, Location loc, Value group,
                                   std::optional<int64_t> pairStride);

/// Maps a coda.group_reduce's result in every lane (how depends on the
/// lowering: a loop over the group, or lanes exchanging their values).
using GroupStatisticFn =
    function_ref<void(OpBuilder &, GroupReduceOp, MutableArrayRef<IRMapping>)>;

/// Evaluates the body of `op` (without its terminator) once per lane: one lane
/// per column of the group, whose mapping already holds the accumulator and
/// input block arguments. Position ops take `row` and the lane's column;
/// reductions, selections and values written per group map to their operand
/// (the terminator decides where the value goes); pairwise ops are inlined
/// once for the two lanes; group statistics are `groupStatistic`'s (an
/// epilogue with one needs it).
void evaluateEpilogueBody(OpBuilder &b, GemmOp op, Value row,
                          ArrayRef<Value> cols,
                          MutableArrayRef<IRMapping> lanes,
                          GroupStatisticFn groupStatistic = nullptr);

/// The ops of `op`'s epilogue that `value` is computed from, in program
/// order, up to (not including) block arguments and the statistics of
/// groups (whose values are known at every element of their group).
SmallVector<Operation *> getGroupOperandSlice(GemmOp op, Value value);

/// Evaluates the ops `ops` of `op`'s epilogue (in program order, each
/// lane's block arguments and earlier values already mapped) as
/// evaluateEpilogueBody does.
void evaluateEpilogueOps(OpBuilder &b, ArrayRef<Operation *> ops, Value row,
                         ArrayRef<Value> cols,
                         MutableArrayRef<IRMapping> lanes,
                         GroupStatisticFn groupStatistic = nullptr);

/// The group width of `op`, a coda.group_reduce or coda.group_value whose
/// groups lie along `axis` (row: groups of columns); 0 for any other op.
int64_t getGroupWidth(Operation &op, ReductionAxis axis = ReductionAxis::row);
/// The widest group along `axis` of a group op in `body`; 0 where none.
int64_t getWidestGroup(Block &body, ReductionAxis axis = ReductionAxis::row);

/// The identity of a group statistic over `type` (0, -inf, +inf; argmax
/// starts from -inf).
TypedAttr getGroupIdentity(GroupStatistic kind, FloatType type);

/// A group statistic's running value: the statistic, and for argmax the
/// position of the maximum so far.
struct GroupTerm {
  Value value, position;
};
/// `acc` combined with `term`. argmax keeps the first maximum: `term` wins
/// when it is greater, or equal at an earlier position, so that the order
/// in which terms combine does not matter (a NaN never wins).
GroupTerm buildGroupCombine(OpBuilder &b, Location loc, GroupStatistic kind,
                            GroupTerm acc, GroupTerm term);

/// The reduction kind of a yielded partial (from row_reduce or col_reduce).
ReductionKind getPartialKind(Value partial);

} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_UTILS_EPILOGUEEVALUATION_H
