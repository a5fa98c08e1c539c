//===- EpilogueEvaluation.cpp - evaluate a coda.gemm epilogue -------------===//

#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

#include "llvm/ADT/SmallPtrSet.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::coda;

Value mlir::coda::buildReductionCombine(OpBuilder &b, Location loc,
                                        ReductionKind kind, Value acc,
                                        Value value) {
  switch (kind) {
  case ReductionKind::sum:
    return arith::AddFOp::create(b, loc, acc, value);
  case ReductionKind::max:
    return arith::MaximumFOp::create(b, loc, acc, value);
  case ReductionKind::logsumexp: {
    Value hi = arith::MaximumFOp::create(b, loc, acc, value);
    Value lo = arith::MinimumFOp::create(b, loc, acc, value);
    Value diff = arith::SubFOp::create(b, loc, lo, hi);
    Value sum = math::Log1pOp::create(b, loc, math::ExpOp::create(b, loc, diff));
    Value combined = arith::AddFOp::create(b, loc, hi, sum);
    // -inf - -inf is NaN: an empty side leaves the other unchanged.
    Value negInf = arith::ConstantOp::create(
        b, loc,
        getReductionIdentity(ReductionKind::logsumexp,
                             cast<FloatType>(acc.getType())));
    Value hiIsNegInf =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, hi, negInf);
    return arith::SelectOp::create(b, loc, hiIsNegInf, hi, combined);
  }
  }
  llvm_unreachable("unknown reduction kind");
}

SmallVector<Value> mlir::coda::getGroupColumns(
    OpBuilder &b, Location loc, Value group, std::optional<int64_t> pairStride) {
  if (!pairStride)
    return {group};
  Value stride = arith::ConstantIndexOp::create(b, loc, *pairStride);
  Value block = arith::DivUIOp::create(b, loc, group, stride);
  Value within = arith::RemUIOp::create(b, loc, group, stride);
  Value blockStart = arith::MulIOp::create(
      b, loc, block, arith::ConstantIndexOp::create(b, loc, 2 * *pairStride));
  Value first = arith::AddIOp::create(b, loc, blockStart, within);
  return {first, arith::AddIOp::create(b, loc, first, stride)};
}

/// Inlines a pairwise region once for the pair held by the two lanes.
static void evaluatePairOp(OpBuilder &b, Operation &pairOp,
                           MutableArrayRef<IRMapping> lanes) {
  Block &block = pairOp.getRegion(0).front();
  IRMapping mapping;
  for (auto [i, operand] : llvm::enumerate(pairOp.getOperands())) {
    mapping.map(block.getArgument(2 * i), lanes[0].lookup(operand));
    mapping.map(block.getArgument(2 * i + 1), lanes[1].lookup(operand));
  }
  for (Operation &inner : block.without_terminator())
    b.clone(inner, mapping);
  auto yield = cast<YieldOp>(block.getTerminator());
  for (auto [r, result] : llvm::enumerate(pairOp.getResults())) {
    if (isa<PairMapOp>(pairOp)) {
      lanes[0].map(result, mapping.lookup(yield.getValues()[2 * r]));
      lanes[1].map(result, mapping.lookup(yield.getValues()[2 * r + 1]));
    } else {
      Value contracted = mapping.lookup(yield.getValues()[r]);
      lanes[0].map(result, contracted);
      lanes[1].map(result, contracted);
    }
  }
}

void mlir::coda::evaluateEpilogueOps(OpBuilder &b, ArrayRef<Operation *> ops,
                                     Value row, ArrayRef<Value> cols,
                                     MutableArrayRef<IRMapping> lanes,
                                     GroupStatisticFn groupStatistic) {
  for (Operation *inner : ops) {
    if (isa<RowIndexOp>(inner)) {
      for (IRMapping &lane : lanes)
        lane.map(inner->getResult(0), row);
    } else if (isa<ColIndexOp>(inner)) {
      for (auto [lane, col] : llvm::zip_equal(lanes, cols))
        lane.map(inner->getResult(0), col);
    } else if (auto group = dyn_cast<GroupReduceOp>(inner)) {
      assert(groupStatistic && "an epilogue with group statistics needs a "
                               "lowering for them");
      groupStatistic(b, group, lanes);
    } else if (isa<RowReduceOp, ColReduceOp, RowSelectOp, GroupValueOp>(
                   inner)) {
      for (IRMapping &lane : lanes)
        lane.map(inner->getResult(0), lane.lookup(inner->getOperand(0)));
    } else if (isa<PairMapOp, PairContractOp>(inner)) {
      evaluatePairOp(b, *inner, lanes);
    } else if (isa<InterleaveOp, TransposeOp>(inner)) {
      // Its operands are written where the gemm's yield sends it.
      continue;
    } else {
      for (IRMapping &lane : lanes)
        b.clone(*inner, lane);
    }
  }
}

