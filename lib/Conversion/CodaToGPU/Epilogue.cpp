//===- Epilogue.cpp - the epilogue of a coda.gemm kernel ------------------===//
//
// The epilogue of a GEMM kernel's tile (EpilogueBuilder.h): the plan read
// once, the interior and edge copies, the walk over the layout's rows (the
// shared tile's passes or the fragments' rows), the column partials' finish,
// the loads a register epilogue takes before its mainloop, and the entry
// points the schedules call (GemmKernel.h).
//
//===----------------------------------------------------------------------===//

#include "EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

EpilogueBuilder::ColumnScratch
EpilogueBuilder::columnScratch(ImplicitLocOpBuilder &b,
                               unsigned scratchIndex) const {
  ColumnScratch scratch;
  scratch.rows = plan.fragments ? config.epilogueThreads / 32
                                : config.epilogueRowsPerPass();
  MLIRContext *ctx = b.getContext();
  auto scratchType = MemRefType::get(
      {scratch.rows, config.tileN}, b.getF32Type(), MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  int64_t offset = config.columnScratchOffset() +
                   scratchIndex * scratch.rows * config.tileN * 4;
  scratch.view = memref::ViewOp::create(
      b, scratchType, frame.shared,
      arith::AddIOp::create(b, frame.sharedBase, index(b, offset)),
      ValueRange{});
  if (plan.fragments) {
    scratch.writer = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                           frame.lane, index(b, 4));
    scratch.row = frame.warp;
  } else {
    scratch.row = arith::DivUIOp::create(
        b, frame.tid, index(b, config.tileN / kColumnsPerThread));
  }
  return scratch;
}

void EpilogueBuilder::storeColumnScratch(ImplicitLocOpBuilder &b,
                                         const ColumnScratch &scratch,
                                         ArrayRef<Value> values) const {
  auto store = [&](ImplicitLocOpBuilder &sb) {
    for (int64_t g = 0; g < int64_t(layout.groups.size()); ++g)
      for (int64_t l = 0; l < lanesPerGroup; ++l)
        memref::StoreOp::create(
            sb, values[g * lanesPerGroup + l], scratch.view,
            ValueRange{scratch.row, layout.localCols[g][l]});
  };
  if (!scratch.writer)
    return store(b);
  scf::IfOp::create(b, scratch.writer, [&](OpBuilder &ob, Location loc) {
    ImplicitLocOpBuilder sb(loc, ob);
    store(sb);
    scf::YieldOp::create(sb);
  });
}

void EpilogueBuilder::finishColumnPartials(ImplicitLocOpBuilder &b,
                                           ValueRange colAccs) {
  // Each thread's running values go to a column scratch; then one thread
  // per column combines the rows in order and writes this tile's partial.
  ValueRange yielded = op.getYieldOp().getValues();
  int64_t slotsPerThread = layout.groups.size() * lanesPerGroup;
  // The previous tile's finish is done reading the scratch.
  frame.syncEpilogue(b);
  unsigned colSlot = 0, scratchIndex = 0;
  SmallVector<std::pair<unsigned, ColumnScratch>> scratches;
  for (auto [i, value] : llvm::enumerate(yielded)) {
    if (roles[i] != OutputRole::colPartials)
      continue;
    ColumnScratch scratch = columnScratch(b, scratchIndex++);
    ReductionKind kind = getPartialKind(value);
    SmallVector<Value> values;
    for (int64_t s = 0; s < slotsPerThread; ++s) {
      Value v = colAccs[colSlot + s];
      // The 8 lanes of a column (l / 4) first combine by shuffles.
      if (plan.fragments)
        v = shuffleCombine(b, kind, v, {4, 8, 16});
      values.push_back(v);
    }
    storeColumnScratch(b, scratch, values);
    colSlot += slotsPerThread;
    scratches.push_back({unsigned(i), scratch});
  }
  frame.syncEpilogue(b);
  for (auto [output, columnScratch] : scratches) {
    unsigned i = output;
    Value scratch = columnScratch.view;
    int64_t scratchRows = columnScratch.rows;
    Value value = yielded[i];
    ReductionKind kind = getPartialKind(value);
    Type elementType = partialElementType(i);
    Value out = outputs[i];
    scf::ForOp::create(
        b, frame.tid, index(b, config.tileN), index(b, config.epilogueThreads),
        ValueRange{},
        [&](OpBuilder &ob, Location loc, Value localCol, ValueRange) {
          ImplicitLocOpBuilder lb(loc, ob);
          Value total = identity(lb, kind);
          for (int64_t r = 0; r < scratchRows; ++r)
            total = buildReductionCombine(
                lb, loc, kind, total,
                memref::LoadOp::create(lb, scratch,
                                       ValueRange{index(lb, r), localCol}));
          Value col = arith::AddIOp::create(lb, frame.blockN, localCol);
          Value inCol = arith::CmpIOp::create(lb, arith::CmpIPredicate::ult,
                                              col, frame.sizeN);
          storeIf(lb, inCol, fromF32(lb, total, elementType), out,
                  {frame.tileRow, col});
          scf::YieldOp::create(lb);
        });
  }
}

