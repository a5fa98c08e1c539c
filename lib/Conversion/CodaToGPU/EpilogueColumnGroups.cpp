//===- EpilogueColumnGroups.cpp - group statistics down the columns -------===//
//
// `coda.group_reduce <kind> %v col group 128` on the GPU: the group is a
// whole column of the tile, held by every warp (fragments) or every pass
// row (shared tile), so its statistic needs the whole tile before any row
// can use it. The epilogue therefore walks its rows once per statistic
// first, evaluating only what the statistic reduces and carrying one
// running value per slot, then combines the threads' values through the
// column scratch in a fixed order (as column partials are finished) into
// the statistic's row in shared memory; each row of the main walk reads
// its slots from there (held in registers through the walk, a register
// epilogue's statistics spill beside its accumulators). A statistic may
// reduce values computed from statistics of the same groups before it (a
// softmax down the columns).
//
//===----------------------------------------------------------------------===//

#include "EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

void EpilogueBuilder::computeColumnStatistics(ImplicitLocOpBuilder &b) {
  for (GroupReduceOp stat : op.getBody().getOps<GroupReduceOp>()) {
    if (stat.getAxis() != ReductionAxis::col)
      continue;
    Value identity = arith::ConstantOp::create(
        b, getGroupIdentity(stat.getKind(), b.getF32Type()));
    SmallVector<Value> init(layout.groups.size() * lanesPerGroup, identity);
    issueFirstRows(b);
    SmallVector<Value> running = walkRows(
        b, init,
        [&](ImplicitLocOpBuilder &lb, Value localRow, int64_t fragmentRow,
            function_ref<Value(Slot)> accumulator, ValueRange carried) {
          return columnStatisticRow(lb, stat, localRow, fragmentRow,
                                    accumulator, carried);
        });
    finishColumnStatistic(b, stat, running);
    finishedColumnStatistics.push_back(stat.getResult());
  }
  finishColumnDerived(b);
}

int64_t EpilogueBuilder::columnRowOf(Value v) const {
  if (auto stat = v.getDefiningOp<GroupReduceOp>()) {
    int64_t k = 0;
    for (GroupReduceOp other : GemmOp(op).getBody().getOps<GroupReduceOp>()) {
      if (other == stat)
        return k;
      k += other.getAxis() == ReductionAxis::col;
    }
    llvm_unreachable("a statistic of this epilogue");
  }
  SmallVector<Value> derived = plan.columnUniform.derived();
  return config.numColumnStatistics +
         (llvm::find(derived, v) - derived.begin());
}

void EpilogueBuilder::finishColumnDerived(ImplicitLocOpBuilder &b) {
  SmallVector<Value> derived = plan.columnUniform.derived();
  if (derived.empty())
    return;
  scf::ForOp::create(
      b, frame.tid, index(b, config.tileN), index(b, config.epilogueThreads),
      ValueRange{},
      [&](OpBuilder &ob, Location loc, Value localCol, ValueRange) {
        ImplicitLocOpBuilder lb(loc, ob);
        IRMapping mapping;
        for (Value stat : finishedColumnStatistics)
          mapping.map(
              stat,
              fromF32(lb,
                      memref::LoadOp::create(
                          lb, columnRowBuffer(lb, columnRowOf(stat)), localCol),
                      stat.getType()));
        for (Operation *inner : plan.columnUniform.ops) {
          if (isa<GroupReduceOp>(inner))
            continue;
          for (Value operand : inner->getOperands())
            if (!mapping.contains(operand))
              lb.clone(*operand.getDefiningOp(), mapping);
          lb.clone(*inner, mapping);
        }
        for (Value v : derived)
          memref::StoreOp::create(lb, mapping.lookup(v),
                                  columnRowBuffer(lb, columnRowOf(v)),
                                  localCol);
        scf::YieldOp::create(lb);
      });
  // Every row reads them.
  frame.syncEpilogue(b);
}

