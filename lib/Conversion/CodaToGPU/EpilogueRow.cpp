//===- EpilogueRow.cpp - the epilogue of one row --------------------------===//
//
// One row of the thread: its accumulators and shared inputs, then group run
// by group run each input's values by how it moves, the region evaluated
// and what the outputs take at once, then each output by role.
//
//===----------------------------------------------------------------------===//

#include "EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

EpilogueBuilder::Row EpilogueBuilder::beginRow(ImplicitLocOpBuilder &lb,
                                               Value localRow,
                                               int64_t fragmentRow) const {
  Row r;
  r.fragmentRow = fragmentRow;
  r.one = index(lb, 1);
  Value lastRow = arith::SubIOp::create(lb, frame.sizeM, r.one);
  r.lastCol = arith::SubIOp::create(lb, frame.sizeN, r.one);
  r.row = arith::AddIOp::create(lb, frame.blockM, localRow);
  r.inRow = interior ? trueValue(lb)
                     : arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                             r.row, frame.sizeM)
                           .getResult();
  // Fragments: the row's room, the output columns from the lane's first
  // (2q) on, 0 beyond M. Slot (j, e) is in bounds when 8j + e < room: one
  // compare against a per-row value, so that no column-wise predicate or
  // index stays live from one row to the next (the accumulators fill the
  // registers).
  if (plan.fragments && !interior)
    r.room = arith::SelectOp::create(
        lb, r.inRow,
        arith::SubIOp::create(
            lb, arith::SubIOp::create(lb, frame.sizeN, frame.blockN),
            layout.twoQ),
        index(lb, 0));
  r.rowClamped =
      interior ? r.row : arith::MinUIOp::create(lb, r.row, lastRow).getResult();
  r.mappings.resize(layout.groups.size() * lanesPerGroup);
  return r;
}

Value EpilogueBuilder::slotInBounds(ImplicitLocOpBuilder &lb, const Row &r,
                                    Slot s) const {
  if (interior)
    return trueValue(lb);
  if (plan.fragments)
    return arith::CmpIOp::create(lb, arith::CmpIPredicate::slt,
                                 index(lb, slotOffset(s)), r.room);
  return arith::AndIOp::create(lb, r.inRow, inCols[s.group][s.lane]);
}

Value EpilogueBuilder::runInBounds(ImplicitLocOpBuilder &lb, const Row &r,
                                   const Run &run) const {
  if (interior)
    return trueValue(lb);
  if (plan.fragments)
    return roomBounds(lb, r.room, slotOffset(run.front()), run.size()).whole;
  Value end = arith::AddIOp::create(
      lb, cols[run.front().group][run.front().lane], index(lb, run.size()));
  return arith::CmpIOp::create(lb, arith::CmpIPredicate::ule, end, frame.sizeN);
}

void EpilogueBuilder::mapAccumulators(ImplicitLocOpBuilder &lb, Row &r,
                                      function_ref<Value(Slot)> accumulator) {
  // An edge tile's accumulators through opaque moves, where the plan says
  // (EpiloguePlan::opaqueEdgeAccumulators).
  for (int64_t g = 0, e = layout.groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      Value acc = accumulator({g, l});
      if (!interior && plan.opaqueEdgeAccumulators && acc.getType().isF32())
        acc = LLVM::InlineAsmOp::create(lb, acc.getType(), ValueRange{acc},
                                        "mov.b32 $0, $1;", "=f,f",
                                        /*has_side_effects=*/false,
                                        /*is_align_stack=*/false,
                                        LLVM::tailcallkind::TailCallKind::None,
                                        LLVM::AsmDialectAttr(), ArrayAttr())
                  .getResult(0);
      mapping(r, {g, l}).map(op.getAccumulatorArg(), acc);
    }
}

void EpilogueBuilder::mapRowBufferInput(ImplicitLocOpBuilder &lb, Row &r,
                                        unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr])
    for (auto [slot, value] : llvm::zip_equal(
             layout.runs[runIndex], readInputRun(lb, k, layout.runs[runIndex])))
      mapping(r, slot).map(arg, value);
}

void EpilogueBuilder::mapTileOrColumnInput(ImplicitLocOpBuilder &lb, Row &r,
                                           unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  AccessForm form = op.getInputForm(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr]) {
    const Run &run = layout.runs[runIndex];
    // A column input's runs of the groups it prefetched.
    if (ArrayRef<Value> prefetched = prefetchedValues(k);
        form == AccessForm::col && !prefetched.empty() &&
        groupOf8(run) < int64_t(prefetched.size())) {
      for (auto [slot, value] :
           llvm::zip_equal(run, fragmentValues(lb, prefetched, run)))
        mapping(r, slot).map(arg, value);
      continue;
    }
    Slot head = run.front();
    SmallVector<Value> at;
    if (form == AccessForm::tile)
      at.push_back(r.rowClamped);
    at.push_back(cols[head.group][head.lane]);
    // A column input's runs in a checked copy of the fragment layout
    // without pairs, element by element: a branch per run between a
    // vector and element loads keeps more values live than the registers
    // hold, and ptxas spills.
    SmallVector<Value> values = loadRun(
        lb, inputs[k], at, run.size(), runInBounds(lb, r, run), r.lastCol,
        /*vectors=*/interior || !plan.fragments || pairStride ||
            form != AccessForm::col);
    for (auto [slot, value] : llvm::zip_equal(run, values))
      mapping(r, slot).map(arg, value);
  }
}

