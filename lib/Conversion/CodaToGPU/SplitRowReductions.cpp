//===- SplitRowReductions.cpp - row reductions as lanes' partials ---------===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODASPLITROWREDUCTIONS
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;

namespace {

/// A row reduction over a matrix's contiguous dimension, `out[t] =
/// combine(out[t], f(x[t, k]))` (output map (t, k) -> (t) or (t, 0)), as
/// partials over `lanes` interleaved columns, part[t, p] = combine over j of
/// f(x[t, j * lanes + p]), then their combination per row: the loop kernels
/// give a row's lanes consecutive columns instead of a thread its whole row.
struct SplitRowReduction : OpRewritePattern<linalg::GenericOp> {
  SplitRowReduction(MLIRContext *ctx, int64_t lanes, int64_t minColumns)
      : OpRewritePattern(ctx), lanes(lanes), minColumns(minColumns) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
        op.getNumDpsInits() != 1 || op.getNumLoops() != 2 ||
        op.getNumReductionLoops() != 1 ||
        op.getIteratorTypesArray()[1] != utils::IteratorType::reduction)
      return rewriter.notifyMatchFailure(op, "not a row reduction");
    auto inputType =
        dyn_cast<RankedTensorType>(op.getDpsInputOperand(0)->get().getType());
    if (!inputType || inputType.getRank() != 2 ||
        ShapedType::isDynamic(inputType.getDimSize(1)))
      return rewriter.notifyMatchFailure(op, "input not a matrix of static width");
    int64_t columns = inputType.getDimSize(1);
    if (columns < minColumns || columns % lanes != 0)
      return rewriter.notifyMatchFailure(op, "too narrow or not a multiple");
    AffineMap inMap = op.getMatchingIndexingMap(op.getDpsInputOperand(0));
    AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
    MLIRContext *ctx = op.getContext();
    AffineExpr d0 = getAffineDimExpr(0, ctx);
    if (!inMap.isIdentity() || outMap.getNumResults() < 1 ||
        outMap.getResult(0) != d0)
      return rewriter.notifyMatchFailure(op, "not read in order");
    for (AffineExpr e : outMap.getResults().drop_front()) {
      auto c = dyn_cast<AffineConstantExpr>(e);
      if (!c || c.getValue() != 0)
        return rewriter.notifyMatchFailure(op, "output not a column");
    }
    if (!op.getBlock()->getOps<linalg::IndexOp>().empty())
      return rewriter.notifyMatchFailure(op, "reads its indices");
    // The combiner: the yielded value combines the output's block argument
    // (used by it alone) with the rest of the body.
    Block *body = op.getBlock();
    BlockArgument outArg = body->getArgument(1);
    Operation *combiner = body->getTerminator()->getOperand(0).getDefiningOp();
    if (!combiner || combiner->getNumOperands() != 2 ||
        combiner->getNumResults() != 1 || !outArg.hasOneUse() ||
        outArg.getUses().begin()->getOwner() != combiner)
      return rewriter.notifyMatchFailure(op, "no single combiner");
    std::optional<TypedAttr> neutral = arith::getNeutralElement(combiner);
    if (!neutral)
      return rewriter.notifyMatchFailure(op, "combiner without an identity");
    Type accType = outArg.getType();

    Location loc = op.getLoc();
    Value input = op.getDpsInputOperand(0)->get();
    int64_t steps = columns / lanes;
    auto expandedType = RankedTensorType::get(
        {inputType.getDimSize(0), steps, lanes}, inputType.getElementType());
    Value expanded = tensor::ExpandShapeOp::create(
        rewriter, loc, expandedType, input,
        SmallVector<ReassociationIndices>{{0}, {1, 2}});
    SmallVector<OpFoldResult> partShape{
        tensor::getMixedSize(rewriter, loc, input, 0),
        rewriter.getIndexAttr(lanes)};
    Value empty = tensor::EmptyOp::create(rewriter, loc, partShape, accType);
    Value identity = arith::ConstantOp::create(rewriter, loc, *neutral);
    Value init =
        linalg::FillOp::create(rewriter, loc, identity, empty).getResult(0);

    // part[t, p] over (t, p, j): x[t, j, p].
    AffineExpr t = getAffineDimExpr(0, ctx), p = getAffineDimExpr(1, ctx),
               j = getAffineDimExpr(2, ctx);
    auto partMaps = SmallVector<AffineMap>{
        AffineMap::get(3, 0, {t, j, p}, ctx), AffineMap::get(3, 0, {t, p}, ctx)};
    auto partial = linalg::GenericOp::create(
        rewriter, loc, init.getType(), ValueRange{expanded}, ValueRange{init},
        partMaps,
        SmallVector<utils::IteratorType>{utils::IteratorType::parallel,
                                         utils::IteratorType::parallel,
                                         utils::IteratorType::reduction});
    rewriter.cloneRegionBefore(op.getRegion(), partial.getRegion(),
                               partial.getRegion().end());

    // out[t] = combine over p of part[t, p].
    auto finalMaps =
        SmallVector<AffineMap>{AffineMap::getMultiDimIdentityMap(2, ctx), outMap};
    auto combined = linalg::GenericOp::create(
        rewriter, loc, op.getResultTypes(), ValueRange{partial.getResult(0)},
        ValueRange{op.getDpsInitOperand(0)->get()}, finalMaps,
        op.getIteratorTypesArray(),
        [&](OpBuilder &b, Location l, ValueRange args) {
          IRMapping map;
          Value other = combiner->getOperand(0) == outArg
                            ? combiner->getOperand(1)
                            : combiner->getOperand(0);
          map.map(other, args[0]);
          map.map(outArg, args[1]);
          Operation *clone = b.clone(*combiner, map);
          linalg::YieldOp::create(b, l, clone->getResult(0));
        });
    rewriter.replaceOp(op, combined.getResults());
    return success();
  }

  int64_t lanes, minColumns;
};

struct CodaSplitRowReductionsPass
    : coda::impl::CodaSplitRowReductionsBase<CodaSplitRowReductionsPass> {
  using CodaSplitRowReductionsBase::CodaSplitRowReductionsBase;

  void runOnOperation() override {
    if (lanes <= 0 || minColumns <= lanes) {
      getOperation()->emitError("coda-split-row-reductions: lanes must be "
                                "positive and min-columns above lanes");
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitRowReduction>(&getContext(), lanes, minColumns);
    // Each match rewrites one reduction into two that do not match again
    // (the partials' reduction dimension is the middle one; the final one is
    // `lanes` wide, below min-columns).
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