Value EpilogueBuilder::columnRowBuffer(ImplicitLocOpBuilder &b,
                                       int64_t k) const {
  MLIRContext *ctx = b.getContext();
  auto type = MemRefType::get(
      {config.tileN}, b.getF32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  return memref::ViewOp::create(
      b, type, frame.shared,
      arith::AddIOp::create(b, frame.sharedBase,
                            index(b, config.columnStatisticOffset(k))),
      ValueRange{});
}

void EpilogueBuilder::mapColumnRows(ImplicitLocOpBuilder &lb, Row &r,
                                    ArrayRef<Value> values) {
  if (values.empty())
    return;
  // Fragments: each slot's column is the lane's first column (an opaque
  // value per row) plus a constant, so that no address stays live from
  // one row to the next.
  Value laneCol = plan.fragments ? opaqueIndex(lb, layout.twoQ) : Value();
  for (Value value : values) {
    Value buffer = columnRowBuffer(lb, columnRowOf(value));
    Type type = value.getType();
    for (int64_t g = 0, e = layout.groups.size(); g < e; ++g)
      for (int64_t l = 0; l < lanesPerGroup; ++l) {
        Value col = plan.fragments
                        ? arith::AddIOp::create(lb, laneCol,
                                                index(lb, slotOffset({g, l})))
                              .getResult()
                        : layout.localCols[g][l];
        mapping(r, {g, l}).map(
            value, fromF32(lb, memref::LoadOp::create(lb, buffer, col), type));
      }
  }
}

SmallVector<Value> EpilogueBuilder::columnStatisticRow(
    ImplicitLocOpBuilder &lb, GroupReduceOp stat, Value localRow,
    int64_t fragmentRow, function_ref<Value(Slot)> accumulator,
    ValueRange running) {
  Row r = beginRow(lb, localRow, fragmentRow);
  mapAccumulators(lb, r, accumulator);
  readRow(lb, r);
  mapColumnRows(lb, r, finishedColumnStatistics);
  SmallVector<Operation *> slice = getGroupOperandSlice(op, stat.getValue());
  // Statistics in the slice are earlier ones of the same groups, mapped.
  auto mapped = [](OpBuilder &, GroupReduceOp, MutableArrayRef<IRMapping>) {};
  for (auto [gr, groupRun] : llvm::enumerate(layout.groupRuns)) {
    for (std::unique_ptr<InputNode> &node : inputNodes)
      node->mapGroupRun(lb, r, gr);
    // The accumulators and inputs through opaque moves: what this walk
    // computes from them is then no common subexpression of the main
    // walk's, which LLVM would otherwise keep live from here to there for
    // the whole tile.
    for (int64_t g : groupRun)
      for (IRMapping &lane : lanesOf(r, g))
        for (BlockArgument arg : op.getBody().getArguments())
          if (Value value = lane.lookupOrNull(arg);
              value &&
              (value.getType().isF32() || value.getType().isBF16() ||
               value.getType().isF16() || value.getType().isInteger(32)))
            lane.map(arg, opaque(lb, value));
    for (int64_t g : groupRun)
      evaluateEpilogueOps(lb, slice, r.row, cols[g], lanesOf(r, g), mapped);
  }
  GroupStatistic kind = stat.getKind();
  Value identity =
      arith::ConstantOp::create(lb, getGroupIdentity(kind, lb.getF32Type()));
  SmallVector<Value> next;
  for (int64_t g = 0, e = layout.groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      // Rows beyond M take the identity.
      Value term = arith::SelectOp::create(
          lb, slotInBounds(lb, r, {g, l}),
          toF32(lb, mapping(r, {g, l}).lookup(stat.getValue())), identity);
      next.push_back(buildGroupCombine(lb, lb.getLoc(), kind,
                                       {running[next.size()], Value()},
                                       {term, Value()})
                         .value);
    }
  return next;
}

void EpilogueBuilder::finishColumnStatistic(ImplicitLocOpBuilder &b,
                                            GroupReduceOp stat,
                                            ValueRange running) {
  GroupStatistic kind = stat.getKind();
  auto combine = [&](ImplicitLocOpBuilder &cb, Value acc, Value term) {
    return buildGroupCombine(cb, cb.getLoc(), kind, {acc, Value()},
                             {term, Value()})
        .value;
  };
  ColumnScratch scratch = columnScratch(b, /*scratchIndex=*/0);
  // The previous user of the scratch is done reading it.
  frame.syncEpilogue(b);
  SmallVector<Value> values;
  for (Value v : running) {
    // Fragments: the 8 lanes of a column (l / 4) combine first.
    if (plan.fragments)
      for (int32_t offset : {4, 8, 16})
        v = combine(
            b, v,
            gpu::ShuffleOp::create(b, v, offset, 32, gpu::ShuffleMode::XOR)
                .getShuffleResult());
    values.push_back(v);
  }
  storeColumnScratch(b, scratch, values);
  frame.syncEpilogue(b);
  // One thread per column combines the scratch rows in order.
  Value buffer = columnRowBuffer(b, columnRowOf(stat.getResult()));
  scf::ForOp::create(
      b, frame.tid, index(b, config.tileN), index(b, config.epilogueThreads),
      ValueRange{},
      [&](OpBuilder &ob, Location loc, Value localCol, ValueRange) {
        ImplicitLocOpBuilder lb(loc, ob);
        Value total = arith::ConstantOp::create(
            lb, getGroupIdentity(kind, lb.getF32Type()));
        for (int64_t row = 0; row < scratch.rows; ++row)
          total = combine(
              lb, total,
              memref::LoadOp::create(lb, scratch.view,
                                     ValueRange{index(lb, row), localCol}));
        memref::StoreOp::create(lb, total, buffer, localCol);
        scf::YieldOp::create(lb);
      });
  // Every row reads it.
  frame.syncEpilogue(b);
}