void mlir::coda::evaluateEpilogueBody(OpBuilder &b, GemmOp op, Value row,
                                      ArrayRef<Value> cols,
                                      MutableArrayRef<IRMapping> lanes,
                                      GroupStatisticFn groupStatistic) {
  SmallVector<Operation *> ops = llvm::map_to_vector(
      op.getBody().without_terminator(), [](Operation &inner) { return &inner; });
  evaluateEpilogueOps(b, ops, row, cols, lanes, groupStatistic);
}

GroupTerm mlir::coda::buildGroupCombine(OpBuilder &b, Location loc,
                                        GroupStatistic kind, GroupTerm acc,
                                        GroupTerm term) {
  switch (kind) {
  case GroupStatistic::sum:
    return {arith::AddFOp::create(b, loc, acc.value, term.value), Value()};
  case GroupStatistic::max:
    return {arith::MaximumFOp::create(b, loc, acc.value, term.value), Value()};
  case GroupStatistic::min:
    return {arith::MinimumFOp::create(b, loc, acc.value, term.value), Value()};
  case GroupStatistic::argmax: {
    Value greater = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                          term.value, acc.value);
    Value equal = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                        term.value, acc.value);
    Value earlier = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                          term.position, acc.position);
    Value wins = arith::OrIOp::create(
        b, loc, greater, arith::AndIOp::create(b, loc, equal, earlier));
    return {arith::SelectOp::create(b, loc, wins, term.value, acc.value),
            arith::SelectOp::create(b, loc, wins, term.position,
                                    acc.position)};
  }
  }
  llvm_unreachable("unknown group statistic");
}

SmallVector<Operation *> mlir::coda::getGroupOperandSlice(GemmOp op,
                                                         Value value) {
  llvm::SmallPtrSet<Operation *, 16> slice;
  SmallVector<Value> worklist{value};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || isa<GroupReduceOp>(def) || !slice.insert(def).second)
      continue;
    worklist.append(def->operand_begin(), def->operand_end());
  }
  SmallVector<Operation *> ordered;
  for (Operation &inner : op.getBody().without_terminator())
    if (slice.contains(&inner))
      ordered.push_back(&inner);
  return ordered;
}

int64_t mlir::coda::getGroupWidth(Operation &op, ReductionAxis axis) {
  if (auto stat = dyn_cast<GroupReduceOp>(op))
    return stat.getAxis() == axis ? stat.getWidth() : 0;
  if (auto value = dyn_cast<GroupValueOp>(op))
    return value.getAxis() == axis ? value.getWidth() : 0;
  return 0;
}

int64_t mlir::coda::getWidestGroup(Block &body, ReductionAxis axis) {
  int64_t widest = 0;
  for (Operation &inner : body)
    widest = std::max(widest, getGroupWidth(inner, axis));
  return widest;
}

TypedAttr mlir::coda::getGroupIdentity(GroupStatistic kind, FloatType type) {
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  switch (kind) {
  case GroupStatistic::sum:
    return FloatAttr::get(type, APFloat::getZero(semantics));
  case GroupStatistic::max:
  case GroupStatistic::argmax:
    return FloatAttr::get(type, APFloat::getInf(semantics, /*Negative=*/true));
  case GroupStatistic::min:
    return FloatAttr::get(type, APFloat::getInf(semantics));
  }
  llvm_unreachable("unknown group statistic");
}

ReductionKind mlir::coda::getPartialKind(Value partial) {
  Operation *def = partial.getDefiningOp();
  if (auto row = dyn_cast<RowReduceOp>(def))
    return row.getKind();
  return cast<ColReduceOp>(def).getKind();
}
