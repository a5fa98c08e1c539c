//===- FusePointwise.cpp - elementwise consumers into GEMM epilogues ------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSEPOINTWISE
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The producing gemm of `value` if it is one of its tile outputs.
GemmOp getTileProducer(Value value) {
  std::optional<TileOutput> tile = getTileOutput(value);
  return tile ? tile->gemm : GemmOp();
}

struct FuseElementwiseConsumer : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || !isElementwise(op) ||
        op.getNumDpsInits() != 1)
      return rewriter.notifyMatchFailure(op, "not an elementwise tensor op");
    unsigned numLoops = op.getNumLoops();
    if (numLoops != 2 && numLoops != 3)
      return rewriter.notifyMatchFailure(op, "not over a GEMM output space");
    if (!hasOnlyEpilogueComputeOps(*op.getBlock(), /*allowIndex=*/true,
                                   /*allowCapturedScalars=*/true))
      return rewriter.notifyMatchFailure(op, "body is not scalar math");
    for (auto index : op.getBlock()->getOps<linalg::IndexOp>())
      if (index.getDim() < numLoops - 2)
        return rewriter.notifyMatchFailure(op, "reads the batch index");

    // The producer: the first tile output of a gemm read elementwise.
    GemmOp producer;
    for (OpOperand *input : op.getDpsInputOperands()) {
      GemmOp gemm = getTileProducer(input->get());
      if (gemm && op.getMatchingIndexingMap(input).isIdentity() &&
          gemm.getLhsType().getRank() == numLoops) {
        producer = gemm;
        break;
      }
    }
    if (!producer)
      return rewriter.notifyMatchFailure(op, "no GEMM operand");

    // Every other operand must exist before the producer (no reordering) and
    // be readable in one of the access forms.
    SmallVector<EpilogueInput> added;
    SmallVector<std::optional<unsigned>> addedIndex(op.getNumDpsInputs());
    Location loc = op.getLoc();
    for (OpOperand *input : op.getDpsInputOperands()) {
      Value value = input->get();
      AffineMap map = op.getMatchingIndexingMap(input);
      if (value.getDefiningOp() == producer.getOperation()) {
        if (!map.isIdentity() || !getTileProducer(value))
          return rewriter.notifyMatchFailure(op, "reads the GEMM transposed");
        continue;
      }
      auto type = dyn_cast<RankedTensorType>(value.getType());
      std::optional<AccessForm> form =
          type ? classifyAccess(map, type, numLoops) : std::nullopt;
      if (!form)
        return rewriter.notifyMatchFailure(op, "operand access not fusable");
      if (!isAvailableBefore(value, producer))
        return rewriter.notifyMatchFailure(op, "operand defined after GEMM");
      addedIndex[input->getOperandNumber()] = added.size();
      added.push_back({value, *form});
    }
    // Runtime scalars the body captures become scalar epilogue inputs.
    SmallVector<Value> scalars = capturedScalars(*op.getBlock());
    for (Value scalar : scalars)
      if (!isAvailableBefore(scalar, producer))
        return rewriter.notifyMatchFailure(op, "scalar defined after GEMM");
    unsigned firstScalar = added.size();
    for (Value scalar : scalars)
      added.push_back({scalar, AccessForm::scalar});
    // The destination must exist before the producer too; a tensor.empty can
    // be made again there.
    Value destination = op.getDpsInits()[0];
    tensor::EmptyOp emptyToRecreate;
    if (!isAvailableBefore(destination, producer)) {
      emptyToRecreate = destination.getDefiningOp<tensor::EmptyOp>();
      if (!emptyToRecreate ||
          !llvm::all_of(emptyToRecreate->getOperands(), [&](Value size) {
            return isAvailableBefore(size, producer);
          }))
        return rewriter.notifyMatchFailure(op, "destination defined after GEMM");
    }

    rewriter.setInsertionPoint(producer);
    if (emptyToRecreate)
      destination = rewriter.clone(*emptyToRecreate)->getResult(0);
    for (auto [i, input] : llvm::enumerate(op.getDpsInputOperands()))
      if (addedIndex[i])
        added[*addedIndex[i]].value = materializeEpilogueInput(
            rewriter, loc, input->get(), op.getMatchingIndexingMap(input),
            added[*addedIndex[i]].form);

    // Producer outputs read only by `op` are no longer written.
    SmallVector<unsigned> keptResults;
    SmallVector<Value> outputs;
    for (OpResult result : producer->getResults()) {
      bool onlyHere = llvm::all_of(result.getUsers(), [&](Operation *user) {
        return user == op.getOperation();
      });
      if (!onlyHere) {
        keptResults.push_back(result.getResultNumber());
        outputs.push_back(producer.getOutputs()[result.getResultNumber()]);
      }
    }
    outputs.push_back(destination);

    YieldOp oldYield = producer.getYieldOp();
    Block &consumerBody = *op.getBlock();
    unsigned firstPosition = numLoops - 2;
    GemmOp fused = rebuildGemm(
        rewriter, producer, producer.getLhs(), producer.getRhs(),
        producer.getTransposeB(), added, outputs,
        [&](OpBuilder &b, IRMapping &mapping, ValueRange addedArgs) {
          IRMapping inner;
          for (auto [i, scalar] : llvm::enumerate(scalars))
            inner.map(scalar, addedArgs[firstScalar + i]);
          cloneCapturedConstants(b, consumerBody, inner);
          for (OpOperand *input : op.getDpsInputOperands()) {
            BlockArgument arg = consumerBody.getArgument(input->getOperandNumber());
            if (auto index = addedIndex[input->getOperandNumber()]) {
              inner.map(arg, addedArgs[*index]);
              continue;
            }
            unsigned result = cast<OpResult>(input->get()).getResultNumber();
            inner.map(arg, mapping.lookup(oldYield.getValues()[result]));
          }
          for (Operation &inner_op : consumerBody.without_terminator()) {
            if (auto index = dyn_cast<linalg::IndexOp>(inner_op)) {
              Value position =
                  index.getDim() == firstPosition
                      ? RowIndexOp::create(b, index.getLoc()).getResult()
                      : ColIndexOp::create(b, index.getLoc()).getResult();
              inner.map(index.getResult(), position);
              continue;
            }
            b.clone(inner_op, inner);
          }
          SmallVector<Value> yields;
          for (unsigned result : keptResults)
            yields.push_back(mapping.lookup(oldYield.getValues()[result]));
          auto consumerYield = cast<linalg::YieldOp>(consumerBody.getTerminator());
          yields.push_back(inner.lookup(consumerYield.getOperand(0)));
          return yields;
        });

    for (auto [i, result] : llvm::enumerate(keptResults))
      rewriter.replaceAllUsesWith(producer->getResult(result),
                                  fused->getResult(i));
    rewriter.replaceOp(op, fused->getResult(keptResults.size()));
    rewriter.eraseOp(producer);
    return success();
  }
};

struct CodaFusePointwisePass
    : coda::impl::CodaFusePointwiseBase<CodaFusePointwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFusePointwisePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateFusePointwisePatterns(RewritePatternSet &patterns) {
  patterns.add<FuseElementwiseConsumer>(patterns.getContext());
}
