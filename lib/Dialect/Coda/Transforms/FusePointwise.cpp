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

/// What FuseElementwiseConsumer takes from `op`: its producing GEMM, the
/// epilogue inputs it adds (operands, then `scalars`, the captured scalars)
/// and, where the destination must be made again before the GEMM, its
/// tensor.empty.
struct ConsumerMatch {
  GemmOp producer;
  SmallVector<EpilogueInput> added;
  SmallVector<std::optional<unsigned>> addedIndex;
  SmallVector<Value> scalars;
  tensor::EmptyOp emptyToRecreate;
};

/// Matches `op` as an elementwise consumer of a GEMM's tile output that can
/// join its epilogue; else returns why not, in words a fusion report shows.
std::optional<std::string> matchConsumer(linalg::GenericOp op,
                                         ConsumerMatch &m) {
  if (!op.hasPureTensorSemantics() || !isElementwise(op) ||
      op.getNumDpsInits() != 1)
    return "it is not an elementwise op on tensors with one result";
  unsigned numLoops = op.getNumLoops();
  if (numLoops != 2 && numLoops != 3)
    return "it has " + std::to_string(numLoops) +
           " loops, not a GEMM output's 2 (or 3 with a batch)";
  if (!hasOnlyEpilogueComputeOps(*op.getBlock(), /*allowIndex=*/true,
                                 /*allowCapturedScalars=*/true)) {
    for (Operation &inner : op.getBlock()->without_terminator())
      if (!isEpilogueComputeOp(&inner) && !isa<linalg::IndexOp>(inner))
        return "its body has " + inner.getName().getStringRef().str() +
               ", which an epilogue does not run";
    return "its body uses a value from outside it that is neither a "
           "constant nor a floating-point scalar";
  }
  for (auto index : op.getBlock()->getOps<linalg::IndexOp>())
    if (index.getDim() < numLoops - 2)
      return std::string("it reads the batch index");

  // The producer: the last GEMM (in the block) whose tile output is read
  // elementwise, so that the other GEMMs' results exist before it and
  // become its tile inputs (a sum of two products).
  for (OpOperand *input : op.getDpsInputOperands()) {
    GemmOp gemm = getTileProducer(input->get());
    if (gemm && op.getMatchingIndexingMap(input).isIdentity() &&
        gemm.getLhsType().getRank() == numLoops &&
        (!m.producer || (gemm->getBlock() == m.producer->getBlock() &&
                         m.producer->isBeforeInBlock(gemm))))
      m.producer = gemm;
  }
  if (!m.producer)
    return "it reads no GEMM result elementwise (identity map)";

  // Every other operand must exist before the producer (no reordering) and
  // be readable in one of the access forms.
  m.addedIndex.assign(op.getNumDpsInputs(), std::nullopt);
  for (OpOperand *input : op.getDpsInputOperands()) {
    Value value = input->get();
    AffineMap map = op.getMatchingIndexingMap(input);
    std::string which = "its operand #" + std::to_string(input->getOperandNumber());
    if (value.getDefiningOp() == m.producer.getOperation()) {
      if (!map.isIdentity() || !getTileProducer(value))
        return which + " reads the GEMM's result transposed or as a partial";
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(value.getType());
    std::optional<AccessForm> form =
        type ? classifyAccess(map, type, numLoops) : std::nullopt;
    if (!form) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << which << " is read through " << map
         << ", none of the epilogue's access forms (tile, row, column, scalar)";
      return text;
    }
    if (!isAvailableBefore(value, m.producer))
      return which + " is computed after the GEMM";
    m.addedIndex[input->getOperandNumber()] = m.added.size();
    m.added.push_back({value, *form});
  }
  // Runtime scalars the body captures become scalar epilogue inputs.
  m.scalars = capturedScalars(*op.getBlock());
  for (Value scalar : m.scalars)
    if (!isAvailableBefore(scalar, m.producer))
      return std::string("a scalar its body reads is computed after the GEMM");
  for (Value scalar : m.scalars)
    m.added.push_back({scalar, AccessForm::scalar});
  // The destination must exist before the producer too; a tensor.empty can
  // be made again there.
  Value destination = op.getDpsInits()[0];
  if (!isAvailableBefore(destination, m.producer)) {
    m.emptyToRecreate = destination.getDefiningOp<tensor::EmptyOp>();
    if (!m.emptyToRecreate ||
        !llvm::all_of(m.emptyToRecreate->getOperands(), [&](Value size) {
          return isAvailableBefore(size, m.producer);
        }))
      return std::string("its destination is computed after the GEMM");
  }
  return std::nullopt;
}

struct FuseElementwiseConsumer : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    ConsumerMatch match;
    if (std::optional<std::string> why = matchConsumer(op, match))
      return rewriter.notifyMatchFailure(op, *why);
    GemmOp producer = match.producer;
    SmallVector<EpilogueInput> &added = match.added;
    ArrayRef<std::optional<unsigned>> addedIndex = match.addedIndex;
    ArrayRef<Value> scalars = match.scalars;
    unsigned firstScalar = added.size() - scalars.size();
    unsigned numLoops = op.getNumLoops();
    Location loc = op.getLoc();
    Value destination = op.getDpsInits()[0];
    tensor::EmptyOp emptyToRecreate = match.emptyToRecreate;

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

std::optional<std::string>
mlir::coda::whyNotFusedPointwise(linalg::GenericOp op) {
  ConsumerMatch match;
  return matchConsumer(op, match);
}

void mlir::coda::populateFusePointwisePatterns(RewritePatternSet &patterns) {
  patterns.add<FuseElementwiseConsumer>(patterns.getContext());
}
