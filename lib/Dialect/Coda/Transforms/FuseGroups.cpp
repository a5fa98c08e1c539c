//===- FuseGroups.cpp - statistics of groups of a GEMM's row, fused -------===//
//
// A frontend writes a statistic over groups of w columns of a GEMM's output
// (a 1 x 128 quantization's amax, a per-head RMSNorm's sum of squares) on
// the output viewed as [M, N / w, w] (`tensor.expand_shape`; [B, T, N / w,
// w] where a batch folded into the GEMM's rows is unfolded again): a
// reduction over the last dimension, elementwise math on the statistics,
// and an elementwise op over the view that reads the output and the
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
#include "mlir/IR/Matchers.h"
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

/// The reassociation of an [M, X] tensor viewed with its M split into
/// `rows` dimensions (a batch folded into a GEMM's rows) and X into `trailing`
/// ones: [[0, .., rows - 1], [rows, ..]].
SmallVector<ReassociationIndices> splitRows(unsigned rows, unsigned trailing) {
  ReassociationIndices leading, last;
  for (unsigned i = 0; i < rows; ++i)
    leading.push_back(i);
  for (unsigned i = 0; i < trailing; ++i)
    last.push_back(rows + i);
  return {leading, last};
}

/// The width of the one group a row of `n` columns is, where one tile holds
/// it (a power of two, as the group's statistic needs).
std::optional<int64_t> wholeRowWidth(int64_t n) {
  if (ShapedType::isDynamic(n) || n > 256)
    return std::nullopt;
  return std::max<int64_t>(8, llvm::PowerOf2Ceil(n));
}

/// A GEMM output as a generic over [rows..., G, w] reads it: its tile output
/// through the [M, N] -> [rows..., G, w] view, or its statistics (a row
/// group_value of width w) once per group. Or, where one tile holds a whole
/// row of N <= 256 columns (a softmax over a few experts), over
/// [rows..., N]: the row is the one group, its statistics [rows..., 1].
struct GroupRead {
  GemmOp gemm;
  OpResult result;
  /// The epilogue value the output is made from: the tile's element, or the
  /// value its group_value writes (the same over the group).
  Value value;
  bool statistic;
  /// The dimensions M is split into (2 where a batch folded into the GEMM's
  /// rows is unfolded).
  unsigned rows;
  /// The group width: the statistic's, or the view's last dimension (the
  /// power of two a whole row rounds up to).
  int64_t width;
  /// Whether the group is the whole row (no group dimension in the loops).
  bool wholeRow = false;

  /// The loops after the rows of an op over the group's elements.
  unsigned trailing() const { return wholeRow ? 1 : 2; }
};

/// The epilogue value `result`, an output of `gemm`, is written from.
Value yieldedFor(GemmOp gemm, OpResult result) {
  return gemm.getYieldOp().getValues()[result.getResultNumber()];
}

/// A whole row's [M, 1] statistics squeezed to [M] (a reduction that
/// dropped its dimension), read through (d0).
std::optional<GroupRead>
getSqueezedRowStatistic(tensor::CollapseShapeOp collapse, AffineMap map,
                        std::optional<int64_t> w) {
  auto result = dyn_cast<OpResult>(collapse.getSrc());
  auto gemm = result ? dyn_cast<GemmOp>(result.getOwner()) : GemmOp();
  if (!gemm || gemm.isBatched() || collapse.getSrcType().getRank() != 2 ||
      collapse.getSrcType().getDimSize(1) != 1 || map.getNumResults() != 1 ||
      map.getResult(0) != getAffineDimExpr(0, map.getContext()))
    return std::nullopt;
  auto group = yieldedFor(gemm, result).getDefiningOp<GroupValueOp>();
  if (!group || group.getAxis() != ReductionAxis::row ||
      (w && int64_t(group.getWidth()) != *w))
    return std::nullopt;
  return GroupRead{gemm,
                   result,
                   group.getValue(),
                   true,
                   /*rows=*/1,
                   int64_t(group.getWidth()),
                   /*wholeRow=*/true};
}

