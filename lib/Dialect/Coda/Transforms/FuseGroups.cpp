//===- FuseGroups.cpp - statistics of groups of a GEMM's row, fused -------===//
//
// A frontend writes a statistic over groups of w columns of a GEMM's output
// (a 1 x 128 quantization's amax, a per-head RMSNorm's sum of squares) on
// the output viewed as [M, N / w, w] (`tensor.expand_shape`): a reduction
// over the last dimension, elementwise math on the statistics, and an
// elementwise op over [M, N / w, w] that reads the output and the
// statistics broadcast along the group. Each becomes part of the GEMM's
// epilogue: the reduction a `coda.group_reduce` whose statistics leave as a
// `coda.group_value` output, the math on them a new `group_value`, the op
// over the view a tile output. The [M, N] output need not be written.
//
//===----------------------------------------------------------------------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSEGROUPS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Group widths an epilogue statistic takes (GroupReduceOp's verifier).
bool isGroupWidth(int64_t w) {
  return w >= 8 && w <= 256 && llvm::isPowerOf2_64(w);
}

/// A GEMM output as a generic over [M, G, w] (loops d0, d1, d2) reads it:
/// its tile output through the [M, N] -> [M, G, w] view, or its statistics
/// (a row group_value of width w) once per group.
struct GroupRead {
  GemmOp gemm;
  OpResult result;
  /// The epilogue value the output is made from: the tile's element, or the
  /// value its group_value writes (the same over the group).
  Value value;
  bool statistic;
};

/// `value` as the view [M, G, w] of a 2-D GEMM tile output, read through
/// `map` (identity); or as row statistics of width w ([M, G], or [M, G, 1]
/// through its expand_shape), read through (d0, d1) or (d0, d1, 0).
std::optional<GroupRead> getGroupRead(Value value, AffineMap map, int64_t w) {
  MLIRContext *ctx = map.getContext();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  auto type = cast<RankedTensorType>(value.getType());
  Value source = value;
  bool expanded = false;
  if (auto expand = value.getDefiningOp<tensor::ExpandShapeOp>()) {
    if (expand.getReassociationIndices() !=
        SmallVector<ReassociationIndices>{{0}, {1, 2}})
      return std::nullopt;
    source = expand.getSrc();
    expanded = true;
  }
  auto result = dyn_cast<OpResult>(source);
  auto gemm = result ? dyn_cast<GemmOp>(result.getOwner()) : GemmOp();
  if (!gemm || gemm.isBatched())
    return std::nullopt;
  Value yielded = gemm.getYieldOp().getValues()[result.getResultNumber()];
  if (auto group = yielded.getDefiningOp<GroupValueOp>()) {
    // [M, G, 1] is read at 0 along the group, or along a loop of one.
    bool perGroup =
        map.getNumResults() == (expanded ? 3u : 2u) && map.getResult(0) == d0 &&
        map.getResult(1) == d1 &&
        (!expanded || map.getResult(2) == getAffineConstantExpr(0, ctx) ||
         map.getResult(2) == getAffineDimExpr(2, ctx));
    if (!perGroup || group.getAxis() != ReductionAxis::row ||
        int64_t(group.getWidth()) != w)
      return std::nullopt;
    return GroupRead{gemm, result, group.getValue(), true};
  }
  if (!expanded || !yielded.getType().isIntOrIndexOrFloat() ||
      !map.isIdentity() || type.getDimSize(2) != w)
    return std::nullopt;
  return GroupRead{gemm, result, yielded, false};
}

/// The group width of a generic over [M, G, w]: its last loop's static size.
std::optional<int64_t> groupWidth(linalg::GenericOp op) {
  if (op.getNumLoops() != 3)
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (!isGroupWidth(ranges[2]))
    return std::nullopt;
  return ranges[2];
}

/// The outputs of `gemm` but those in `dropped`, then `added`; and the
/// results kept, in order.
struct OutputPlan {
  SmallVector<Value> outputs;
  SmallVector<unsigned> kept;
};
OutputPlan keepOutputs(GemmOp gemm, ArrayRef<OpResult> dropped, Value added) {
  OutputPlan plan;
  for (OpResult result : gemm->getResults()) {
    if (llvm::is_contained(dropped, result))
      continue;
    plan.kept.push_back(result.getResultNumber());
    plan.outputs.push_back(gemm.getOutputs()[result.getResultNumber()]);
  }
  plan.outputs.push_back(added);
  return plan;
}

