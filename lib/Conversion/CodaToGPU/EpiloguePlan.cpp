//===- EpiloguePlan.cpp - where each epilogue operand lives and moves -----===//
//
// The rules that place each epilogue input and output (staging buffers,
// prefetches, pipelined slots, row buffers, TMA stores, eager consumption)
// and planEpilogue, which applies them once to a configured kernel.
//
//===----------------------------------------------------------------------===//

#include "EpiloguePlan.h"

#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

/// The column-uniform ops of `op` but those in `excluded` and what they
/// feed.
static ColumnUniform
findColumnUniform(GemmOp op,
                  const llvm::SmallPtrSetImpl<Operation *> &excluded) {
  ColumnUniform u;
  llvm::SmallPtrSet<Operation *, 8> uniform;
  auto isUniformOperand = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && (uniform.contains(def) || isa<arith::ConstantOp>(def));
  };
  for (Operation &inner : op.getBody().without_terminator()) {
    auto stat = dyn_cast<GroupReduceOp>(inner);
    bool elementwise =
        isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()) &&
        !isa<arith::ConstantOp>(inner) && inner.getNumRegions() == 0 &&
        inner.getNumResults() == 1 &&
        isa<Float32Type, Float64Type>(inner.getResult(0).getType()) &&
        inner.getNumOperands() > 0 &&
        llvm::all_of(inner.getOperands(), isUniformOperand);
    if (((stat && stat.getAxis() == ReductionAxis::col) || elementwise) &&
        !excluded.contains(&inner)) {
      uniform.insert(&inner);
      u.ops.push_back(&inner);
    }
  }
  for (Operation *inner : u.ops)
    if (llvm::any_of(inner->getResult(0).getUsers(),
                     [&](Operation *user) { return !uniform.contains(user); }))
      u.frontier.push_back(inner->getResult(0));
  return u;
}

ColumnUniform mlir::coda::gpu_lowering::analyzeColumnUniform(GemmOp op) {
  // The rows hold f32: a frontier value of another type (an f64 step the
  // rest reads) is computed at every element instead, and so is what
  // depends on it.
  llvm::SmallPtrSet<Operation *, 8> excluded;
  while (true) {
    ColumnUniform u = findColumnUniform(op, excluded);
    bool narrow = true;
    for (Value v : u.frontier)
      if (!v.getType().isF32() && !isa<GroupReduceOp>(v.getDefiningOp())) {
        excluded.insert(v.getDefiningOp());
        narrow = false;
      }
    if (narrow)
      return u;
  }
}

OutputRole mlir::coda::gpu_lowering::getOutputRole(Value yielded) {
  Operation *def = yielded.getDefiningOp();
  if (isa<PairType>(yielded.getType()))
    return OutputRole::pair;
  if (isa<InterleavedType>(yielded.getType()))
    return OutputRole::interleaved;
  if (isa_and_nonnull<RowReduceOp>(def))
    return OutputRole::rowPartials;
  if (isa_and_nonnull<ColReduceOp>(def))
    return OutputRole::colPartials;
  if (isa_and_nonnull<RowSelectOp>(def))
    return OutputRole::rowSelect;
  if (isa<TransposedType>(yielded.getType()))
    return OutputRole::transposed;
  if (auto group = dyn_cast_or_null<GroupValueOp>(def))
    return group.getAxis() == ReductionAxis::row ? OutputRole::grouped
                                                 : OutputRole::colGrouped;
  return OutputRole::tile;
}

bool mlir::coda::gpu_lowering::fragmentLayoutSupports(
    std::optional<int64_t> pairStride) {
  return !pairStride || *pairStride == 1 || *pairStride % 8 == 0;
}