/// `value` as the view [rows..., G, w] of a 2-D GEMM tile output, read
/// through `map` (identity); or as row statistics of width w ([rows..., G],
/// or [rows..., G, 1]), read through (d0, .., d_rows) and then 0 or a loop
/// of one. A whole row: the [rows..., N] output read through the identity,
/// its [rows..., 1] statistics through (d0, .., d_rows-1, 0). Without `w`,
/// any group width.
std::optional<GroupRead> getGroupRead(Value value, AffineMap map,
                                      std::optional<int64_t> w) {
  MLIRContext *ctx = map.getContext();
  if (auto collapse = value.getDefiningOp<tensor::CollapseShapeOp>())
    return getSqueezedRowStatistic(collapse, map, w);
  auto type = cast<RankedTensorType>(value.getType());
  Value source = value;
  std::optional<SmallVector<ReassociationIndices>> groups;
  if (auto expand = value.getDefiningOp<tensor::ExpandShapeOp>()) {
    groups = expand.getReassociationIndices();
    source = expand.getSrc();
  }
  auto result = dyn_cast<OpResult>(source);
  auto gemm = result ? dyn_cast<GemmOp>(result.getOwner()) : GemmOp();
  if (!gemm || gemm.isBatched() || (groups && groups->size() != 2))
    return std::nullopt;
  unsigned rows = groups ? (*groups)[0].size() : 1;
  unsigned trailing = groups ? (*groups)[1].size() : 1;
  if (groups && *groups != splitRows(rows, trailing))
    return std::nullopt;
  Value yielded = yieldedFor(gemm, result);
  auto leadingRead = [&](unsigned count) {
    for (unsigned i = 0; i < count; ++i)
      if (map.getResult(i) != getAffineDimExpr(i, ctx))
        return false;
    return true;
  };
  AffineExpr zero = getAffineConstantExpr(0, ctx);
  if (auto group = yielded.getDefiningOp<GroupValueOp>()) {
    int64_t width = group.getWidth();
    if (group.getAxis() != ReductionAxis::row || (w && width != *w))
      return std::nullopt;
    // [rows..., 1] read at 0 along the row: the statistic of a whole row.
    if (trailing == 1 && type.getDimSize(rows) == 1 &&
        map.getNumResults() == rows + 1 && leadingRead(rows) &&
        map.getResult(rows) == zero)
      return GroupRead{gemm,
                       result,
                       group.getValue(),
                       true,
                       rows,
                       width,
                       /*wholeRow=*/true};
    // [rows..., G, 1] is read at 0 along the group, or along a loop of one.
    bool perGroup =
        trailing <= 2 && map.getNumResults() == rows + trailing &&
        leadingRead(rows + 1) &&
        (trailing == 1 || map.getResult(rows + 1) == zero ||
         map.getResult(rows + 1) == getAffineDimExpr(rows + 1, ctx));
    if (!perGroup || (trailing == 2 && type.getDimSize(rows + 1) != 1))
      return std::nullopt;
    return GroupRead{gemm, result, group.getValue(), true, rows, width};
  }
  if (!yielded.getType().isIntOrIndexOrFloat() || !map.isIdentity())
    return std::nullopt;
  if (trailing == 1) {
    std::optional<int64_t> width = wholeRowWidth(type.getDimSize(rows));
    if (!width || (w && *width != *w))
      return std::nullopt;
    return GroupRead{gemm,
                     result,
                     yielded,
                     false,
                     rows,
                     *width,
                     /*wholeRow=*/true};
  }
  int64_t width = type.getDimSize(rows + 1);
  if (trailing != 2 || (w ? width != *w : !isGroupWidth(width)))
    return std::nullopt;
  return GroupRead{gemm, result, yielded, false, rows, width};
}