/// The results of `gemm` that only `op` reads (directly or through a
/// reshape only it reads): no longer written once `op` joins the epilogue.
SmallVector<OpResult> readOnlyBy(GemmOp gemm, Operation *op) {
  auto onlyOp = [&](Operation *user) { return user == op; };
  SmallVector<OpResult> results;
  for (OpResult result : gemm->getResults())
    if (llvm::all_of(result.getUsers(), [&](Operation *user) {
          return onlyOp(user) || (isa<tensor::ExpandShapeOp>(user) &&
                                  llvm::all_of(user->getUsers(), onlyOp));
        }))
      results.push_back(result);
  return results;
}

/// Replaces `op` by `replacement`, then `gemm` by `fused`, whose first
/// results are `plan.kept`'s (the others only `op` read).
void replaceOpAndGemm(RewriterBase &rewriter, Operation *op, Value replacement,
                      GemmOp gemm, GemmOp fused, const OutputPlan &plan) {
  rewriter.replaceOp(op, replacement);
  for (auto [i, result] : llvm::enumerate(plan.kept))
    rewriter.replaceAllUsesWith(gemm->getResult(result), fused->getResult(i));
  for (Operation *reshape : llvm::make_early_inc_range(gemm->getUsers()))
    rewriter.eraseOp(reshape);
  rewriter.eraseOp(gemm);
}

/// `value`, a [M, X] output of `gemm`, as `type` ([M, G, w] or [M, G, 1]);
/// M read from the GEMM's lhs, so that nothing but the reshape reads the
/// output (which a later fusion may then stop writing).
Value expandRows(RewriterBase &rewriter, Location loc, GemmOp gemm, Value value,
                 RankedTensorType type) {
  if (value.getType() == type)
    return value;
  SmallVector<OpFoldResult> shape;
  for (int64_t size : type.getShape())
    shape.push_back(rewriter.getIndexAttr(size));
  if (type.isDynamicDim(0))
    shape[0] =
        tensor::DimOp::create(rewriter, loc, gemm.getLhs(), gemm.getLhsMDim())
            .getResult();
  return tensor::ExpandShapeOp::create(rewriter, loc, type, value,
                                       {{0}, {1, 2}}, shape);
}

//===----------------------------------------------------------------------===//
// The reduction: a group_reduce whose statistics leave as a grouped output
//===----------------------------------------------------------------------===//

struct GroupReductionMatch {
  GroupRead source;
  GroupStatistic kind;
  int64_t width;
  /// The reduced value f(element) in the body, and the element's argument.
  Value reduced;
  BlockArgument element;
  /// The initial value, where it is not the statistic's identity.
  std::optional<APFloat> init;
};

/// Matches `op` as a reduction over the last dimension of a GEMM output's
/// [M, G, w] view: `out = combine(out, f(element))` from a filled constant,
/// with `combine` an addition, maximum or minimum.
std::optional<std::string> matchGroupReduction(linalg::GenericOp op,
                                               GroupReductionMatch &m) {
  std::optional<int64_t> w = groupWidth(op);
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumDpsInputs() != 1 || !w || op.getNumReductionLoops() != 1 ||
      op.getIteratorTypesArray()[2] != utils::IteratorType::reduction)
    return std::string("it is not a reduction over groups of 8 to 256 "
                       "columns (a power of two) of a GEMM result");
  m.width = *w;
  OpOperand *input = op.getDpsInputOperand(0);
  std::optional<GroupRead> source =
      getGroupRead(input->get(), op.getMatchingIndexingMap(input), *w);
  if (!source || source->statistic)
    return std::string("it does not reduce a GEMM result viewed as "
                       "[M, N / w, w] (tensor.expand_shape)");
  m.source = *source;
  MLIRContext *ctx = op.getContext();
  AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
  AffineMap initMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (initMap != AffineMap::get(3, 0, {d0, d1}, ctx) &&
      initMap !=
          AffineMap::get(3, 0, {d0, d1, getAffineConstantExpr(0, ctx)}, ctx))
    return std::string("its result is not one value per group");
  Block &body = *op.getBlock();
  if (!hasOnlyEpilogueComputeOps(body, /*allowIndex=*/false))
    return std::string("its body has ops an epilogue does not run");
  Operation *combine = body.getTerminator()->getOperand(0).getDefiningOp();
  BlockArgument out = body.getArgument(1);
  m.element = body.getArgument(0);
  if (!combine || combine->getNumOperands() != 2 || !out.hasOneUse() ||
      !llvm::is_contained(combine->getOperands(), out))
    return std::string("its body does not combine the running value with "
                       "one new value");
  if (isa<arith::AddFOp>(combine))
    m.kind = GroupStatistic::sum;
  else if (isa<arith::MaximumFOp>(combine))
    m.kind = GroupStatistic::max;
  else if (isa<arith::MinimumFOp>(combine))
    m.kind = GroupStatistic::min;
  else
    return "it combines with " + combine->getName().getStringRef().str() +
           ", not a sum, maximum or minimum";
  m.reduced = combine->getOperand(0) == out ? combine->getOperand(1)
                                            : combine->getOperand(0);
  auto reads = readBlockArguments(m.reduced, body);
  if (!reads || reads->contains(out))
    return std::string("the value it reduces depends on the running value");
  std::optional<APFloat> init = getFillConstant(op.getDpsInits()[0]);
  if (!init)
    return std::string("it does not start from a filled constant");
  bool identity = (m.kind == GroupStatistic::sum && init->isZero()) ||
                  (m.kind == GroupStatistic::max && init->isInfinity() &&
                   init->isNegative()) ||
                  (m.kind == GroupStatistic::min && init->isInfinity() &&
                   !init->isNegative());
  if (!identity)
    m.init = init;
  if (ShapedType::isDynamic(op.getStaticLoopRanges()[1]))
    return std::string("its number of groups is dynamic");
  if (!isa<FloatType>(m.reduced.getType()))
    return std::string("it reduces a value that is not a float");
  return std::nullopt;
}

