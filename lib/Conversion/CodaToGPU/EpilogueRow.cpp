//===- EpilogueRow.cpp - the epilogue of one row ----------------------------===//
//
// One row of the thread: its accumulators and shared inputs, then group run
// by group run each input's values by how it moves, the region evaluated
// and what the outputs take at once, then each output by role.
//
//===----------------------------------------------------------------------===//

#include "EpilogueBuilder.h"

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
            lb, arith::SubIOp::create(lb, frame.sizeN, frame.blockN), twoQ),
        index(lb, 0));
  r.rowClamped =
      interior ? r.row
               : arith::MinUIOp::create(lb, r.row, lastRow).getResult();
  r.mappings.resize(groups.size() * lanesPerGroup);
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
  return arith::CmpIOp::create(lb, arith::CmpIPredicate::ule, end,
                               frame.sizeN);
}

void EpilogueBuilder::mapAccumulators(ImplicitLocOpBuilder &lb, Row &r,
                                      function_ref<Value(Slot)> accumulator) {
  // An edge tile's accumulators through opaque moves, where the plan says
  // (EpiloguePlan::opaqueEdgeAccumulators).
  for (int64_t g = 0, e = groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      Value acc = accumulator({g, l});
      if (!interior && plan.opaqueEdgeAccumulators && acc.getType().isF32())
        acc = LLVM::InlineAsmOp::create(
                  lb, acc.getType(), ValueRange{acc}, "mov.b32 $0, $1;",
                  "=f,f", /*has_side_effects=*/false,
                  /*is_align_stack=*/false,
                  LLVM::tailcallkind::TailCallKind::None,
                  LLVM::AsmDialectAttr(), ArrayAttr())
                  .getResult(0);
      mapping(r, {g, l}).map(op.getAccumulatorArg(), acc);
    }
}

void EpilogueBuilder::readRowInputs(ImplicitLocOpBuilder &lb, Row &r) {
  // Inputs the whole row shares, read once: staged tile inputs (through the
  // buffer, before any output is staged in it), row and scalar values.
  r.stagedValues.resize(inputs.size());
  r.shared.resize(inputs.size());
  // The pipelined inputs' copies of this row have landed (those of the
  // next row may still be in flight), the other lanes' too.
  constexpr int64_t slots = GemmKernelConfig::kPipelineSlots;
  if (!plan.pipelined.empty()) {
    NVVM::CpAsyncWaitGroupOp::create(
        lb, lb.getI32IntegerAttr(r.fragmentRow + 1 < fragmentRows() ? 1 : 0));
    NVVM::SyncWarpOp::create(
        lb, arith::ConstantIntOp::create(lb, lb.getI32Type(), -1));
  }
  for (auto [k, input] : llvm::enumerate(inputs)) {
    AccessForm form = op.getInputForm(k);
    if (std::optional<unsigned> position = plan.inputs[k].pipelineSlot) {
      r.stagedValues[k] =
          readStage(lb, pipelineSlot(lb, *position, r.fragmentRow % slots),
                    opaqueIndex(lb, frame.lane));
    } else if (ArrayRef<Value> prefetched = prefetchedValues(k);
               stagedInput(k) && !prefetched.empty()) {
      // The row's runs as they were prefetched (each run is the lane's
      // two columns of one 8-column group).
      int64_t perRow = config.tileN / 8;
      prefetched = prefetched.slice(r.fragmentRow * perRow, perRow);
      for (const Run &run : runs)
        r.stagedValues[k].push_back(fragmentValues(lb, prefetched, run));
    } else if (stagedInput(k)) {
      r.stagedValues[k] = loadStaged(lb, input, r.row);
    } else if (form == AccessForm::row) {
      r.shared[k] = memref::LoadOp::create(lb, input, ValueRange{r.rowClamped});
    } else if (form == AccessForm::scalar) {
      r.shared[k] = input;
    }
  }
  // The slots just read take the row kPipelineSlots on.
  if (!plan.pipelined.empty() && r.fragmentRow + slots < fragmentRows())
    issuePipelinedRow(lb, r.fragmentRow + slots);
  // Pair inputs: the last pair, and the tile's first pair. With fragments,
  // the lane's first pair through an opaque move, so that each group's pair
  // is that plus a constant computed where used (held through the K loop,
  // the groups' pairs took a register each).
  for (unsigned k = 0; k < inputs.size(); ++k)
    if (op.getInputForm(k) == AccessForm::pair && !r.lastPair) {
      r.lastPair = arith::SubIOp::create(
          lb, arith::DivUIOp::create(lb, frame.sizeN, index(lb, 2)), r.one);
      r.firstPair = arith::DivUIOp::create(lb, frame.blockN, index(lb, 2));
      if (plan.fragments)
        r.firstPair = opaqueIndex(
            lb, arith::AddIOp::create(lb, r.firstPair, pairNumber(0).second));
    }
  // The warp's rows of the periodic inputs it stages, for this row.
  for (unsigned k = 0; k < inputs.size(); ++k)
    if (inputRowBuffers[k] && op.getInputForm(k) == AccessForm::periodic)
      stageInputRows(
          lb, k,
          arith::SubIOp::create(
              lb, r.row,
              arith::DivUIOp::create(lb, frame.lane, index(lb, 4))));
}