/// Whether `value` is a memref with unit innermost stride.
static bool rowsContiguous(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  return type && succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

std::optional<int64_t>
mlir::coda::gpu_lowering::staticPeriod(GemmOp op, unsigned k, int64_t tileN) {
  auto type = dyn_cast<MemRefType>(op.getEpilogueInputs()[k].getType());
  if (op.getInputForm(k) != AccessForm::periodic || !type)
    return std::nullopt;
  // [B x] M x P.
  int64_t period = type.getDimSize(type.getRank() - 1);
  if (ShapedType::isDynamic(period) || period <= 0 || period % 8 ||
      tileN % period)
    return std::nullopt;
  return period;
}

bool mlir::coda::gpu_lowering::stagesInputRows(GemmOp op, unsigned k,
                                               int64_t tileN) {
  Value input = op.getEpilogueInputs()[k];
  auto type = dyn_cast<MemRefType>(input.getType());
  AccessForm form = op.getInputForm(k);
  return (form == AccessForm::col || form == AccessForm::periodic) && type &&
         isa<FloatType>(type.getElementType()) &&
         (type.getElementTypeBitWidth() == 16 ||
          type.getElementTypeBitWidth() == 32) &&
         rowsContiguous(input) && !staticPeriod(op, k, tileN);
}

/// Bytes of input `k`'s rows in one warp's buffer.
static int64_t inputRowBytes(GemmOp op, unsigned k, int64_t tileN) {
  auto type = cast<MemRefType>(op.getEpilogueInputs()[k].getType());
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  if (op.getInputForm(k) == AccessForm::col)
    return tileN * bytes;
  return GemmKernelConfig::stagingRows *
         GemmKernelConfig::stagingRowStride(tileN) * bytes;
}

int64_t mlir::coda::gpu_lowering::inputRowStagingBytes(GemmOp op,
                                                       int64_t tileN) {
  int64_t total = 0;
  for (unsigned k = 0, e = op.getEpilogueInputs().size(); k < e; ++k)
    if (stagesInputRows(op, k, tileN))
      total += inputRowBytes(op, k, tileN);
  return total;
}

bool mlir::coda::gpu_lowering::stagesInput(GemmOp op, unsigned k) {
  Value input = op.getEpilogueInputs()[k];
  auto type = dyn_cast<MemRefType>(input.getType());
  return op.getInputForm(k) == AccessForm::tile && type &&
         isa<BFloat16Type, Float16Type>(type.getElementType()) &&
         rowsContiguous(input);
}

/// Registers per thread that the values a register epilogue prefetches may
/// take (held through the K loop beside the 128 accumulator registers).
constexpr int64_t kPrefetchRegisters = 64;
/// Of those, what one column input may take (an f32 bias over all 256
/// columns of a cooperative tile spills).
constexpr int64_t kColumnPrefetchRegisters = 48;

/// Whether an epilogue whose outputs have `roles` takes an interior copy
/// whatever its schedule (see planInteriorCopy).
static bool interiorPaysFor(ArrayRef<OutputRole> roles) {
  return llvm::is_contained(roles, OutputRole::tile) &&
         !llvm::is_contained(roles, OutputRole::pair) &&
         !llvm::is_contained(roles, OutputRole::interleaved);
}

static SmallVector<OutputRole> outputRoles(GemmOp op) {
  SmallVector<OutputRole> roles;
  for (Value value : op.getYieldOp().getValues())
    roles.push_back(getOutputRole(value));
  return roles;
}

/// storesWithTma's conditions on the epilogue alone: a tile output of an
/// epilogue that takes the interior copy, with no pair input, nor a column
/// input outside ping-pong or beside a tile input.
static bool epilogueLetsTmaStore(GemmOp op, unsigned i, Schedule schedule) {
  SmallVector<OutputRole> roles = outputRoles(op);
  bool tileInput = false, colInput = false;
  for (unsigned k = 0, e = op.getEpilogueInputs().size(); k < e; ++k) {
    AccessForm form = op.getInputForm(k);
    if (form == AccessForm::pair)
      return false;
    tileInput |= form == AccessForm::tile;
    colInput |= form == AccessForm::col;
  }
  if (colInput && (schedule != Schedule::pingPong || tileInput))
    return false;
  return roles[i] == OutputRole::tile && interiorPaysFor(roles);
}

bool mlir::coda::gpu_lowering::stagesOutput(GemmOp op, unsigned i,
                                            Schedule schedule) {
  Value yielded = op.getYieldOp().getValues()[i];
  OutputRole role = getOutputRole(yielded);
  Type element = role == OutputRole::pair
                     ? cast<PairType>(yielded.getType()).getElementType()
                     : yielded.getType();
  bool sixteen = isa<BFloat16Type, Float16Type>(element);
  // The cooperative kernel's 16-byte row copies of 8-bit rows spill; its
  // TMA stores do not.
  bool eight = isa<Float8E4M3FNType, Float8E5M2Type>(element) &&
               role == OutputRole::tile &&
               (schedule != Schedule::cooperative ||
                epilogueLetsTmaStore(op, i, schedule));
  if ((role != OutputRole::tile && role != OutputRole::pair) ||
      !(sixteen || eight))
    return false;
  return rowsContiguous(op.getOutputs()[i]);
}

bool mlir::coda::gpu_lowering::storesWithTma(GemmOp op, unsigned i,
                                             const GemmKernelConfig &config) {
  // The tile's rows leave as whole boxes.
  Type element =
      cast<MemRefType>(op.getOutputs()[i].getType()).getElementType();
  return epilogueLetsTmaStore(op, i, config.schedule) &&
         stagesOutput(op, i, config.schedule) &&
         config.tileN % GemmKernelConfig::storeBoxColumns(element) == 0;
}

SmallVector<unsigned>
mlir::coda::gpu_lowering::tmaStoredOutputs(GemmOp op,
                                           const GemmKernelConfig &config) {
  SmallVector<unsigned> stored;
  if (!config.tmaStores)
    return stored;
  for (unsigned i = 0, e = op.getOutputs().size(); i < e; ++i)
    if (storesWithTma(op, i, config))
      stored.push_back(i);
  return stored;
}

/// The prefetch of each epilogue input: inputs are taken in order while
/// their registers fit in kPrefetchRegisters, a column input at most
/// kColumnPrefetchRegisters of them; the others take none. None at all
/// where no interior tile is emitted.
static SmallVector<InputPrefetch> prefetchPlan(GemmOp op,
                                               const GemmKernelConfig &config) {
  unsigned numInputs = op.getEpilogueInputs().size();
  SmallVector<InputPrefetch> plan(numInputs);
  // Registers held through the K loop pay where the interior copy's
  // staging would be the inputs' only cost (a tile output and no pair or
  // interleaved one); SwiGLU's derivative takes its tile inputs through
  // pipelined slots instead (pipelinedStagedInputs).
  if (!config.registerEpilogue() || !interiorPaysFor(outputRoles(op)))
    return plan;
  int64_t registers = 0;
  for (unsigned k = 0; k < numInputs; ++k) {
    auto type = dyn_cast<MemRefType>(op.getEpilogueInputs()[k].getType());
    if (!type)
      continue;
    int64_t bits = type.getElementTypeBitWidth();
    InputPrefetch p;
    int64_t perLoad = 0;
    if (config.stagedTiles && stagesInput(op, k)) {
      // An epilogue-only kernel has no K loop to hide the fragment loads'
      // latency under, and its 4-byte loads, one per lane and fragment
      // pair, fill the load queue: its staged tile inputs enter through the
      // pipelined slots instead, 16 bytes per copy. So do those of an
      // epilogue with statistics along columns, whose walk of the tile
      // before its rows spills beside the prefetched registers.
      if (config.epilogueOnly || config.numColumnStatistics)
        continue;
      // All of the thread's fragment rows, or nothing.
      p = {InputPrefetch::fragments,
           2 * config.fragmentsPerConsumer() * config.tileN / 8, 2};
      perLoad = 2 * bits / 32;
      if (registers + perLoad * p.loads > kPrefetchRegisters)
        continue;
    } else if (op.getInputForm(k) == AccessForm::col &&
               config.stagedInputRowBytes &&
               stagesInputRows(op, k, config.tileN)) {
      int64_t rowChunks = config.tileN * bits / 8 / 16;
      if (rowChunks % 32)
        continue;
      p = {InputPrefetch::rowChunks, rowChunks / 32, 128 / bits};
      perLoad = 4;
      if (registers + perLoad * p.loads > kPrefetchRegisters)
        continue;
    } else if (op.getInputForm(k) == AccessForm::col &&
               !config.stagedInputRowBytes && (bits == 16 || bits == 32) &&
               isa<FloatType>(type.getElementType())) {
      // The first groups that fit.
      perLoad = 2 * bits / 32;
      int64_t room =
          std::min(kColumnPrefetchRegisters, kPrefetchRegisters - registers);
      p = {InputPrefetch::fragments, std::min(config.tileN / 8, room / perLoad),
           2};
      if (!p.loads)
        continue;
    } else {
      continue;
    }
    registers += perLoad * p.loads;
    plan[k] = p;
  }
  return plan;
}

SmallVector<unsigned> mlir::coda::gpu_lowering::pipelinedStagedInputs(
    GemmOp op, const GemmKernelConfig &config) {
  SmallVector<unsigned> result;
  if (!config.registerEpilogue() || !config.stagedTiles)
    return result;
  SmallVector<InputPrefetch> plan = prefetchPlan(op, config);
  for (unsigned k = 0, e = op.getEpilogueInputs().size(); k < e; ++k)
    if (stagesInput(op, k) && plan[k].loads == 0)
      result.push_back(k);
  return result;
}

//===----------------------------------------------------------------------===//
// planEpilogue
//===----------------------------------------------------------------------===//

/// Whether interior tiles take a copy without bounds or alignment checks:
/// where the epilogue writes a tile output and no pair or interleaved one
/// (a second copy made cross-entropy's partials and SwiGLU's pairs
/// slower), or, under ping-pong, an interleaved output and no pair one
/// (SwiGLU's derivative, whose checked copy outlasted the other consumer's
/// K loop).
static bool planInteriorCopy(ArrayRef<OutputRole> roles,
                             const GemmKernelConfig &config) {
  return interiorPaysFor(roles) ||
         (config.schedule == Schedule::pingPong &&
          llvm::is_contained(roles, OutputRole::interleaved) &&
          !llvm::is_contained(roles, OutputRole::pair));
}

/// Where an edge tile's body reads the accumulator more than once, LLVM
/// would hoist what it computes alike with the interior copy above the
/// branch between them (SimplifyCFG's common-code hoisting): the whole
/// tile's values at once, live beside the accumulators they do not
/// replace, which spills.
static bool planOpaqueEdgeAccumulators(GemmOp op, bool fragments) {
  auto users = op.getAccumulatorArg().getUsers();
  return fragments && llvm::range_size(users) > 1 && !llvm::all_equal(users);
}

/// Whether no output of the row waits for the whole row: interleaved
/// outputs, staged tiles (narrowed as they are computed) and row partials
/// but log-sum-exp (which takes its block's values at once). Then the row
/// partials are combined as each group run is computed too, so that the
/// row's values need not stay live to its end.
static bool rowConsumedEagerly(GemmOp op, ArrayRef<OutputPlan> outputs) {
  ValueRange yielded = op.getYieldOp().getValues();
  return llvm::all_of(llvm::enumerate(outputs), [&](auto indexed) {
    const OutputPlan &output = indexed.value();
    switch (output.role) {
    case OutputRole::interleaved:
      return true;
    case OutputRole::tile:
      return output.staged;
    case OutputRole::rowPartials:
      return getPartialKind(yielded[indexed.index()]) !=
             ReductionKind::logsumexp;
    default:
      return false;
    }
  });
}

/// The rows of column and periodic inputs in the warp's buffer, after its
/// staged tiles, in input order.
static void planInputRowBuffers(GemmOp op, const GemmKernelConfig &config,
                                MutableArrayRef<InputPlan> inputs) {
  if (!config.stagedInputRowBytes || !config.registerEpilogue())
    return;
  int64_t offset = config.tileStagingBytesPerWarp();
  for (auto [k, input] : llvm::enumerate(inputs)) {
    if (!stagesInputRows(op, k, config.tileN))
      continue;
    input.rowBufferOffset = offset;
    offset += inputRowBytes(op, k, config.tileN);
  }
}

EpiloguePlan
mlir::coda::gpu_lowering::planEpilogue(GemmOp op,
                                       const GemmKernelConfig &config) {
  EpiloguePlan plan;
  plan.fragments = config.registerEpilogue();
  bool stagedTiles = config.stagedTiles && plan.fragments;
  SmallVector<OutputRole> roles = outputRoles(op);
  plan.interiorCopy = planInteriorCopy(roles, config);
  plan.opaqueEdgeAccumulators = planOpaqueEdgeAccumulators(op, plan.fragments);

  SmallVector<InputPrefetch> prefetches = prefetchPlan(op, config);
  if (config.pipelinedInputs)
    plan.pipelined = pipelinedStagedInputs(op, config);
  for (unsigned k = 0, e = op.getEpilogueInputs().size(); k < e; ++k) {
    InputPlan &input = plan.inputs.emplace_back();
    input.form = op.getInputForm(k);
    input.staged = stagedTiles && stagesInput(op, k);
    input.prefetch = prefetches[k];
    if (const auto *slot = llvm::find(plan.pipelined, k);
        slot != plan.pipelined.end())
      input.pipelineSlot = slot - plan.pipelined.begin();
    if (plan.fragments)
      input.period = staticPeriod(op, k, config.tileN);
  }
  planInputRowBuffers(op, config, plan.inputs);

  SmallVector<unsigned> tmaStored = tmaStoredOutputs(op, config);
  for (auto [i, role] : llvm::enumerate(roles)) {
    OutputPlan &output = plan.outputs.emplace_back();
    output.role = role;
    output.staged = stagedTiles && stagesOutput(op, i, config.schedule);
    output.tmaStore = llvm::is_contained(tmaStored, i);
  }
  if (config.numColumnStatistics)
    plan.columnUniform = analyzeColumnUniform(op);
  bool eager = rowConsumedEagerly(op, plan.outputs);
  for (OutputPlan &output : plan.outputs)
    output.eager = output.role == OutputRole::interleaved ||
                   (eager && output.role == OutputRole::rowPartials);
  return plan;
}

bool EpiloguePlan::prefetches() const {
  return llvm::any_of(inputs, [](const InputPlan &input) {
    return input.prefetch.kind != InputPrefetch::none;
  });
}

void EpiloguePlan::print(raw_ostream &os) const {
  os << (fragments ? "fragments" : "shared tile");
  if (interiorCopy)
    os << ", interior copy";
  if (opaqueEdgeAccumulators)
    os << ", opaque edge accumulators";
  os << "\n";
  for (auto [k, input] : llvm::enumerate(inputs)) {
    os << "  input " << k << " (" << stringifyAccessForm(input.form) << "):";
    bool any = false;
    auto say = [&](const Twine &what) {
      os << (any ? ", " : " ") << what;
      any = true;
    };
    if (input.staged)
      say("staged");
    if (input.prefetch.kind == InputPrefetch::fragments)
      say("prefetch " + Twine(input.prefetch.loads) + " fragment loads");
    if (input.prefetch.kind == InputPrefetch::rowChunks)
      say("prefetch " + Twine(input.prefetch.loads) + " row chunks");
    if (input.pipelineSlot)
      say("pipelined slot " + Twine(*input.pipelineSlot));
    if (input.rowBufferOffset)
      say("row buffer at " + Twine(*input.rowBufferOffset));
    if (input.period)
      say("period " + Twine(*input.period));
    if (!any)
      say("direct");
    os << "\n";
  }
  for (auto [i, output] : llvm::enumerate(outputs)) {
    os << "  output " << i << " (" << stringifyRole(output.role) << "):";
    bool any = false;
    auto say = [&](StringRef what) {
      os << (any ? ", " : " ") << what;
      any = true;
    };
    if (output.staged)
      say("staged");
    if (output.tmaStore)
      say("TMA store");
    if (output.eager)
      say("eager");
    if (!any)
      say("direct");
    os << "\n";
  }
  if (columnUniform.ops.empty())
    return;
  // What each column's rows hold: its statistics and the values derived
  // from them that the rows read.
  os << "  per column:";
  for (Value v : columnUniform.frontier)
    os << " " << v.getDefiningOp()->getName();
  os << "\n";
}