struct FuseGroupReduction : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    GroupReductionMatch m;
    if (std::optional<std::string> why = matchGroupReduction(op, m))
      return rewriter.notifyMatchFailure(op, *why);
    GemmOp gemm = m.source.gemm;
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getResultTypes()[0]);
    rewriter.setInsertionPoint(gemm);
    Value destination =
        createEmptyWithRows(rewriter, loc, gemm, {resultType.getDimSize(1)},
                            resultType.getElementType());
    OutputPlan plan = keepOutputs(gemm, readOnlyBy(gemm, op), destination);
    YieldOp oldYield = gemm.getYieldOp();
    Block &body = *op.getBlock();
    GemmOp fused = rebuildGemm(
        rewriter, gemm, gemm.getLhs(), gemm.getRhs(), gemm.getTransposeB(), {},
        plan.outputs, [&](OpBuilder &b, IRMapping &mapping, ValueRange) {
          IRMapping inner;
          cloneCapturedConstants(b, body, inner);
          inner.map(m.element, mapping.lookup(m.source.value));
          for (Operation &bodyOp : body.without_terminator())
            if (bodyOp.getResult(0) != body.getTerminator()->getOperand(0))
              b.clone(bodyOp, inner);
          Value reduced = inner.lookup(m.reduced);
          Value statistic =
              GroupReduceOp::create(b, loc, reduced.getType(), reduced, m.kind,
                                    ReductionAxis::row, m.width);
          if (m.init) {
            Value init = arith::ConstantOp::create(
                b, loc, FloatAttr::get(reduced.getType(), *m.init));
            Operation *combine =
                body.getTerminator()->getOperand(0).getDefiningOp();
            IRMapping operands;
            operands.map(combine->getOperand(0), init);
            operands.map(combine->getOperand(1), statistic);
            statistic = b.clone(*combine, operands)->getResult(0);
          }
          SmallVector<Value> yields;
          for (unsigned result : plan.kept)
            yields.push_back(mapping.lookup(oldYield.getValues()[result]));
          yields.push_back(GroupValueOp::create(b, loc, statistic,
                                                ReductionAxis::row, m.width));
          return yields;
        });
    rewriter.setInsertionPoint(op);
    replaceOpAndGemm(rewriter, op,
                     expandRows(rewriter, loc, fused,
                                fused->getResults().back(), resultType),
                     gemm, fused, plan);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Elementwise ops on the view or on the statistics
//===----------------------------------------------------------------------===//

/// What an elementwise op over [M, G, w] (or over [M, G, 1] / [M, G]: the
/// statistics) reads: GEMM outputs of one GEMM, and inputs the epilogue
/// adds (row values, scalars, tiles of the view's shape, per-column values
/// of a group).
struct GroupElementwiseMatch {
  GemmOp gemm;
  int64_t width = 0;
  /// Per operand: the GEMM output it reads, or the position of the added
  /// input.
  SmallVector<std::optional<GroupRead>> reads;
  SmallVector<std::optional<unsigned>> addedIndex;
  SmallVector<EpilogueInput> added;
  SmallVector<Value> scalars;
  /// Whether the op computes over the group's elements (a tile output) or
  /// once per group (a new statistic output).
  bool perElement = false;
};