void EpilogueBuilder::beginGroupRuns(ImplicitLocOpBuilder &lb, Row &r) {
  // The runs of each group run (a run's slots lie in one group run).
  r.runsOfGroupRun.resize(groupRuns.size());
  for (auto [runIndex, run] : llvm::enumerate(runs))
    for (auto [gr, groupRun] : llvm::enumerate(groupRuns))
      if (llvm::is_contained(groupRun, run.front().group))
        r.runsOfGroupRun[gr].push_back(runIndex);
  ValueRange yielded = op.getYieldOp().getValues();
  for (unsigned i = 0; i < yielded.size(); ++i)
    if (eagerPartials(i))
      r.runningPartials[i].assign(partialBlocks.size(),
                                  identity(lb, getPartialKind(yielded[i])));
}

void EpilogueBuilder::mapStagedInput(Row &r, unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr])
    for (auto [slot, value] :
         llvm::zip_equal(runs[runIndex], r.stagedValues[k][runIndex]))
      mapping(r, slot).map(arg, value);
}

void EpilogueBuilder::mapRowBufferInput(ImplicitLocOpBuilder &lb, Row &r,
                                        unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr])
    for (auto [slot, value] :
         llvm::zip_equal(runs[runIndex], readInputRun(lb, k, runs[runIndex])))
      mapping(r, slot).map(arg, value);
}