/// The outputs of `gemm` but those in `dropped`, then `added`; and the
/// results kept, in order.
struct OutputPlan {
  SmallVector<Value> outputs;
  SmallVector<unsigned> kept;
};
OutputPlan keepOutputs(GemmOp gemm, ArrayRef<OpResult> dropped,
                       ValueRange added) {
  OutputPlan plan;
  for (OpResult result : gemm->getResults()) {
    if (llvm::is_contained(dropped, result))
      continue;
    plan.kept.push_back(result.getResultNumber());
    plan.outputs.push_back(gemm.getOutputs()[result.getResultNumber()]);
  }
  llvm::append_range(plan.outputs, added);
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
void replaceOpAndGemm(RewriterBase &rewriter, Operation *op,
                      ValueRange replacement, GemmOp gemm, GemmOp fused,
                      const OutputPlan &plan) {
  rewriter.replaceOp(op, replacement);
  for (auto [i, result] : llvm::enumerate(plan.kept))
    rewriter.replaceAllUsesWith(gemm->getResult(result), fused->getResult(i));
  for (Operation *reshape : llvm::make_early_inc_range(gemm->getUsers()))
    rewriter.eraseOp(reshape);
  rewriter.eraseOp(gemm);
}

/// `value`, a [M, X] output of a GEMM, as `type` ([rows..., X] or
/// [rows..., G, w] / [rows..., G, 1]); dynamic sizes read from `like`, a
/// tensor of that type the replaced op wrote into, so that nothing but the
/// reshape reads the output (which a later fusion may then stop writing).
Value expandRows(RewriterBase &rewriter, Location loc, Value value,
                 RankedTensorType type, unsigned rows, Value like) {
  if (value.getType() == type)
    return value;
  return tensor::ExpandShapeOp::create(
      rewriter, loc, type, value, splitRows(rows, type.getRank() - rows),
      tensor::getMixedSizes(rewriter, loc, like));
}

/// `value`, the [M, X] output a fused op over `layout`'s loops became, as
/// the op's result `type`; a whole row's statistics [M, 1] squeezed to
/// [rows...] where the op wrote them so.
Value reshapeGroupResult(RewriterBase &rewriter, Location loc, Value value,
                         RankedTensorType type, const GroupRead &layout,
                         Value like) {
  unsigned rows = layout.rows;
  if (type.getRank() != rows)
    return expandRows(rewriter, loc, value, type, rows, like);
  Value squeezed =
      tensor::CollapseShapeOp::create(rewriter, loc, value, {{0, 1}});
  if (rows == 1)
    return squeezed;
  return tensor::ExpandShapeOp::create(
      rewriter, loc, type, squeezed, {splitRows(rows, 0).front()},
      tensor::getMixedSizes(rewriter, loc, like));
}

/// How an operand that is no GEMM output is read by an op over `layout`'s
/// loops ([M, G, w] or [M, N]): as an epilogue input (row, scalar, tile of
/// the view, column of a group).
std::optional<AccessForm> classifyGroupAccess(AffineMap map,
                                              RankedTensorType type,
                                              bool perElement,
                                              const GroupRead &layout) {
  unsigned rows = layout.rows, trailing = layout.trailing();
  std::optional<SmallVector<unsigned>> read = getReadDims(map, type);
  if (!read)
    return std::nullopt;
  SmallVector<unsigned> &dims = *read;
  auto upTo = [](unsigned end) {
    return llvm::to_vector(llvm::seq<unsigned>(0, end));
  };
  if (dims.empty())
    return AccessForm::scalar;
  if (dims == upTo(rows))
    return AccessForm::row;
  if (perElement && dims == upTo(rows + trailing))
    return AccessForm::tile;
  if (perElement && dims == SmallVector<unsigned>{rows + trailing - 1})
    return AccessForm::col;
  return std::nullopt;
}

/// The epilogue inputs an op over [rows..., G, w] adds to a GEMM: per
/// operand that is no GEMM output, the position of the input it becomes.
struct AddedInputs {
  SmallVector<std::optional<unsigned>> index;
  SmallVector<EpilogueInput> inputs;
};

/// Records `input` as an epilogue input of `gemm` (why not, where it cannot
/// be one: read in no form an epilogue reads, or computed after the GEMM).
std::optional<std::string> addGroupInput(linalg::GenericOp op, OpOperand *input,
                                         bool perElement,
                                         const GroupRead &layout,
                                         AddedInputs &added) {
  std::string which =
      "its operand #" + std::to_string(input->getOperandNumber());
  auto type = dyn_cast<RankedTensorType>(input->get().getType());
  std::optional<AccessForm> form =
      type ? classifyGroupAccess(op.getMatchingIndexingMap(input), type,
                                 perElement, layout)
           : std::nullopt;
  if (!form)
    return which + " is read neither per row, per group element, as a "
                   "scalar nor as the GEMM's output";
  if (!isAvailableBefore(input->get(), layout.gemm))
    return which + " is computed after the GEMM";
  added.index.back() = added.inputs.size();
  added.inputs.push_back({input->get(), *form});
  return std::nullopt;
}

/// The epilogue input an operand of an op over [M, G, w] (or a whole row's
/// [M, N]) becomes: a row vector, a scalar, the [M, N] tile of a [M, G, w]
/// operand, or the [N] columns of a per-group-element [w] one (repeated over
/// the groups).
Value materializeGroupInput(RewriterBase &rewriter, Location loc, Value value,
                            AffineMap map, AccessForm form,
                            ArrayRef<int64_t> viewShape,
                            const GroupRead &layout) {
  unsigned rows = layout.rows;
  if (form == AccessForm::scalar)
    return materializeEpilogueInput(rewriter, loc, value, map, form);
  if (form == AccessForm::row) {
    // [rows...] (unit dimensions read at 0 dropped) as [M].
    Value vector = materializeEpilogueInput(rewriter, loc, value, map, form);
    if (rows == 1)
      return vector;
    return tensor::CollapseShapeOp::create(rewriter, loc, vector,
                                           splitRows(rows, 0).front());
  }
  if (form == AccessForm::tile)
    return rows == 1 && layout.wholeRow
               ? value
               : tensor::CollapseShapeOp::create(
                     rewriter, loc, value, splitRows(rows, layout.trailing()));
  // A [w] vector read along the group: repeated over the G groups into N
  // columns (a whole row's [N] as it is).
  Value vector = materializeEpilogueInput(rewriter, loc, value, map, form);
  if (layout.wholeRow)
    return vector;
  auto type = cast<RankedTensorType>(vector.getType());
  int64_t groups = viewShape[rows], width = viewShape[rows + 1];
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

/// Materializes the inputs `op` adds (before the GEMM, where the rewriter
/// stands): each read the way an epilogue reads it.
void materializeGroupInputs(RewriterBase &rewriter, linalg::GenericOp op,
                            AddedInputs &added, const GroupRead &layout) {
  SmallVector<int64_t> view = op.getStaticLoopRanges();
  for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands()))
    if (std::optional<unsigned> index = added.index[i])
      added.inputs[*index].value = materializeGroupInput(
          rewriter, op.getLoc(), input->get(), op.getMatchingIndexingMap(input),
          added.inputs[*index].form, view, layout);
}