/// How an operand that is no GEMM output is read by an op over [M, G, w]:
/// as an epilogue input (row, scalar, tile of the view, column of a group).
std::optional<AccessForm>
classifyGroupAccess(AffineMap map, RankedTensorType type, bool perElement) {
  std::optional<SmallVector<unsigned>> read = getReadDims(map, type);
  if (!read)
    return std::nullopt;
  SmallVector<unsigned> &dims = *read;
  if (dims.empty())
    return AccessForm::scalar;
  if (dims == SmallVector<unsigned>{0})
    return AccessForm::row;
  if (perElement && dims == SmallVector<unsigned>{0, 1, 2})
    return AccessForm::tile;
  if (perElement && dims == SmallVector<unsigned>{2})
    return AccessForm::col;
  return std::nullopt;
}

std::optional<std::string> matchGroupElementwise(linalg::GenericOp op,
                                                 GroupElementwiseMatch &m) {
  if (!op.hasPureTensorSemantics() || !isElementwise(op) ||
      op.getNumDpsInits() != 1 ||
      (op.getNumLoops() != 2 && op.getNumLoops() != 3))
    return std::string("it is not an elementwise op over [M, N / w, w] or "
                       "[M, N / w]");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  m.perElement = ranges.size() == 3 && ranges[2] != 1;
  if (!hasOnlyEpilogueComputeOps(*op.getBlock(), /*allowIndex=*/false,
                                 /*allowCapturedScalars=*/true))
    return std::string("its body has ops an epilogue does not run (or reads "
                       "an index)");
  // The GEMM: the one whose statistics it reads (their width is the
  // group's where it computes once per group).
  for (OpOperand *input : op.getDpsInputOperands()) {
    for (int64_t w : {int64_t(8), int64_t(16), int64_t(32), int64_t(64),
                      int64_t(128), int64_t(256)}) {
      if (m.perElement && w != ranges[2])
        continue;
      std::optional<GroupRead> read =
          getGroupRead(input->get(), op.getMatchingIndexingMap(input), w);
      if (read && read->statistic) {
        m.gemm = read->gemm;
        m.width = w;
      }
    }
  }
  if (!m.gemm)
    return std::string("it reads no statistic of groups of a GEMM's row");
  for (OpOperand *input : op.getDpsInputOperands()) {
    std::optional<GroupRead> read =
        getGroupRead(input->get(), op.getMatchingIndexingMap(input), m.width);
    if (read && read->gemm != m.gemm)
      return std::string("it reads the outputs of two GEMMs");
    if (read && !read->statistic && !m.perElement)
      return std::string("it reads a GEMM's tile once per group");
    m.reads.push_back(read);
    m.addedIndex.push_back(std::nullopt);
    if (read)
      continue;
    std::string which =
        "its operand #" + std::to_string(input->getOperandNumber());
    auto type = dyn_cast<RankedTensorType>(input->get().getType());
    std::optional<AccessForm> form =
        type ? classifyGroupAccess(op.getMatchingIndexingMap(input), type,
                                   m.perElement)
             : std::nullopt;
    if (!form)
      return which + " is read neither per row, per group element, as a "
                     "scalar nor as the GEMM's output";
    if (!isAvailableBefore(input->get(), m.gemm))
      return which + " is computed after the GEMM";
    m.addedIndex.back() = m.added.size();
    m.added.push_back({input->get(), *form});
  }
  m.scalars = capturedScalars(*op.getBlock());
  for (Value scalar : m.scalars) {
    if (!isAvailableBefore(scalar, m.gemm))
      return std::string("a scalar its body reads is computed after the GEMM");
    m.added.push_back({scalar, AccessForm::scalar});
  }
  return std::nullopt;
}