EpilogueBuilder::EpilogueBuilder(GemmOp op, const GemmKernelConfig &config,
                                 const EpiloguePlan &plan,
                                 const KernelFrame &frame, ValueRange inputs,
                                 ValueRange outputs, bool interior)
    : op(op), config(config), plan(plan), frame(frame), inputs(inputs),
      outputs(outputs), pairStride(op.getPairStride()), interior(interior) {
  for (const OutputPlan &output : plan.outputs)
    roles.push_back(output.role);
  lanesPerGroup = pairStride ? 2 : 1;
}

EpilogueBuilder::~EpilogueBuilder() = default;

std::unique_ptr<InputNode>
mlir::coda::gpu_lowering::makeInputNode(EpilogueBuilder &e, unsigned k) {
  switch (e.op.getInputForm(k)) {
  case AccessForm::tile:
    return makeTileInput(e, k);
  case AccessForm::col:
    return makeColumnInput(e, k);
  case AccessForm::row:
    return makeRowInput(e, k);
  case AccessForm::scalar:
    return makeScalarInput(e, k);
  case AccessForm::periodic:
    return makePeriodicInput(e, k);
  case AccessForm::pair:
    return makePairInput(e, k);
  }
  llvm_unreachable("unknown access form");
}

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeOutputNode(EpilogueBuilder &e, unsigned i) {
  switch (e.plan.outputs[i].role) {
  case OutputRole::tile:
    return makeTileOutput(e, i);
  case OutputRole::pair:
    return makePairOutput(e, i);
  case OutputRole::interleaved:
    return makeInterleavedOutput(e, i);
  case OutputRole::rowPartials:
    return makeRowPartialsOutput(e, i);
  case OutputRole::colPartials:
    return makeColumnPartialsOutput(e, i);
  case OutputRole::rowSelect:
    return makeRowSelectOutput(e, i);
  case OutputRole::grouped:
    return makeGroupValueOutput(e, i);
  case OutputRole::colGrouped:
    return makeColumnGroupValueOutput(e, i);
  case OutputRole::transposed:
    return makeTransposedOutput(e, i);
  }
  llvm_unreachable("unknown output role");
}

void EpilogueBuilder::build(ImplicitLocOpBuilder &b) {
  bool fragments = plan.fragments;
  assert(fragments == !frame.accFragments.empty() &&
         "the plan's layout is the schedule's");
  for (unsigned k = 0, e = inputs.size(); k < e; ++k)
    inputNodes.push_back(makeInputNode(*this, k));
  for (unsigned i = 0, e = outputs.size(); i < e; ++i)
    outputNodes.push_back(makeOutputNode(*this, i));
  layout = fragments
               ? layOutFragments(b, config, frame.lane, pairStride, plan.inputs)
               : layOutSharedTile(b, config, frame.tid, pairStride);
  layOutGroups(b);
  layOutInputRows(b);
  for (Operation &inner : op.getBody().without_terminator())
    if (!llvm::is_contained(plan.columnUniform.ops, &inner))
      rowOps.push_back(&inner);
  // Columns in the output, the same in every row, and (shared tile; the
  // fragments compare against each row's room) whether they lie in it.
  for (SmallVector<Value, 2> &group : layout.localCols) {
    cols.emplace_back();
    inCols.emplace_back();
    for (Value local : group) {
      cols.back().push_back(arith::AddIOp::create(b, frame.blockN, local));
      if (!fragments)
        inCols.back().push_back(
            interior ? trueValue(b)
                     : arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                             cols.back().back(), frame.sizeN)
                           .getResult());
    }
  }

  // The values the outputs carry across the tile's rows (column partials).
  SmallVector<Value> colInit;
  for (std::unique_ptr<OutputNode> &node : outputNodes)
    node->beginTile(b, colInit);
  // The tile's columns of the column inputs it stages, once per tile.
  if (fragments)
    for (std::unique_ptr<InputNode> &node : inputNodes)
      node->beginTile(b);
  // Statistics of groups along columns, before any row uses them.
  computeColumnStatistics(b);
  issueFirstRows(b);
  SmallVector<Value> colAccs = walkRows(
      b, colInit,
      [&](ImplicitLocOpBuilder &lb, Value localRow, int64_t fragmentRow,
          function_ref<Value(Slot)> accumulator, ValueRange running) {
        return emitRow(lb, localRow, fragmentRow, accumulator, running);
      });
  if (!colInit.empty())
    finishColumnPartials(b, colAccs);
}