//===----------------------------------------------------------------------===//
// The reduction: a group_reduce whose statistics leave as a grouped output
//===----------------------------------------------------------------------===//

struct GroupReductionMatch {
  GroupRead source;
  /// Per operand: the statistic of the same groups it reads (a softmax's
  /// sum of exponentials reads the maximum), if any.
  SmallVector<std::optional<GroupRead>> statistics;
  /// The operands but the source and the statistics, as epilogue inputs.
  AddedInputs added;
  GroupStatistic kind;
  /// The reduced value f(element) in the body, and the element's argument.
  Value reduced;
  BlockArgument element;
  /// The initial value, where it is not the statistic's identity.
  std::optional<APFloat> init;
  /// For an arg-max (a second result: the index of the first maximum, as
  /// torch.max(x, dim) and torch.argmax lower), the index's type.
  Type indexType;
};

/// Whether `op`'s result reaches, through generics of the statistics (a
/// log-sum-exp made of the maximum and the sum), an elementwise generic that
/// also reads `result` (a GEMM output, or a view of it): a softmax's
/// division, which makes a whole row's statistic worth computing in the
/// epilogue rather than as partials (a cross-entropy's gather keeps those).
bool feedsElementwiseReadOf(linalg::GenericOp op, OpResult result) {
  auto readsResult = [&](Value input) {
    auto expand = input.getDefiningOp<tensor::ExpandShapeOp>();
    return input == result || (expand && expand.getSrc() == result);
  };
  SmallVector<Operation *> worklist{op};
  llvm::SmallPtrSet<Operation *, 8> seen{op};
  while (!worklist.empty()) {
    Operation *current = worklist.pop_back_val();
    for (Operation *user : current->getResult(0).getUsers()) {
      auto generic = dyn_cast<linalg::GenericOp>(user);
      if (!generic || generic.getNumResults() != 1 ||
          !seen.insert(generic).second)
        continue;
      if (isElementwise(generic) &&
          llvm::any_of(generic.getDpsInputs(), readsResult))
        return true;
      worklist.push_back(generic);
    }
  }
  return false;
}

/// Matches `op` as a reduction over the last dimension of a GEMM output's
/// [M, G, w] view, or of a whole row of at most 256 columns:
/// `out = combine(out, f(element, inputs))` from a filled constant, with
/// `combine` an addition, maximum or minimum and the other inputs read as an
/// epilogue reads them or statistics of the same groups.
/// Whether `init` is a linalg.fill of the integer constant 0.
bool isZeroFilled(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_Zero());
}