void EpilogueBuilder::mapTileOrColumnInput(ImplicitLocOpBuilder &lb, Row &r,
                                           unsigned k, unsigned gr) {
  BlockArgument arg = op.getInputArg(k);
  AccessForm form = op.getInputForm(k);
  for (unsigned runIndex : r.runsOfGroupRun[gr]) {
    const Run &run = runs[runIndex];
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

void EpilogueBuilder::mapPairInput(ImplicitLocOpBuilder &lb, Row &r,
                                   unsigned k, unsigned gr) {
  // Both lanes of a group read their pair's element: pair j of the tile is
  // column blockN / 2 + j (clamped like the rows).
  for (int64_t g : groupRuns[gr]) {
    Value pairCol = arith::MinUIOp::create(
        lb,
        arith::AddIOp::create(lb, r.firstPair,
                              plan.fragments ? index(lb, pairNumber(g).first)
                                             : groups[g]),
        r.lastPair);
    Value value = memref::LoadOp::create(lb, inputs[k],
                                         ValueRange{r.rowClamped, pairCol});
    for (int64_t l = 0; l < lanesPerGroup; ++l)
      mapping(r, {g, l}).map(op.getInputArg(k), value);
  }
}

void EpilogueBuilder::mapPeriodicInput(ImplicitLocOpBuilder &lb, Row &r,
                                       unsigned k, unsigned gr) {
  for (unsigned runIndex : r.runsOfGroupRun[gr]) {
    const Run &run = runs[runIndex];
    SmallVector<Value> values;
    if (std::optional<int64_t> period = staticPeriod(k)) {
      // Runs whose columns are congruent mod P read once per row.
      SmallVector<Value> &read =
          r.periodicReads[{k, periodicColumn(*period, run),
                           int64_t(run.size())}];
      if (read.empty())
        read = readPeriodicRun(lb, k, run, r.rowClamped);
      values = read;
    } else {
      values = readPeriodicRun(lb, k, run, r.rowClamped);
    }
    for (auto [slot, value] : llvm::zip_equal(run, values))
      mapping(r, slot).map(op.getInputArg(k), value);
  }
}

void EpilogueBuilder::mapGroupRunInputs(ImplicitLocOpBuilder &lb, Row &r,
                                        unsigned gr) {
  for (unsigned k = 0, e = inputs.size(); k < e; ++k) {
    if (stagedInput(k)) {
      mapStagedInput(r, k, gr);
      continue;
    }
    if (inputRowBuffers[k]) {
      mapRowBufferInput(lb, r, k, gr);
      continue;
    }
    switch (op.getInputForm(k)) {
    case AccessForm::tile:
    case AccessForm::col:
      mapTileOrColumnInput(lb, r, k, gr);
      break;
    case AccessForm::pair:
      mapPairInput(lb, r, k, gr);
      break;
    case AccessForm::periodic:
      mapPeriodicInput(lb, r, k, gr);
      break;
    case AccessForm::row:
    case AccessForm::scalar:
      for (int64_t g : groupRuns[gr])
        for (int64_t l = 0; l < lanesPerGroup; ++l)
          mapping(r, {g, l}).map(op.getInputArg(k), r.shared[k]);
      break;
    }
  }
}

Value EpilogueBuilder::partialTerm(ImplicitLocOpBuilder &lb, Row &r, Slot s,
                                   Value value, ReductionKind kind) {
  return arith::SelectOp::create(lb, slotInBounds(lb, r, s),
                                 toF32(lb, mapping(r, s).lookup(value)),
                                 identity(lb, kind));
}

void EpilogueBuilder::storeInterleaved(ImplicitLocOpBuilder &lb, Row &r,
                                       unsigned i,
                                       ArrayRef<unsigned> runIndices) {
  auto interleave =
      op.getYieldOp().getValues()[i].getDefiningOp<InterleaveOp>();
  Value two = index(lb, 2);
  Value limit = arith::MulIOp::create(lb, frame.sizeN, two);
  for (unsigned runIndex : runIndices) {
    const Run &run = runs[runIndex];
    Slot head = run.front();
    SmallVector<Value> values;
    for (Slot slot : run) {
      values.push_back(mapping(r, slot).lookup(interleave.getEven()));
      values.push_back(mapping(r, slot).lookup(interleave.getOdd()));
    }
    // A run of columns [c, c + r) fills [2c, 2c + 2r): even, odd per
    // column.
    Value col = arith::MulIOp::create(lb, cols[head.group][head.lane], two);
    storeRun(lb, outputs[i], {r.row, col}, values,
             plan.fragments
                 ? roomBounds(lb, r.room, slotOffset(head), values.size(),
                              /*perColumn=*/2)
                 : limitBounds(lb, r.inRow, col, values.size(), limit));
  }
}

void EpilogueBuilder::consumeGroupRun(ImplicitLocOpBuilder &lb, Row &r,
                                      unsigned gr) {
  ValueRange yielded = op.getYieldOp().getValues();
  // Staged outputs' runs narrowed to 16 bits as soon as they are computed.
  for (auto [i, value] : llvm::enumerate(yielded)) {
    if (roles[i] != OutputRole::tile || !staged(i))
      continue;
    for (unsigned runIndex : r.runsOfGroupRun[gr]) {
      SmallVector<Value> values;
      for (Slot slot : runs[runIndex])
        values.push_back(mapping(r, slot).lookup(value));
      r.narrowed[{unsigned(i), runIndex}] = narrowPairs(lb, values);
    }
  }
  // Interleaved outputs are stored, and eager row partials combined
  // (OutputPlan::eager), as each group run is evaluated; combined in the
  // blocks' slot order where group runs follow the groups, as they do but
  // for periodic inputs.
  for (auto [i, value] : llvm::enumerate(yielded)) {
    if (roles[i] == OutputRole::interleaved)
      storeInterleaved(lb, r, i, r.runsOfGroupRun[gr]);
    if (!eagerPartials(i))
      continue;
    ReductionKind kind = getPartialKind(value);
    for (auto [p, block] : llvm::enumerate(partialBlocks))
      for (Slot s : block.slots) {
        if (llvm::is_contained(groupRuns[gr], s.group))
          r.runningPartials[i][p] = buildReductionCombine(
              lb, lb.getLoc(), kind, r.runningPartials[i][p],
              partialTerm(lb, r, s, value, kind));
      }
  }
}

void EpilogueBuilder::storeTileOutput(ImplicitLocOpBuilder &lb, Row &r,
                                      unsigned i) {
  Value value = op.getYieldOp().getValues()[i];
  if (tmaStored(i)) {
    // Each run is the lane's two columns 8j + 2q, 8j + 2q + 1 of a chunk
    // j: one 32-bit register of stmatrix.
    SmallVector<Value> packed(config.tileN / 8);
    for (auto [runIndex, run] : llvm::enumerate(runs)) {
      auto [j, e] = fragmentPos[run.front().group][run.front().lane];
      SmallVector<Value> values =
          r.narrowed.lookup({i, unsigned(runIndex)});
      Value pair = vector::FromElementsOp::create(
          lb, VectorType::get({2}, values.front().getType()), values);
      packed[j] = LLVM::BitcastOp::create(lb, lb.getI32Type(), pair);
    }
    storeStagedWithTma(lb, i, r.row, packed);
    return;
  }
  if (staged(i)) {
    // A run's columns: 8j + e + 2q on, from the head's fragment position.
    SmallVector<StagedRun> stagedRuns;
    for (auto [runIndex, run] : llvm::enumerate(runs)) {
      auto [j, e] = fragmentPos[run.front().group][run.front().lane];
      stagedRuns.push_back(
          {8 * j + e, twoQ, r.narrowed.lookup({i, unsigned(runIndex)})});
    }
    storeStaged(lb, outputs[i], r.row, config.tileN, frame.blockN,
                frame.sizeN, stagedRuns);
    return;
  }
  for (const Run &run : runs) {
    Slot head = run.front();
    SmallVector<Value> values;
    for (Slot slot : run)
      values.push_back(mapping(r, slot).lookup(value));
    Value col = cols[head.group][head.lane];
    storeRun(lb, outputs[i], {r.row, col}, values,
             plan.fragments
                 ? roomBounds(lb, r.room, slotOffset(head), run.size())
                 : limitBounds(lb, r.inRow, col, run.size(), frame.sizeN));
  }
}

void EpilogueBuilder::storePairOutput(ImplicitLocOpBuilder &lb, Row &r,
                                      unsigned i) {
  Value value = op.getYieldOp().getValues()[i];
  // Pair j of block k lands in column k s + j: the tile's pairs start at
  // blockN / 2.
  Value tilePairs = arith::DivUIOp::create(lb, frame.blockN, index(lb, 2));
  Value pairLimit = arith::DivUIOp::create(lb, frame.sizeN, index(lb, 2));
  if (staged(i)) {
    // A group run's pairs: pairStatic + the lane's part of the number.
    SmallVector<StagedRun> stagedRuns;
    for (ArrayRef<int64_t> groupRun : groupRuns) {
      SmallVector<Value> values;
      for (int64_t g : groupRun)
        values.push_back(mapping(r, {g, 0}).lookup(value));
      auto [first, laneOffset] = pairNumber(groupRun.front());
      stagedRuns.push_back({first, laneOffset, values});
    }
    storeStaged(lb, outputs[i], r.row, config.tileN / 2, tilePairs,
                pairLimit, stagedRuns);
    return;
  }
  for (ArrayRef<int64_t> groupRun : groupRuns) {
    SmallVector<Value> values;
    for (int64_t g : groupRun)
      values.push_back(mapping(r, {g, 0}).lookup(value));
    Value pairCol =
        arith::AddIOp::create(lb, tilePairs, groups[groupRun.front()]);
    storeRun(lb, outputs[i], {r.row, pairCol}, values,
             limitBounds(lb, r.inRow, pairCol, values.size(), pairLimit));
  }
}

void EpilogueBuilder::storeRowPartials(ImplicitLocOpBuilder &lb, Row &r,
                                       unsigned i) {
  // Each block's slots in this thread, then the lanes that share it by
  // butterfly shuffles in a fixed order.
  Value value = op.getYieldOp().getValues()[i];
  ReductionKind kind = getPartialKind(value);
  int64_t partialsPerTile = config.tileN / config.rowPartialTile;
  for (auto [p, block] : llvm::enumerate(partialBlocks)) {
    Value acc;
    if (eagerPartials(i)) {
      acc = r.runningPartials[i][p];
    } else {
      SmallVector<Value> masked;
      for (Slot s : block.slots)
        masked.push_back(partialTerm(lb, r, s, value, kind));
      acc = kind == ReductionKind::logsumexp ? logSumExp(lb, masked)
                                             : identity(lb, kind);
      if (kind != ReductionKind::logsumexp)
        for (Value v : masked)
          acc = buildReductionCombine(lb, lb.getLoc(), kind, acc, v);
    }
    acc = shuffleCombine(lb, kind, acc, partialOffsets);
    Value partial = arith::AddIOp::create(
        lb, arith::MulIOp::create(lb, frame.tileCol, index(lb, partialsPerTile)),
        block.indexInTile);
    // The partial's first lane writes it, unless the whole block of
    // columns lies beyond N.
    Value blockStart =
        arith::MulIOp::create(lb, partial, index(lb, config.rowPartialTile));
    Value exists = arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                         blockStart, frame.sizeN);
    storeIf(lb,
            arith::AndIOp::create(
                lb, arith::AndIOp::create(lb, partialLeader, r.inRow), exists),
            fromF32(lb, acc, partialElementType(i)), outputs[i],
            {r.row, partial});
  }
}

void EpilogueBuilder::accumulateColumnPartials(ImplicitLocOpBuilder &lb,
                                               Row &r, unsigned i,
                                               MutableArrayRef<Value> running) {
  Value value = op.getYieldOp().getValues()[i];
  ReductionKind kind = getPartialKind(value);
  for (int64_t g = 0, e = groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      Value masked = arith::SelectOp::create(
          lb, slotInBounds(lb, r, {g, l}),
          toF32(lb, mapping(r, {g, l}).lookup(value)), identity(lb, kind));
      Value &slot = running[g * lanesPerGroup + l];
      slot = buildReductionCombine(lb, lb.getLoc(), kind, slot, masked);
    }
}

void EpilogueBuilder::storeRowSelect(ImplicitLocOpBuilder &lb, Row &r,
                                     unsigned i) {
  // Fragments: the target's offset from the lane's first column (2q), one
  // subtraction per row, against each slot's constant offset, so that no
  // column index stays live across the epilogue's rows.
  Value value = op.getYieldOp().getValues()[i];
  auto select = cast<RowSelectOp>(value.getDefiningOp());
  Value laneFirstCol;
  if (plan.fragments)
    laneFirstCol = arith::AddIOp::create(lb, frame.blockN, twoQ);
  for (int64_t g = 0, e = groups.size(); g < e; ++g)
    for (int64_t l = 0; l < lanesPerGroup; ++l) {
      IRMapping &slotMapping = mapping(r, {g, l});
      Value target = slotMapping.lookup(select.getColumn());
      if (!target.getType().isIndex())
        target = arith::IndexCastOp::create(lb, lb.getIndexType(), target);
      Value matches =
          plan.fragments
              ? arith::CmpIOp::create(
                    lb, arith::CmpIPredicate::eq,
                    arith::SubIOp::create(lb, target, laneFirstCol),
                    index(lb, slotOffset({g, l})))
              : arith::CmpIOp::create(lb, arith::CmpIPredicate::eq, target,
                                      cols[g][l]);
      Value hit = arith::AndIOp::create(lb, slotInBounds(lb, r, {g, l}),
                                        matches);
      storeIf(lb, hit, slotMapping.lookup(value), outputs[i], {r.row});
    }
}

void EpilogueBuilder::storeRowOutputs(ImplicitLocOpBuilder &lb, Row &r,
                                      MutableArrayRef<Value> nextCol) {
  int64_t slotsPerThread = groups.size() * lanesPerGroup;
  unsigned colSlot = 0;
  for (unsigned i = 0, e = roles.size(); i < e; ++i) {
    switch (roles[i]) {
    case OutputRole::tile:
      storeTileOutput(lb, r, i);
      break;
    case OutputRole::interleaved:
      // Stored group run by group run (consumeGroupRun).
      break;
    case OutputRole::pair:
      storePairOutput(lb, r, i);
      break;
    case OutputRole::rowPartials:
      storeRowPartials(lb, r, i);
      break;
    case OutputRole::colPartials:
      accumulateColumnPartials(lb, r, i,
                               nextCol.slice(colSlot, slotsPerThread));
      colSlot += slotsPerThread;
      break;
    case OutputRole::rowSelect:
      storeRowSelect(lb, r, i);
      break;
    }
  }
}

SmallVector<Value> EpilogueBuilder::emitRow(
    ImplicitLocOpBuilder &lb, Value localRow, int64_t fragmentRow,
    function_ref<Value(Slot)> accumulator, ValueRange colAccs) {
  Row r = beginRow(lb, localRow, fragmentRow);
  SmallVector<Value> nextCol(colAccs);
  mapAccumulators(lb, r, accumulator);
  readRowInputs(lb, r);
  beginGroupRuns(lb, r);
  // Group run by group run: its inputs read, the region evaluated and its
  // 16-bit outputs narrowed, so that only one group run's inputs and f32
  // results are live beside the accumulators.
  for (auto [gr, groupRun] : llvm::enumerate(groupRuns)) {
    mapGroupRunInputs(lb, r, gr);
    for (int64_t g : groupRun) {
      MutableArrayRef<IRMapping> lanes(&r.mappings[g * lanesPerGroup],
                                       lanesPerGroup);
      evaluateEpilogueBody(lb, op, r.row, cols[g], lanes);
    }
    consumeGroupRun(lb, r, gr);
  }
  storeRowOutputs(lb, r, nextCol);
  return nextCol;
}