void EpilogueBuilder::issueFirstRows(ImplicitLocOpBuilder &b) {
  if (!config.pipelinedInputs || !plan.fragments)
    return;
  assert(int64_t(plan.pipelined.size()) == config.pipelinedInputs &&
         "the configuration counts the inputs the epilogue pipelines");
  for (int64_t r = 0;
       r < std::min(GemmKernelConfig::kPipelineSlots, fragmentRows()); ++r)
    issuePipelinedRow(b, r);
}

SmallVector<Value> EpilogueBuilder::walkRows(ImplicitLocOpBuilder &b,
                                             ValueRange init, RowFn row) {
  if (plan.fragments) {
    // Rows 16 w + l / 4 + fragmentRowOffset(f, h); element (j, h, e) of a
    // fragment is its member 4j + 2h + e.
    Value quadRow = arith::AddIOp::create(
        b, warpFragmentRow(b),
        arith::DivUIOp::create(b, frame.lane, index(b, 4)));
    SmallVector<Value> running(init);
    for (auto [f, fragmentValue] : llvm::enumerate(frame.accFragments))
      for (int64_t h = 0; h < 2; ++h) {
        Value fragment = fragmentValue;
        Value localRow = arith::AddIOp::create(
            b, quadRow, index(b, fragmentRowOffset(f, h)));
        running = row(
            b, localRow, 2 * int64_t(f) + h,
            [&](Slot s) -> Value {
              auto [j, e] = layout.fragmentPos[s.group][s.lane];
              return LLVM::ExtractValueOp::create(b, fragment,
                                                  j * 4 + h * 2 + e);
            },
            running);
      }
    return running;
  }
  {
    int64_t threadsPerRow = config.tileN / kColumnsPerThread;
    int64_t rowsPerPass = config.epilogueRowsPerPass();
    int64_t passes = config.tileM / rowsPerPass;
    // Passes per iteration: the loop body is straight-line code (interior)
    // whose input loads ptxas can issue ahead of the previous rows' math,
    // so that a few rows' loads are in flight at once instead of one.
    int64_t unroll = std::min<int64_t>(config.epilogueUnroll, passes);
    while (passes % unroll)
      --unroll;
    Value threadRow =
        arith::DivUIOp::create(b, frame.tid, index(b, threadsPerRow));
    auto rowLoop = scf::ForOp::create(
        b, index(b, 0), index(b, passes), index(b, unroll), init,
        [&](OpBuilder &ob, Location loc, Value pass, ValueRange accs) {
          ImplicitLocOpBuilder lb(loc, ob);
          SmallVector<Value> running(accs);
          for (int64_t u = 0; u < unroll; ++u) {
            Value localRow = arith::AddIOp::create(
                lb, threadRow,
                arith::MulIOp::create(
                    lb, arith::AddIOp::create(lb, pass, index(lb, u)),
                    index(lb, rowsPerPass)));
            // The accumulator tile: in bounds and 16-byte aligned by
            // construction (rows of tileN + 4 floats, runs at multiples of
            // 4).
            DenseMap<std::pair<int64_t, int64_t>, Value> acc;
            for (const Run &run : layout.runs) {
              Slot head = run.front();
              auto type =
                  VectorType::get({int64_t(run.size())}, lb.getF32Type());
              Value loaded = vector::LoadOp::create(
                  lb, type, frame.accTile,
                  ValueRange{localRow, layout.localCols[head.group][head.lane]},
                  /*nontemporal=*/false,
                  llvm::MaybeAlign(std::min<int64_t>(run.size() * 4, 16)));
              for (auto [e, slot] : llvm::enumerate(run))
                acc[{slot.group, slot.lane}] = vector::ExtractOp::create(
                    lb, loaded, ArrayRef<int64_t>{int64_t(e)});
            }
            running = row(
                lb, localRow, /*fragmentRow=*/-1,
                [&](Slot s) { return acc.lookup({s.group, s.lane}); }, running);
          }
          scf::YieldOp::create(lb, running);
        });
    return rowLoop.getResults();
  }
}