/// Matches the body of an arg-max as torch-mlir lowers torch.max(x, dim)
/// and torch.argmax: `max = maximumf(v, max)`, `index = select(v > max,
/// index_cast(linalg.index), index)` from -inf and 0, so the index is the
/// first maximum's. `v` (a function of the element) is reduced.
std::optional<std::string> matchArgmaxBody(linalg::GenericOp op,
                                           GroupReductionMatch &m) {
  Block &body = *op.getBlock();
  Operation *yield = body.getTerminator();
  BlockArgument outValue = body.getArgument(op.getNumDpsInputs());
  BlockArgument outIndex = body.getArgument(op.getNumDpsInputs() + 1);
  auto max = yield->getOperand(0).getDefiningOp<arith::MaximumFOp>();
  auto select = yield->getOperand(1).getDefiningOp<arith::SelectOp>();
  auto compare = select ? select.getCondition().getDefiningOp<arith::CmpFOp>()
                        : arith::CmpFOp();
  auto cast = select ? select.getTrueValue().getDefiningOp<arith::IndexCastOp>()
                     : arith::IndexCastOp();
  auto index =
      cast ? cast.getIn().getDefiningOp<linalg::IndexOp>() : linalg::IndexOp();
  std::string notArgmax = "its two results are not a maximum and the index "
                          "of its first occurrence";
  if (!max || !compare || !index || select.getFalseValue() != outIndex ||
      !llvm::is_contained(max->getOperands(), outValue) ||
      compare.getPredicate() != arith::CmpFPredicate::OGT ||
      compare.getRhs() != outValue || index.getDim() != op.getNumLoops() - 1)
    return notArgmax;
  m.kind = GroupStatistic::max;
  m.reduced = max.getLhs() == outValue ? max.getRhs() : max.getLhs();
  m.indexType = cast.getType();
  if (compare.getLhs() != m.reduced)
    return notArgmax;
  auto reads = readBlockArguments(m.reduced, body);
  if (!reads || reads->contains(outValue) || reads->contains(outIndex))
    return std::string("the value it reduces depends on the running value");
  std::optional<APFloat> init = getFillConstant(op.getDpsInits()[0]);
  if (!init || !init->isInfinity() || !init->isNegative() ||
      !isZeroFilled(op.getDpsInits()[1]))
    return std::string("its maximum does not start from -inf and its index "
                       "from 0");
  if (!isa<FloatType>(m.reduced.getType()))
    return std::string("it reduces a value that is not a float");
  return std::nullopt;
}

/// Matches the body of a reduction `out = combine(out, f(...))` with
/// `combine` an addition, maximum or minimum, from a filled constant that
/// is combined in unless it is the identity.
std::optional<std::string> matchCombineBody(linalg::GenericOp op,
                                            GroupReductionMatch &m) {
  Block &body = *op.getBlock();
  Operation *combine = body.getTerminator()->getOperand(0).getDefiningOp();
  BlockArgument out = body.getArgument(op.getNumDpsInputs());
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
  if (!isa<FloatType>(m.reduced.getType()))
    return std::string("it reduces a value that is not a float");
  return std::nullopt;
}

/// A whole row is a group where it has at most `rowTile` columns (none:
/// never).
std::optional<std::string> matchGroupReduction(linalg::GenericOp op,
                                               GroupReductionMatch &m,
                                               std::optional<int64_t> rowTile) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() > 2 ||
      op.getNumReductionLoops() != 1 ||
      op.getIteratorTypesArray().back() != utils::IteratorType::reduction)
    return std::string("it is not a reduction over groups of 8 to 256 "
                       "columns (a power of two), or over a row of at most "
                       "256, of a GEMM result");
  std::optional<GroupRead> source;
  for (OpOperand *input : op.getDpsInputOperands()) {
    std::optional<GroupRead> read = getGroupRead(
        input->get(), op.getMatchingIndexingMap(input), std::nullopt);
    if (read && !read->statistic && !source) {
      source = read;
      m.element = op.getBlock()->getArgument(input->getOperandNumber());
    }
  }
  unsigned loops = op.getNumLoops();
  if (!source || loops != source->rows + source->trailing()) {
    for (Value input : op.getDpsInputs())
      if (auto expand = input.getDefiningOp<tensor::ExpandShapeOp>())
        if (expand.getSrc().getDefiningOp<GemmOp>() &&
            !isGroupWidth(expand.getResultType().getShape().back()))
          return std::string("it is not a reduction over groups of 8 to 256 "
                             "columns (a power of two) of a GEMM result");
    return std::string("it does not reduce a GEMM result viewed as "
                       "[M, N / w, w] (tensor.expand_shape) or a row of at "
                       "most 256 columns");
  }
  m.source = *source;
  if (source->wholeRow) {
    int64_t columns = op.getStaticLoopRanges().back();
    if (!rowTile || columns > *rowTile)
      return "its row of " + std::to_string(columns) +
             " columns is wider than one tile (the row reduction's partials "
             "serve it)";
    if (op.getNumDpsInits() == 1 && !feedsElementwiseReadOf(op, source->result))
      return std::string("no elementwise op reads both its result and the "
                         "GEMM's row (the row reduction's partials serve it)");
  }
  for (OpOperand *input : op.getDpsInputOperands()) {
    m.added.index.push_back(std::nullopt);
    m.statistics.push_back(std::nullopt);
    if (op.getBlock()->getArgument(input->getOperandNumber()) == m.element)
      continue;
    std::optional<GroupRead> read = getGroupRead(
        input->get(), op.getMatchingIndexingMap(input), source->width);
    if (read && read->statistic && read->gemm == source->gemm) {
      m.statistics.back() = read;
      continue;
    }
    if (std::optional<std::string> why =
            addGroupInput(op, input, /*perElement=*/true, *source, m.added))
      return why;
  }
  MLIRContext *ctx = op.getContext();
  // One value per group: (d0, .., d_rows), keepdim or not.
  SmallVector<AffineExpr> perGroup;
  for (unsigned i = 0; i + 1 < loops; ++i)
    perGroup.push_back(getAffineDimExpr(i, ctx));
  AffineMap squeezed = AffineMap::get(loops, 0, perGroup, ctx);
  perGroup.push_back(getAffineConstantExpr(0, ctx));
  AffineMap keepdim = AffineMap::get(loops, 0, perGroup, ctx);
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap initMap = op.getMatchingIndexingMap(&init);
    if (initMap != squeezed && initMap != keepdim)
      return std::string("its result is not one value per group");
  }
  if (!source->wholeRow &&
      ShapedType::isDynamic(op.getStaticLoopRanges()[source->rows]))
    return std::string("its number of groups is dynamic");
  bool argmax = op.getNumDpsInits() == 2;
  if (!hasOnlyEpilogueComputeOps(*op.getBlock(), /*allowIndex=*/argmax))
    return std::string("its body has ops an epilogue does not run");
  return argmax ? matchArgmaxBody(op, m) : matchCombineBody(op, m);
}