Value EpilogueBuilder::partialTerm(ImplicitLocOpBuilder &lb, Row &r, Slot s,
                                   Value value, ReductionKind kind) {
  return arith::SelectOp::create(lb, slotInBounds(lb, r, s),
                                 toF32(lb, mapping(r, s).lookup(value)),
                                 identity(lb, kind));
}

void EpilogueBuilder::mapEverySlot(Row &r, unsigned gr, Value arg,
                                   Value value) {
  for (int64_t g : layout.groupRuns[gr])
    for (int64_t l = 0; l < lanesPerGroup; ++l)
      mapping(r, {g, l}).map(arg, value);
}

void EpilogueBuilder::readRow(ImplicitLocOpBuilder &lb, Row &r) {
  // The pipelined inputs' copies of this row have landed (those of the
  // next row may still be in flight), the other lanes' too.
  constexpr int64_t slots = GemmKernelConfig::kPipelineSlots;
  if (!plan.pipelined.empty()) {
    NVVM::CpAsyncWaitGroupOp::create(
        lb, lb.getI32IntegerAttr(r.fragmentRow + 1 < fragmentRows() ? 1 : 0));
    NVVM::SyncWarpOp::create(
        lb, arith::ConstantIntOp::create(lb, lb.getI32Type(), -1));
  }
  for (std::unique_ptr<InputNode> &node : inputNodes)
    node->readRow(lb, r);
  // The slots just read take the row kPipelineSlots on.
  if (!plan.pipelined.empty() && r.fragmentRow + slots < fragmentRows())
    issuePipelinedRow(lb, r.fragmentRow + slots);
  // Pair inputs: the last pair, and the tile's first pair. With fragments,
  // the lane's first pair through an opaque move, so that each group's pair
  // is that plus a constant computed where used (held through the K loop,
  // the groups' pairs took a register each).
  if (llvm::any_of(plan.inputs, [](const InputPlan &input) {
        return input.form == AccessForm::pair;
      })) {
    r.lastPair = arith::SubIOp::create(
        lb, arith::DivUIOp::create(lb, frame.sizeN, index(lb, 2)), r.one);
    r.firstPair = arith::DivUIOp::create(lb, frame.blockN, index(lb, 2));
    if (plan.fragments)
      r.firstPair = opaqueIndex(
          lb, arith::AddIOp::create(lb, r.firstPair, pairNumber(0).second));
  }
  for (std::unique_ptr<InputNode> &node : inputNodes)
    node->stageRow(lb, r);
  // The runs of each group run (a run's slots lie in one group run).
  r.runsOfGroupRun.resize(layout.groupRuns.size());
  for (auto [runIndex, run] : llvm::enumerate(layout.runs))
    for (auto [gr, groupRun] : llvm::enumerate(layout.groupRuns))
      if (llvm::is_contained(groupRun, run.front().group))
        r.runsOfGroupRun[gr].push_back(runIndex);
}

SmallVector<Value> EpilogueBuilder::emitRow(
    ImplicitLocOpBuilder &lb, Value localRow, int64_t fragmentRow,
    function_ref<Value(Slot)> accumulator, ValueRange colAccs) {
  Row r = beginRow(lb, localRow, fragmentRow);
  SmallVector<Value> running(colAccs);
  mapAccumulators(lb, r, accumulator);
  readRow(lb, r);
  for (std::unique_ptr<OutputNode> &node : outputNodes)
    node->beginRow(lb, r);
  mapColumnRows(lb, r, plan.columnUniform.frontier);
  computeGroupStatistics(lb, r);
  // Group run by group run: its inputs read, the region evaluated and what
  // the outputs take of it at once (16-bit outputs narrowed, interleaved
  // ones stored), so that only one group run's inputs and f32 results are
  // live beside the accumulators.
  for (auto [gr, groupRun] : llvm::enumerate(layout.groupRuns)) {
    for (std::unique_ptr<InputNode> &node : inputNodes)
      node->mapGroupRun(lb, r, gr);
    for (int64_t g : groupRun) {
      // Group statistics: computeGroupStatistics's, already mapped; values
      // the same down each column: read from their rows.
      evaluateEpilogueOps(
          lb, rowOps, r.row, cols[g], lanesOf(r, g),
          [](OpBuilder &, GroupReduceOp, MutableArrayRef<IRMapping>) {});
    }
    for (std::unique_ptr<OutputNode> &node : outputNodes)
      node->narrowGroupRun(lb, r, gr);
    for (std::unique_ptr<OutputNode> &node : outputNodes)
      node->consumeGroupRun(lb, r, gr);
  }
  for (std::unique_ptr<OutputNode> &node : outputNodes)
    node->endRow(lb, r, running);
  return running;
}
