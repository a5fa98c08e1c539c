//===- FuseGathers.cpp - per-row gathers of a GEMM output into row_select -===//
//
// A per-row gather y[m, j(m)] of an elementwise function y = E(C, rows) of a
// GEMM output C becomes E(row_select(C at j), rows): the GEMM's epilogue
// picks C's value at the gathered column, and y (an M x N tensor, the logits
// of a cross-entropy) is never written.
//
//===----------------------------------------------------------------------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSEGATHERS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The ops of `block` that `value` depends on, in block order; fails when it
/// depends on an op outside `block` that is not a constant, or on `avoid`.
FailureOr<SmallVector<Operation *>> sliceInBlock(Value value, Block &block,
                                                 Operation *avoid) {
  DenseSet<Operation *> needed;
  SmallVector<Value> worklist = {value};
  while (!worklist.empty()) {
    Value current = worklist.pop_back_val();
    Operation *def = current.getDefiningOp();
    if (!def)
      continue;
    if (def == avoid)
      return failure();
    if (def->getBlock() != &block) {
      if (!def->hasTrait<OpTrait::ConstantLike>())
        return failure();
      continue;
    }
    if (needed.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  SmallVector<Operation *> ordered;
  for (Operation &op : block)
    if (needed.contains(&op))
      ordered.push_back(&op);
  return ordered;
}

/// What matchRowGather found in a per-row gather that can become a
/// row_select of a GEMM's epilogue.
struct RowGatherMatch {
  tensor::ExtractOp extract;
  /// The body ops the gathered column is computed by, and the inputs of
  /// the per-row op they read (the GEMM takes the columns, so these alone
  /// must be computed before it).
  SmallVector<Operation *> columnSlice;
  SmallVector<unsigned> columnInputs;
  /// y = E(C, per-row values), the gathered tensor, and its operands; null
  /// where the gather reads C itself.
  linalg::GenericOp elementwise;
  unsigned sourceIndex;
  SmallVector<OpOperand *> rowOperands;
  TileOutput tile;
};

/// Records `tile` in `match` where the operands of the per-row op `op` that
/// its gathered column is computed from are computed before the GEMM (which
/// reads the columns), else says which is not.
std::optional<std::string> checkOperandsBefore(linalg::GenericOp op,
                                               const TileOutput &tile,
                                               RowGatherMatch &match) {
  for (unsigned i : match.columnInputs)
    if (!isAvailableBefore(op.getDpsInputs()[i], tile.gemm))
      return "the column it gathers is computed from its operand #" +
             std::to_string(i) + ", which is computed after the GEMM";
  match.tile = tile;
  return std::nullopt;
}

/// A per-row op that gathers one element per row, y[m, j(m)], of an
/// elementwise function y = E(C, per-row values) of a GEMM's tile output C,
/// with j computed from the op's own inputs (a cross-entropy's pick of the
/// target's log-probability). Fills `match`, or says, in words for the
/// fusion report, why `op` is not one.
std::optional<std::string> matchRowGather(linalg::GenericOp op,
                                          RowGatherMatch &match) {
  MLIRContext *ctx = op.getContext();
  if (!op.hasPureTensorSemantics() || op.getNumLoops() != 1 ||
      op.getNumReductionLoops() != 0 || op.getNumDpsInits() != 1)
    return std::string("it is not a per-row op with one result");
  AffineMap rowMap = AffineMap::getMultiDimIdentityMap(1, ctx);
  if (!llvm::all_of(op.getIndexingMapsArray(),
                    [&](AffineMap map) { return map == rowMap; }))
    return std::string("it does not read its operands once per row");
  Block &body = *op.getBlock();

  // Exactly one gather: tensor.extract %y[%m, %j].
  for (auto candidate : body.getOps<tensor::ExtractOp>()) {
    if (match.extract)
      return std::string("it gathers more than one element per row");
    match.extract = candidate;
  }
  tensor::ExtractOp extract = match.extract;
  if (!extract || extract.getIndices().size() != 2)
    return std::string("it gathers from no matrix");
  auto rowIndex = extract.getIndices()[0].getDefiningOp<linalg::IndexOp>();
  if (!rowIndex || rowIndex.getDim() != 0)
    return std::string("the row it gathers from is not its own row");
  FailureOr<SmallVector<Operation *>> columnSlice =
      sliceInBlock(extract.getIndices()[1], body, extract);
  if (failed(columnSlice) ||
      llvm::any_of(*columnSlice, [](Operation *sliceOp) {
        return isa<linalg::IndexOp>(sliceOp) || !isEpilogueComputeOp(sliceOp);
      }))
    return std::string("the column it gathers is not computed from its "
                       "per-row operands alone");
  match.columnSlice = std::move(*columnSlice);
  auto noteInput = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (arg && arg.getOwner() == &body &&
        arg.getArgNumber() < op.getNumDpsInputs() &&
        !llvm::is_contained(match.columnInputs, arg.getArgNumber()))
      match.columnInputs.push_back(arg.getArgNumber());
  };
  noteInput(extract.getIndices()[1]);
  for (Operation *sliceOp : match.columnSlice)
    for (Value operand : sliceOp->getOperands())
      noteInput(operand);
  llvm::sort(match.columnInputs);

  // The GEMM's result itself (the raw logits, which the row reductions
  // beside may read as well: fused too, they leave it unread) ...
  if (std::optional<TileOutput> tile = getTileOutput(extract.getTensor());
      tile && !tile->gemm.isBatched())
    return checkOperandsBefore(op, *tile, match);
  // ... or y = E(C, per-row values) elementwise, read only here.
  auto elementwise = extract.getTensor().getDefiningOp<linalg::GenericOp>();
  if (!elementwise || !elementwise->hasOneUse() ||
      !elementwise.hasPureTensorSemantics() || !isElementwise(elementwise) ||
      elementwise.getNumLoops() != 2 || elementwise.getNumDpsInits() != 1 ||
      !hasOnlyEpilogueComputeOps(*elementwise.getBlock(),
                                 /*allowIndex=*/false))
    return std::string("the matrix it gathers from is neither a 2-D GEMM's "
                       "result nor an elementwise function of one read only "
                       "by the gather");
  match.elementwise = elementwise;
  std::optional<unsigned> sourceIndex;
  for (OpOperand *input : elementwise.getDpsInputOperands()) {
    auto type = cast<RankedTensorType>(input->get().getType());
    std::optional<AccessForm> form = classifyAccess(
        elementwise.getMatchingIndexingMap(input), type, 2);
    if (form == AccessForm::tile && !sourceIndex)
      sourceIndex = input->getOperandNumber();
    else if (form == AccessForm::row)
      match.rowOperands.push_back(input);
    else
      return "the matrix it gathers from reads its operand #" +
             std::to_string(input->getOperandNumber()) +
             " neither elementwise nor once per row";
  }
  if (!sourceIndex)
    return std::string("the matrix it gathers from reads no matrix");
  std::optional<TileOutput> tile =
      getTileOutput(elementwise.getDpsInputs()[*sourceIndex]);
  if (!tile || tile->gemm.isBatched())
    return std::string("the matrix it gathers from is not computed from a "
                       "2-D GEMM's result");
  match.sourceIndex = *sourceIndex;
  return checkOperandsBefore(op, *tile, match);
}

/// A gather matchRowGather accepts: the GEMM picks C[m, j(m)] for each row
/// (coda.row_select, j an epilogue row input) and the per-row op computes
/// E(picked, rows) where it gathered.
struct FuseRowGather : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    RowGatherMatch match;
    if (std::optional<std::string> why = matchRowGather(op, match))
      return rewriter.notifyMatchFailure(op, *why);
    MLIRContext *ctx = op.getContext();
    AffineMap rowMap = AffineMap::getMultiDimIdentityMap(1, ctx);
    Block &body = *op.getBlock();
    tensor::ExtractOp extract = match.extract;
    Value column = extract.getIndices()[1];
    ArrayRef<Operation *> columnSlice = match.columnSlice;
    linalg::GenericOp elementwise = match.elementwise;
    unsigned sourceIndex = match.sourceIndex;
    ArrayRef<OpOperand *> rowOperands = match.rowOperands;
    GemmOp producer = match.tile.gemm;
    Value yielded = match.tile.yielded;

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(producer);

    // j per row, as i64.
    Type i64 = rewriter.getI64Type();
    Value columnsInit =
        createEmptyWithRows(rewriter, loc, producer, {}, i64);
    SmallVector<Value> gatherInputs = llvm::map_to_vector(
        match.columnInputs, [&](unsigned i) { return op.getDpsInputs()[i]; });
    SmallVector<AffineMap> columnMaps(gatherInputs.size() + 1, rowMap);
    Value columns =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{columnsInit.getType()}, gatherInputs,
            ValueRange{columnsInit}, columnMaps,
            {utils::IteratorType::parallel},
            [&](OpBuilder &b, Location nloc, ValueRange args) {
              IRMapping mapping;
              for (auto [k, i] : llvm::enumerate(match.columnInputs))
                mapping.map(body.getArgument(i), args[k]);
              for (Operation *sliceOp : columnSlice)
                b.clone(*sliceOp, mapping);
              Value j = mapping.lookupOrDefault(column);
              linalg::YieldOp::create(
                  b, nloc, arith::IndexCastOp::create(b, nloc, i64, j)
                               .getResult());
            })
            .getResult(0);

    // The GEMM picks C at j for each row.
    Type pickedType = yielded.getType();
    Value zero = arith::ConstantOp::create(rewriter, loc,
                                           rewriter.getZeroAttr(pickedType));
    Value pickedInit = linalg::FillOp::create(
                           rewriter, loc, ValueRange{zero},
                           ValueRange{createEmptyWithRows(
                               rewriter, loc, producer, {},
                               pickedType)})
                           .getResult(0);
    SmallVector<Value> outputs(producer.getOutputs());
    outputs.push_back(pickedInit);
    YieldOp oldYield = producer.getYieldOp();
    GemmOp fused = rebuildGemm(
        rewriter, producer, producer.getLhs(), producer.getRhs(),
        producer.getTransposeB(), {{columns, AccessForm::row}}, outputs,
        [&](OpBuilder &b, IRMapping &mapping, ValueRange added) {
          SmallVector<Value> yields;
          for (Value value : oldYield.getValues())
            yields.push_back(mapping.lookupOrDefault(value));
          yields.push_back(RowSelectOp::create(
              b, loc, mapping.lookupOrDefault(yielded), added[0]));
          return yields;
        });
    rewriter.replaceOp(producer, fused->getResults().drop_back());
    Value picked = fused->getResults().back();

    // The per-row op computes E(picked, rows) where it gathered.
    rewriter.setInsertionPoint(op);
    SmallVector<Value> inputs(op.getDpsInputs());
    inputs.push_back(picked);
    for (OpOperand *input : rowOperands)
      inputs.push_back(materializeEpilogueInput(
          rewriter, loc, input->get(),
          elementwise.getMatchingIndexingMap(input), AccessForm::row));
    // Where it gathered: E(picked, rows), or the picked value itself.
    auto gathered = [&](OpBuilder &b, ValueRange args) -> Value {
      unsigned numOld = op.getNumDpsInputs();
      if (!elementwise)
        return args[numOld];
      Block &eBody = *elementwise.getBlock();
      IRMapping inner;
      inner.map(eBody.getArgument(sourceIndex), args[numOld]);
      for (auto [i, input] : llvm::enumerate(rowOperands))
        inner.map(eBody.getArgument(input->getOperandNumber()),
                  args[numOld + 1 + i]);
      for (Operation &eOp : eBody.without_terminator())
        b.clone(eOp, inner);
      return inner.lookupOrDefault(eBody.getTerminator()->getOperand(0));
    };
    SmallVector<AffineMap> maps(inputs.size() + 1, rowMap);
    auto rebuilt = linalg::GenericOp::create(
        rewriter, loc, op->getResultTypes(), inputs, op.getDpsInits(), maps,
        {utils::IteratorType::parallel},
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          IRMapping mapping;
          unsigned numOld = op.getNumDpsInputs();
          for (unsigned i = 0; i < numOld; ++i)
            mapping.map(body.getArgument(i), args[i]);
          mapping.map(body.getArgument(numOld), args.back());
          for (Operation &bodyOp : body.without_terminator()) {
            if (&bodyOp != extract.getOperation()) {
              b.clone(bodyOp, mapping);
              continue;
            }
            mapping.map(extract.getResult(), gathered(b, args));
          }
          linalg::YieldOp::create(
              b, nloc,
              llvm::map_to_vector(body.getTerminator()->getOperands(),
                                  [&](Value v) {
                                    return mapping.lookupOrDefault(v);
                                  }));
        });
    rewriter.replaceOp(op, rebuilt->getResults());
    return success();
  }
};

struct CodaFuseGathersPass
    : coda::impl::CodaFuseGathersBase<CodaFuseGathersPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseGathersPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::optional<std::string>
mlir::coda::whyNotFusedGather(linalg::GenericOp op) {
  RowGatherMatch match;
  return matchRowGather(op, match);
}

void mlir::coda::populateFuseGathersPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseRowGather>(patterns.getContext());
}