/// Clones the ops of `body` that `value` is computed from, in order.
void cloneComputing(OpBuilder &b, Block &body, Value value,
                    IRMapping &mapping) {
  llvm::SmallPtrSet<Operation *, 16> needed;
  SmallVector<Value> worklist{value};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (def && def->getBlock() == &body && needed.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  for (Operation &op : body.without_terminator())
    if (needed.contains(&op))
      b.clone(op, mapping);
}

struct FuseGroupReduction : OpRewritePattern<linalg::GenericOp> {
  FuseGroupReduction(MLIRContext *ctx, int64_t tile)
      : OpRewritePattern(ctx), tile(tile) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    GroupReductionMatch m;
    if (std::optional<std::string> why = matchGroupReduction(op, m, tile))
      return rewriter.notifyMatchFailure(op, *why);
    GemmOp gemm = m.source.gemm;
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op.getResultTypes()[0]);
    rewriter.setInsertionPoint(gemm);
    materializeGroupInputs(rewriter, op, m.added, m.source);
    int64_t groups =
        m.source.wholeRow ? 1 : resultType.getDimSize(m.source.rows);
    SmallVector<Value> destinations;
    for (Type type : op.getResultTypes())
      destinations.push_back(
          createEmptyWithRows(rewriter, loc, gemm, {groups},
                              cast<RankedTensorType>(type).getElementType()));
    OutputPlan plan = keepOutputs(gemm, readOnlyBy(gemm, op), destinations);
    YieldOp oldYield = gemm.getYieldOp();
    Block &body = *op.getBlock();
    GemmOp fused = rebuildGemm(
        rewriter, gemm, gemm.getLhs(), gemm.getRhs(), gemm.getTransposeB(),
        m.added.inputs, plan.outputs,
        [&](OpBuilder &b, IRMapping &mapping, ValueRange addedArgs) {
          IRMapping inner;
          cloneCapturedConstants(b, body, inner);
          inner.map(m.element, mapping.lookup(m.source.value));
          for (auto [i, index] : llvm::enumerate(m.added.index))
            if (index)
              inner.map(body.getArgument(i), addedArgs[*index]);
          for (auto [i, read] : llvm::enumerate(m.statistics))
            if (read)
              inner.map(body.getArgument(i), mapping.lookup(read->value));
          cloneComputing(b, body, m.reduced, inner);
          Value reduced = inner.lookup(m.reduced);
          Value statistic =
              GroupReduceOp::create(b, loc, reduced.getType(), reduced, m.kind,
                                    ReductionAxis::row, m.source.width);
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
          yields.push_back(GroupValueOp::create(
              b, loc, statistic, ReductionAxis::row, m.source.width));
          if (m.indexType) {
            Value first = GroupReduceOp::create(
                b, loc, b.getIndexType(), reduced, GroupStatistic::argmax,
                ReductionAxis::row, m.source.width);
            // The statistic's position is the column; the view's index is
            // the position within the group (a whole row's: the column).
            if (!m.source.wholeRow)
              first = arith::RemUIOp::create(
                  b, loc, first,
                  arith::ConstantIndexOp::create(b, loc, m.source.width));
            Value index =
                arith::IndexCastOp::create(b, loc, m.indexType, first);
            yields.push_back(GroupValueOp::create(
                b, loc, index, ReductionAxis::row, m.source.width));
          }
          return yields;
        });
    rewriter.setInsertionPoint(op);
    SmallVector<Value> replacements;
    unsigned first = fused->getNumResults() - op->getNumResults();
    for (auto [i, result] : llvm::enumerate(op->getResults()))
      replacements.push_back(
          reshapeGroupResult(rewriter, loc, fused->getResult(first + i),
                             cast<RankedTensorType>(result.getType()), m.source,
                             op.getDpsInits()[i]));
    replaceOpAndGemm(rewriter, op, replacements, gemm, fused, plan);
    return success();
  }

  int64_t tile;
};