/// The epilogue input an operand of an op over [M, G, w] becomes: a row
/// vector, a scalar, the [M, N] tile of a [M, G, w] operand, or the [N]
/// columns of a per-group-element [w] one (repeated over the groups).
Value materializeGroupInput(RewriterBase &rewriter, Location loc, Value value,
                            AffineMap map, AccessForm form,
                            ArrayRef<int64_t> viewShape) {
  if (form == AccessForm::row || form == AccessForm::scalar)
    return materializeEpilogueInput(rewriter, loc, value, map, form);
  if (form == AccessForm::tile)
    return tensor::CollapseShapeOp::create(rewriter, loc, value, {{0}, {1, 2}});
  // A [w] vector read at d2: repeated over the G groups into N columns.
  Value vector = materializeEpilogueInput(rewriter, loc, value, map, form);
  auto type = cast<RankedTensorType>(vector.getType());
  int64_t groups = viewShape[1], width = viewShape[2];
  MLIRContext *ctx = rewriter.getContext();
  Value empty = tensor::EmptyOp::create(rewriter, loc, {groups, width},
                                        type.getElementType());
  AffineExpr d1 = getAffineDimExpr(1, ctx);
  auto repeat = linalg::GenericOp::create(
      rewriter, loc, empty.getType(), vector, empty,
      ArrayRef<AffineMap>{AffineMap::get(2, 0, {d1}, ctx),
                          AffineMap::getMultiDimIdentityMap(2, ctx)},
      ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                    utils::IteratorType::parallel},
      [](OpBuilder &b, Location l, ValueRange args) {
        linalg::YieldOp::create(b, l, args[0]);
      });
  return tensor::CollapseShapeOp::create(rewriter, loc, repeat.getResult(0),
                                         {{0, 1}});
}

struct FuseGroupElementwise : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    GroupElementwiseMatch m;
    if (std::optional<std::string> why = matchGroupElementwise(op, m))
      return rewriter.notifyMatchFailure(op, *why);
    auto resultType = cast<RankedTensorType>(op.getResultTypes()[0]);
    SmallVector<int64_t> view = op.getStaticLoopRanges();
    if (ShapedType::isDynamic(view[1]))
      return rewriter.notifyMatchFailure(op, "dynamic group count");
    GemmOp gemm = m.gemm;
    Location loc = op.getLoc();
    rewriter.setInsertionPoint(gemm);
    for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands()))
      if (m.addedIndex[i])
        m.added[*m.addedIndex[i]].value = materializeGroupInput(
            rewriter, loc, input->get(), op.getMatchingIndexingMap(input),
            m.added[*m.addedIndex[i]].form, view);
    Type element = resultType.getElementType();
    Value destination =
        m.perElement
            ? createEmptyWithRows(rewriter, loc, gemm, {view[1] * view[2]},
                                  element)
            : createEmptyWithRows(rewriter, loc, gemm, {view[1]}, element);
    OutputPlan plan = keepOutputs(gemm, readOnlyBy(gemm, op), destination);
    YieldOp oldYield = gemm.getYieldOp();
    Block &body = *op.getBlock();
    unsigned firstScalar = m.added.size() - m.scalars.size();
    GemmOp fused = rebuildGemm(
        rewriter, gemm, gemm.getLhs(), gemm.getRhs(), gemm.getTransposeB(),
        m.added, plan.outputs,
        [&](OpBuilder &b, IRMapping &mapping, ValueRange addedArgs) {
          IRMapping inner;
          for (auto [i, scalar] : llvm::enumerate(m.scalars))
            inner.map(scalar, addedArgs[firstScalar + i]);
          cloneCapturedConstants(b, body, inner);
          for (auto [i, read] : llvm::enumerate(m.reads)) {
            BlockArgument arg = body.getArgument(i);
            inner.map(arg, read ? mapping.lookup(read->value)
                                : addedArgs[*m.addedIndex[i]]);
          }
          for (Operation &bodyOp : body.without_terminator())
            b.clone(bodyOp, inner);
          Value value = inner.lookup(body.getTerminator()->getOperand(0));
          SmallVector<Value> yields;
          for (unsigned result : plan.kept)
            yields.push_back(mapping.lookup(oldYield.getValues()[result]));
          yields.push_back(m.perElement
                               ? value
                               : GroupValueOp::create(
                                     b, loc, value, ReductionAxis::row, m.width)
                                     .getResult());
          return yields;
        });
    Value written = fused->getResults().back();
    rewriter.setInsertionPoint(op);
    Value replacement = expandRows(rewriter, loc, fused, written, resultType);
    replaceOpAndGemm(rewriter, op, replacement, gemm, fused, plan);
    return success();
  }
};

struct CodaFuseGroupsPass : coda::impl::CodaFuseGroupsBase<CodaFuseGroupsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseGroupsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::optional<std::string> mlir::coda::whyNotFusedGroup(linalg::GenericOp op) {
  if (op.getNumReductionLoops() != 0) {
    GroupReductionMatch m;
    return matchGroupReduction(op, m);
  }
  GroupElementwiseMatch m;
  return matchGroupElementwise(op, m);
}

void mlir::coda::populateFuseGroupsPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseGroupReduction, FuseGroupElementwise>(patterns.getContext());
}
