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

struct FuseRowGather : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    if (!op.hasPureTensorSemantics() || op.getNumLoops() != 1 ||
        op.getNumReductionLoops() != 0 || op.getNumDpsInits() != 1)
      return rewriter.notifyMatchFailure(op, "not a per-row op");
    AffineMap rowMap = AffineMap::getMultiDimIdentityMap(1, ctx);
    if (!llvm::all_of(op.getIndexingMapsArray(),
                      [&](AffineMap map) { return map == rowMap; }))
      return rewriter.notifyMatchFailure(op, "not per row");
    Block &body = *op.getBlock();

    // Exactly one gather: tensor.extract %y[%m, %j].
    tensor::ExtractOp extract;
    for (auto candidate : body.getOps<tensor::ExtractOp>()) {
      if (extract)
        return rewriter.notifyMatchFailure(op, "several gathers");
      extract = candidate;
    }
    if (!extract || extract.getIndices().size() != 2)
      return rewriter.notifyMatchFailure(op, "no 2-D gather");
    auto rowIndex = extract.getIndices()[0].getDefiningOp<linalg::IndexOp>();
    if (!rowIndex || rowIndex.getDim() != 0)
      return rewriter.notifyMatchFailure(op, "gather row is not the row");
    Value column = extract.getIndices()[1];
    FailureOr<SmallVector<Operation *>> columnSlice =
        sliceInBlock(column, body, extract);
    if (failed(columnSlice) ||
        llvm::any_of(*columnSlice, [](Operation *sliceOp) {
          return isa<linalg::IndexOp>(sliceOp) || !isEpilogueComputeOp(sliceOp);
        }))
      return rewriter.notifyMatchFailure(op, "column is not a function of inputs");

    // y = E(C, per-row values) elementwise, read only here.
    auto elementwise = extract.getTensor().getDefiningOp<linalg::GenericOp>();
    if (!elementwise || !elementwise->hasOneUse() ||
        !elementwise.hasPureTensorSemantics() || !isElementwise(elementwise) ||
        elementwise.getNumLoops() != 2 || elementwise.getNumDpsInits() != 1 ||
        !hasOnlyEpilogueComputeOps(*elementwise.getBlock(),
                                   /*allowIndex=*/false))
      return rewriter.notifyMatchFailure(op, "gathered tensor not elementwise");
    Block &eBody = *elementwise.getBlock();
    std::optional<unsigned> sourceIndex;
    SmallVector<OpOperand *> rowOperands;
    for (OpOperand *input : elementwise.getDpsInputOperands()) {
      auto type = cast<RankedTensorType>(input->get().getType());
      std::optional<AccessForm> form = classifyAccess(
          elementwise.getMatchingIndexingMap(input), type, 2);
      if (form == AccessForm::tile && !sourceIndex)
        sourceIndex = input->getOperandNumber();
      else if (form == AccessForm::row)
        rowOperands.push_back(input);
      else
        return rewriter.notifyMatchFailure(op, "gathered tensor operand");
    }
    if (!sourceIndex)
      return rewriter.notifyMatchFailure(op, "no tile operand");
    std::optional<TileOutput> tile =
        getTileOutput(elementwise.getDpsInputs()[*sourceIndex]);
    if (!tile || tile->gemm.isBatched())
      return rewriter.notifyMatchFailure(op, "not a GEMM tile output");
    GemmOp producer = tile->gemm;
    Value yielded = tile->yielded;
    for (OpOperand *input : op.getDpsInputOperands())
      if (!isAvailableBefore(input->get(), producer))
        return rewriter.notifyMatchFailure(op, "gather input after the GEMM");

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(producer);

    // j per row, as i64.
    Type i64 = rewriter.getI64Type();
    Value columnsInit =
        createEmptyWithRows(rewriter, loc, producer, {}, i64);
    SmallVector<Value> gatherInputs(op.getDpsInputs());
    SmallVector<AffineMap> columnMaps(gatherInputs.size() + 1, rowMap);
    Value columns =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{columnsInit.getType()}, gatherInputs,
            ValueRange{columnsInit}, columnMaps,
            {utils::IteratorType::parallel},
            [&](OpBuilder &b, Location nloc, ValueRange args) {
              IRMapping mapping;
              for (unsigned i = 0; i < gatherInputs.size(); ++i)
                mapping.map(body.getArgument(i), args[i]);
              for (Operation *sliceOp : *columnSlice)
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
            IRMapping inner;
            inner.map(eBody.getArgument(*sourceIndex), args[numOld]);
            for (auto [i, input] : llvm::enumerate(rowOperands))
              inner.map(eBody.getArgument(input->getOperandNumber()),
                        args[numOld + 1 + i]);
            for (Operation &eOp : eBody.without_terminator())
              b.clone(eOp, inner);
            mapping.map(extract.getResult(),
                        inner.lookupOrDefault(eBody.getTerminator()->getOperand(0)));
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

void mlir::coda::populateFuseGathersPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseRowGather>(patterns.getContext());
}