//===----------------------------------------------------------------------===//
// Elementwise ops on the view or on the statistics
//===----------------------------------------------------------------------===//

/// What an elementwise op over [M, G, w] (or over [M, G, 1] / [M, G]: the
/// statistics) reads: GEMM outputs of one GEMM, and inputs the epilogue
/// adds (row values, scalars, tiles of the view's shape, per-column values
/// of a group).
struct GroupElementwiseMatch {
  /// A statistic it reads: the GEMM, the groups and how the op's loops lie
  /// over them.
  GroupRead layout;
  /// Per operand: the GEMM output it reads, or the position of the added
  /// input.
  SmallVector<std::optional<GroupRead>> reads;
  AddedInputs added;
  SmallVector<Value> scalars;
  /// Whether the op computes over the group's elements (a tile output) or
  /// once per group (a new statistic output).
  bool perElement = false;
};

std::optional<std::string> matchGroupElementwise(linalg::GenericOp op,
                                                 GroupElementwiseMatch &m) {
  if (!op.hasPureTensorSemantics() || !isElementwise(op) ||
      op.getNumDpsInits() != 1 || op.getNumLoops() < 1)
    return std::string("it is not an elementwise op over [M, N / w, w] or "
                       "[M, N / w]");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (!hasOnlyEpilogueComputeOps(*op.getBlock(), /*allowIndex=*/false,
                                 /*allowCapturedScalars=*/true))
    return std::string("its body has ops an epilogue does not run (or reads "
                       "an index)");
  // The GEMM: the one whose statistics it reads (their width is the
  // group's where it computes once per group; a whole row's statistics
  // read along the row say it computes over the row).
  std::optional<GroupRead> layout;
  for (OpOperand *input : op.getDpsInputOperands()) {
    std::optional<GroupRead> read = getGroupRead(
        input->get(), op.getMatchingIndexingMap(input), std::nullopt);
    if (read && read->statistic && (!layout || read->wholeRow))
      layout = read;
  }
  if (!layout)
    return std::string("it reads no statistic of groups of a GEMM's row");
  m.layout = *layout;
  GemmOp gemm = layout->gemm;
  // Over [rows..., G, w] or [rows..., N]: per element; over
  // [rows..., G(, 1)] or [rows...(, 1)]: per group.
  unsigned loops = ranges.size(), rows = layout->rows;
  unsigned trailing = layout->trailing();
  m.perElement = loops == rows + trailing && ranges.back() != 1;
  int64_t columns = gemm.getRhsType().getDimSize(gemm.getTransposeB() ? 0 : 1);
  if ((loops + 1 != rows + trailing && loops != rows + trailing) ||
      (m.perElement &&
       ranges.back() != (layout->wholeRow ? columns : layout->width)))
    return std::string("it is not an elementwise op over [M, N / w, w] or "
                       "[M, N / w]");
  for (OpOperand *input : op.getDpsInputOperands()) {
    std::optional<GroupRead> read = getGroupRead(
        input->get(), op.getMatchingIndexingMap(input), layout->width);
    if (read && read->gemm != gemm)
      return std::string("it reads the outputs of two GEMMs");
    if (read && !read->statistic && !m.perElement)
      return std::string("it reads a GEMM's tile once per group");
    m.reads.push_back(read);
    m.added.index.push_back(std::nullopt);
    if (read)
      continue;
    if (std::optional<std::string> why =
            addGroupInput(op, input, m.perElement, *layout, m.added))
      return why;
  }
  m.scalars = capturedScalars(*op.getBlock());
  for (Value scalar : m.scalars) {
    if (!isAvailableBefore(scalar, gemm))
      return std::string("a scalar its body reads is computed after the GEMM");
    m.added.inputs.push_back({scalar, AccessForm::scalar});
  }
  return std::nullopt;
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
    const GroupRead &layout = m.layout;
    // A whole row's columns, or the groups of a row and their width.
    int64_t groups = layout.wholeRow ? 1 : view[layout.rows];
    if (ShapedType::isDynamic(groups))
      return rewriter.notifyMatchFailure(op, "dynamic group count");
    int64_t columns = layout.wholeRow ? view.back() : groups * layout.width;
    GemmOp gemm = layout.gemm;
    Location loc = op.getLoc();
    rewriter.setInsertionPoint(gemm);
    materializeGroupInputs(rewriter, op, m.added, layout);
    Type element = resultType.getElementType();
    Value destination = createEmptyWithRows(
        rewriter, loc, gemm, {m.perElement ? columns : groups}, element);
    OutputPlan plan = keepOutputs(gemm, readOnlyBy(gemm, op), destination);
    YieldOp oldYield = gemm.getYieldOp();
    Block &body = *op.getBlock();
    unsigned firstScalar = m.added.inputs.size() - m.scalars.size();
    GemmOp fused = rebuildGemm(
        rewriter, gemm, gemm.getLhs(), gemm.getRhs(), gemm.getTransposeB(),
        m.added.inputs, plan.outputs,
        [&](OpBuilder &b, IRMapping &mapping, ValueRange addedArgs) {
          IRMapping inner;
          for (auto [i, scalar] : llvm::enumerate(m.scalars))
            inner.map(scalar, addedArgs[firstScalar + i]);
          cloneCapturedConstants(b, body, inner);
          for (auto [i, read] : llvm::enumerate(m.reads)) {
            BlockArgument arg = body.getArgument(i);
            inner.map(arg, read ? mapping.lookup(read->value)
                                : addedArgs[*m.added.index[i]]);
          }
          for (Operation &bodyOp : body.without_terminator())
            b.clone(bodyOp, inner);
          Value value = inner.lookup(body.getTerminator()->getOperand(0));
          SmallVector<Value> yields;
          for (unsigned result : plan.kept)
            yields.push_back(mapping.lookup(oldYield.getValues()[result]));
          yields.push_back(m.perElement ? value
                                        : GroupValueOp::create(
                                              b, loc, value, ReductionAxis::row,
                                              layout.width)
                                              .getResult());
          return yields;
        });
    Value written = fused->getResults().back();
    rewriter.setInsertionPoint(op);
    Value replacement = reshapeGroupResult(rewriter, loc, written, resultType,
                                           layout, op.getDpsInits()[0]);
    replaceOpAndGemm(rewriter, op, replacement, gemm, fused, plan);
    return success();
  }
};