EpiloguePrefetch EpilogueBuilder::prefetch(ImplicitLocOpBuilder &b,
                                           int64_t part, int64_t parts) const {
  EpiloguePrefetch result;
  result.interior = interiorCondition(b);
  SmallVector<InputPrefetch> prefetches;
  for (const InputPlan &input : plan.inputs)
    prefetches.push_back(input.prefetch);
  // This part's loads: [first, last) of all of them in order.
  int64_t total = 0;
  for (const InputPrefetch &input : prefetches)
    total += input.loads;
  int64_t first = total * part / parts, last = total * (part + 1) / parts;
  SmallVector<int64_t> taken(prefetches.size(), 0);
  SmallVector<Type> types;
  int64_t position = 0;
  for (auto [k, input] : llvm::enumerate(inputs)) {
    auto element = cast<MemRefType>(input.getType()).getElementType();
    for (int64_t i = 0; i < prefetches[k].loads; ++i, ++position) {
      if (position < first || position >= last)
        continue;
      ++taken[k];
      types.push_back(VectorType::get({prefetches[k].lanes}, element));
    }
  }
  // A part with no loads (fewer loads than parts).
  if (types.empty()) {
    result.values.resize(prefetches.size());
    return result;
  }
  auto ifOp = scf::IfOp::create(b, types, result.interior, /*withElse=*/true);
  {
    auto tb = ImplicitLocOpBuilder::atBlockBegin(b.getLoc(),
                                                 &ifOp.getThenRegion().front());
    SmallVector<Value> loaded;
    // Whether the next load is this part's (its address is built only
    // then).
    position = 0;
    auto takes = [&] {
      bool mine = position >= first && position < last;
      ++position;
      return mine;
    };
    auto load = [&](Value input, ValueRange indices) {
      auto type = cast<VectorType>(types[loaded.size()]);
      loaded.push_back(vector::LoadOp::create(
          tb, type, input, indices,
          /*nontemporal=*/false,
          llvm::MaybeAlign(type.getNumElements() *
                           type.getElementTypeBitWidth() / 8)));
    };
    // The lane's first row and column in the fragment layout (see
    // layOutFragments; build's rows are 16 w + l / 4 on).
    Value laneRow = arith::AddIOp::create(
        tb, arith::AddIOp::create(tb, frame.blockM, warpFragmentRow(tb)),
        arith::DivUIOp::create(tb, frame.lane, index(tb, 4)));
    Value laneCol = arith::AddIOp::create(
        tb, frame.blockN,
        arith::MulIOp::create(
            tb, arith::RemUIOp::create(tb, frame.lane, index(tb, 4)),
            index(tb, 2)));
    auto column = [&](int64_t j) -> Value {
      return arith::AddIOp::create(tb, laneCol, index(tb, 8 * j));
    };
    for (auto [k, input] : llvm::enumerate(inputs)) {
      const InputPrefetch &p = prefetches[k];
      if (p.kind == InputPrefetch::rowChunks) {
        // Pass i's chunk of the tile's columns, as stageInputRows copies it.
        for (int64_t i = 0; i < p.loads; ++i)
          if (takes())
            load(input, arith::AddIOp::create(tb, frame.blockN,
                                              columnChunkStart(tb, i, p.lanes))
                            .getResult());
        continue;
      }
      if (p.kind != InputPrefetch::fragments)
        continue;
      if (GemmOp(op).getInputForm(k) == AccessForm::col) {
        for (int64_t j = 0; j < p.loads; ++j)
          if (takes())
            load(input, column(j));
        continue;
      }
      // A tile input: fragment row by fragment row.
      int64_t perRow = config.tileN / 8;
      for (int64_t r = 0; r < p.loads / perRow; ++r) {
        Value row = arith::AddIOp::create(
            tb, laneRow, index(tb, fragmentRowOffset(r / 2, r % 2)));
        for (int64_t j = 0; j < perRow; ++j)
          if (takes())
            load(input, ValueRange{row, column(j)});
      }
    }
    scf::YieldOp::create(tb, loaded);
  }
  {
    auto eb = ImplicitLocOpBuilder::atBlockBegin(b.getLoc(),
                                                 &ifOp.getElseRegion().front());
    SmallVector<Value> zeros;
    for (Type type : types)
      zeros.push_back(
          arith::ConstantOp::create(eb, type, eb.getZeroAttr(type)));
    scf::YieldOp::create(eb, zeros);
  }
  // The results, input by input.
  ValueRange results = ifOp.getResults();
  for (int64_t count : taken) {
    result.values.emplace_back(results.take_front(count));
    results = results.drop_front(count);
  }
  return result;
}

ArrayRef<Value> EpilogueBuilder::prefetchedValues(unsigned k) const {
  if (!interior || frame.prefetched.values.empty())
    return {};
  return frame.prefetched.values[k];
}

