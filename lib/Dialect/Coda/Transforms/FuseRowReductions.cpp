//===- FuseRowReductions.cpp - row reductions of a GEMM into partials -----===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSEROWREDUCTIONS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// True when `value` is computed in `block` without reading `avoid`.
bool avoids(Value value, BlockArgument avoid) {
  SmallVector<Value> worklist = {value};
  DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value current = worklist.pop_back_val();
    if (current == avoid)
      return false;
    if (!seen.insert(current).second)
      continue;
    if (Operation *def = current.getDefiningOp())
      llvm::append_range(worklist, def->getOperands());
  }
  return true;
}

struct FuseRowSum : OpRewritePattern<linalg::GenericOp> {
  FuseRowSum(MLIRContext *ctx, int64_t tile)
      : OpRewritePattern(ctx), tile(tile) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
        op.getNumDpsInits() != 1 || op.getNumLoops() != 2 ||
        op.getNumReductionLoops() != 1 ||
        op.getIteratorTypesArray()[1] != utils::IteratorType::reduction)
      return rewriter.notifyMatchFailure(op, "not a row reduction");
    AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
    AffineMap rowMap = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    // keepdim form: [m, n] -> [m, 0] into an M x 1 result.
    AffineMap keepDimMap = AffineMap::get(
        2, 0, {getAffineDimExpr(0, ctx), getAffineConstantExpr(0, ctx)}, ctx);
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    bool keepDim = maps[1] == keepDimMap;
    if (maps[0] != identity || (maps[1] != rowMap && !keepDim))
      return rewriter.notifyMatchFailure(op, "not [m, n] -> [m]");
    Block &body = *op.getBlock();
    if (!hasOnlyEpilogueComputeOps(body, /*allowIndex=*/false))
      return rewriter.notifyMatchFailure(op, "body is not scalar math");

    // yield(out + f(x)) with f independent of out.
    BlockArgument in = body.getArgument(0), out = body.getArgument(1);
    auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
    if (!add || (add.getLhs() != out && add.getRhs() != out))
      return rewriter.notifyMatchFailure(op, "not a sum");
    Value term = add.getLhs() == out ? add.getRhs() : add.getLhs();
    if (!avoids(term, out))
      return rewriter.notifyMatchFailure(op, "summand reads the running sum");

    // The summed tensor must be a tile output of a 2-D GEMM, and the sum start
    // from zero.
    auto source = dyn_cast<OpResult>(op.getDpsInputs()[0]);
    auto producer = source ? dyn_cast<GemmOp>(source.getOwner()) : GemmOp();
    if (!producer || producer.isBatched())
      return rewriter.notifyMatchFailure(op, "not a GEMM output");
    Value yielded = producer.getYieldOp().getValues()[source.getResultNumber()];
    if (!yielded.getType().isIntOrIndexOrFloat())
      return rewriter.notifyMatchFailure(op, "not a tile output");
    Value init = op.getDpsInits()[0];
    auto fill = init.getDefiningOp<linalg::FillOp>();
    auto zero = fill ? fill.getInputs()[0].getDefiningOp<arith::ConstantOp>()
                     : arith::ConstantOp();
    auto zeroAttr = zero ? dyn_cast<FloatAttr>(zero.getValue()) : nullptr;
    if (!zeroAttr || !zeroAttr.getValue().isZero())
      return rewriter.notifyMatchFailure(op, "sum does not start at zero");
    auto sourceType = cast<RankedTensorType>(source.getType());
    auto resultType = cast<RankedTensorType>(init.getType());
    if (!sourceType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shape");
    Value finishInit = fill.getOutputs()[0];
    if (!isAvailableBefore(finishInit, op))
      return rewriter.notifyMatchFailure(op, "destination not available");

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(producer);
    int64_t rows = sourceType.getDimSize(0), cols = sourceType.getDimSize(1);
    Value partials = tensor::EmptyOp::create(
        rewriter, loc, {rows, static_cast<int64_t>(llvm::divideCeil(cols, tile))},
        resultType.getElementType());
    SmallVector<Value> outputs(producer.getOutputs());
    outputs.push_back(partials);
    YieldOp oldYield = producer.getYieldOp();
    GemmOp fused = rebuildGemm(
        rewriter, producer, producer.getLhs(), producer.getRhs(),
        producer.getTransposeB(), {}, outputs,
        [&](OpBuilder &b, IRMapping &mapping, ValueRange) {
          SmallVector<Value> yields;
          for (Value value : oldYield.getValues())
            yields.push_back(mapping.lookupOrDefault(value));
          IRMapping inner;
          cloneCapturedConstants(b, body, inner);
          inner.map(in, mapping.lookupOrDefault(yielded));
          for (Operation &inner_op : body.without_terminator())
            b.clone(inner_op, inner);
          Value summand = inner.lookupOrDefault(term);
          yields.push_back(RowReduceOp::create(b, loc, summand,
                                               ReductionKind::sum, tile));
          return yields;
        });
    rewriter.replaceOp(producer, fused->getResults().drop_back());
    rewriter.setInsertionPoint(op);
    if (keepDim)
      finishInit = tensor::EmptyOp::create(rewriter, loc, {rows},
                                           resultType.getElementType());
    Value total = ReducePartialsOp::create(rewriter, loc,
                                           fused->getResults().back(),
                                           finishInit, ReductionKind::sum,
                                           ReductionAxis::row)
                      .getResult();
    if (keepDim)
      total = tensor::ExpandShapeOp::create(
          rewriter, loc, resultType, total,
          SmallVector<ReassociationIndices>{{0, 1}});
    rewriter.replaceOp(op, total);
    return success();
  }

  int64_t tile;
};

struct CodaFuseRowReductionsPass
    : coda::impl::CodaFuseRowReductionsBase<CodaFuseRowReductionsPass> {
  using CodaFuseRowReductionsBase::CodaFuseRowReductionsBase;

  void runOnOperation() override {
    if (tile <= 0) {
      getOperation()->emitError("coda-fuse-row-reductions: tile must be "
                                "positive, got ")
          << static_cast<int64_t>(tile);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    populateFuseRowReductionsPatterns(patterns, tile);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateFuseRowReductionsPatterns(RewritePatternSet &patterns,
                                                   int64_t tile) {
  patterns.add<FuseRowSum>(patterns.getContext(), tile);
}