struct CodaFuseGroupsPass : coda::impl::CodaFuseGroupsBase<CodaFuseGroupsPass> {
  using CodaFuseGroupsBase::CodaFuseGroupsBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseGroupsPatterns(patterns, tile);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::optional<std::string> mlir::coda::whyNotFusedGroup(linalg::GenericOp op) {
  if (op.getNumReductionLoops() != 0) {
    // The report asks of views only (readsGroupStatistics): no whole rows.
    GroupReductionMatch m;
    return matchGroupReduction(op, m, /*rowTile=*/std::nullopt);
  }
  GroupElementwiseMatch m;
  return matchGroupElementwise(op, m);
}

bool mlir::coda::readsGroupStatistics(linalg::GenericOp op) {
  return llvm::any_of(op.getDpsInputs(), [&](Value input) {
    auto expand = input.getDefiningOp<tensor::ExpandShapeOp>();
    Value source = expand ? expand.getSrc() : input;
    auto gemm = source.getDefiningOp<GemmOp>();
    if (!gemm)
      return false;
    Value yielded = yieldedFor(gemm, cast<OpResult>(source));
    return isa<GroupedType>(yielded.getType()) ||
           (expand && !isElementwise(op) && op.getNumLoops() >= 3);
  });
}

void mlir::coda::populateFuseGroupsPatterns(RewritePatternSet &patterns,
                                            int64_t tile) {
  patterns.add<FuseGroupReduction>(patterns.getContext(), tile);
  patterns.add<FuseGroupElementwise>(patterns.getContext());
}