Value EpilogueBuilder::interiorCondition(ImplicitLocOpBuilder &b) const {
  Value condition = arith::AndIOp::create(
      b, within(b, frame.blockM, config.tileM, frame.sizeM),
      within(b, frame.blockN, config.tileN, frame.sizeN));
  auto aligned = [&](Value memref) {
    condition = arith::AndIOp::create(b, condition, rowsAligned(b, memref, 16));
  };
  for (auto [k, input] : llvm::enumerate(inputs)) {
    AccessForm form = GemmOp(op).getInputForm(k);
    if ((form == AccessForm::tile || form == AccessForm::col) &&
        isa<MemRefType>(input.getType()))
      aligned(input);
    // Periodic inputs read with vector accesses: the period a multiple of
    // every run length (at most kEpilogueColumnsPerThread), so that no run
    // wraps.
    if (form == AccessForm::periodic &&
        vectorAlignment(input, kColumnsPerThread)) {
      aligned(input);
      condition = arith::AndIOp::create(
          b, condition,
          arith::CmpIOp::create(
              b, arith::CmpIPredicate::eq,
              arith::RemUIOp::create(b, memref::DimOp::create(b, input, 1),
                                     index(b, kColumnsPerThread)),
              index(b, 0)));
    }
  }
  for (auto [i, output] : llvm::enumerate(outputs)) {
    if (roles[i] == OutputRole::tile || roles[i] == OutputRole::transposed)
      aligned(output);
    // An interleaved output's runs: both values of a lane's two columns,
    // checked once per tile (checking each run's stores spills more).
    if (roles[i] == OutputRole::interleaved)
      condition = arith::AndIOp::create(
          b, condition,
          rowsAligned(
              b, output,
              4 * cast<MemRefType>(output.getType()).getElementTypeBitWidth() /
                  8));
  }
  return condition;
}

void mlir::coda::gpu_lowering::emitEpilogue(ImplicitLocOpBuilder &b, GemmOp op,
                                            const GemmKernelConfig &config,
                                            const EpiloguePlan &plan,
                                            const KernelFrame &frame,
                                            ValueRange inputs,
                                            ValueRange outputs) {
  // A tile inside the output (all but the last row and column of tiles)
  // takes a copy without a bounds or alignment check per element, where it
  // pays: straight-line code (the register epilogue is unrolled over the
  // thread's whole share of the tile, the shared-tile one over a few rows)
  // in which the inputs' loads can be issued ahead.
  EpilogueBuilder checked(op, config, plan, frame, inputs, outputs);
  if (!plan.interiorCopy) {
    checked.build(b);
    return;
  }
  Value interior = frame.prefetched.interior ? frame.prefetched.interior
                                             : checked.interiorCondition(b);
  scf::IfOp::create(
      b, interior,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        EpilogueBuilder(op, config, plan, frame, inputs, outputs,
                        /*interior=*/true)
            .build(tb);
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        checked.build(eb);
        scf::YieldOp::create(eb);
      });
}

void mlir::coda::gpu_lowering::finishEpilogue(ImplicitLocOpBuilder &b,
                                              const GemmKernelConfig &config,
                                              const KernelFrame &frame) {
  if (!config.tmaStores)
    return;
  Value laneZero =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, frame.lane,
                            arith::ConstantIndexOp::create(b, 0));
  scf::IfOp::create(b, laneZero, [&](OpBuilder &ob, Location loc) {
    NVVM::CpAsyncBulkWaitGroupOp::create(ob, loc, /*group=*/0, UnitAttr());
    scf::YieldOp::create(ob, loc);
  });
}

EpiloguePrefetch mlir::coda::gpu_lowering::prefetchEpilogue(
    ImplicitLocOpBuilder &b, GemmOp op, const GemmKernelConfig &config,
    const EpiloguePlan &plan, const KernelFrame &frame, ValueRange inputs,
    ValueRange outputs, int64_t part, int64_t parts) {
  if (!plan.prefetches())
    return {};
  return EpilogueBuilder(op, config, plan, frame, inputs, outputs)
      .prefetch(b, part, parts);
}

EpiloguePrefetch
mlir::coda::gpu_lowering::mergePrefetches(ArrayRef<EpiloguePrefetch> parts) {
  EpiloguePrefetch merged;
  for (const EpiloguePrefetch &part : parts) {
    if (!part.interior)
      continue;
    if (!merged.interior)
      merged.interior = part.interior;
    merged.values.resize(std::max(merged.values.size(), part.values.size()));
    for (auto [k, values] : llvm::enumerate(part.values))
      llvm::append_range(merged.values[k], values);
  }
  return merged;
}
