//===- FuseReductions.cpp - reductions of a GEMM output into partials -----===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSEREDUCTIONS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// True when `value` (in `block`) reads no block argument but those in
/// `allowed` (constants are fine).
bool readsOnly(Value value, Block &block, ArrayRef<BlockArgument> allowed) {
  auto args = readBlockArguments(value, block);
  return args && llvm::all_of(*args, [&](BlockArgument arg) {
           return llvm::is_contained(allowed, arg);
         });
}

/// The float constant a linalg.fill writes, if `value` is one.
std::optional<APFloat> getFillConstant(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  auto constant = fill ? fill.getInputs()[0].getDefiningOp<arith::ConstantOp>()
                       : arith::ConstantOp();
  auto attr = constant ? dyn_cast<FloatAttr>(constant.getValue()) : nullptr;
  if (!attr)
    return std::nullopt;
  return attr.getValue();
}

/// Reductions of a 2-D GEMM's tile output along its rows (`[m, n] -> [m]`,
/// or keepdim `[m, 0]`) or its columns (`[m, n] -> [n]`, keepdim `[0, n]`),
/// in three forms:
///   sum:       out + f(C)                  from 0
///   max:       max(out, f(C))              from -inf
///   exp-sum:   out + exp(f(C) - g(vector)) from 0  (a softmax denominator)
/// All become a coda.row_reduce / coda.col_reduce of f in the GEMM's
/// epilogue and a finish; the exp-sum one is a log-sum-exp of f, finished as
/// exp(lse - g).
struct FuseReduction : OpRewritePattern<linalg::GenericOp> {
  FuseReduction(MLIRContext *ctx, ReductionAxis axis, int64_t tile)
      : OpRewritePattern(ctx), axis(axis), tile(tile) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    bool rows = axis == ReductionAxis::row;
    // Rows reduce over n (loop 1) and keep m (loop 0); columns the reverse.
    unsigned reduced = rows ? 1 : 0, kept = 1 - reduced;
    if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
        op.getNumLoops() != 2 || op.getNumReductionLoops() != 1 ||
        op.getIteratorTypesArray()[reduced] != utils::IteratorType::reduction)
      return rewriter.notifyMatchFailure(op, "not a reduction on this axis");
    AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
    AffineMap vectorMap =
        AffineMap::get(2, 0, {getAffineDimExpr(kept, ctx)}, ctx);
    // keepdim form: [m, 0] (rows) or [0, n] (columns).
    SmallVector<AffineExpr> keepDimExprs(2, getAffineConstantExpr(0, ctx));
    keepDimExprs[kept] = getAffineDimExpr(kept, ctx);
    AffineMap keepDimMap = AffineMap::get(2, 0, keepDimExprs, ctx);
    OpOperand *initOperand = op.getDpsInitOperand(0);
    AffineMap initMap = op.getMatchingIndexingMap(initOperand);
    bool keepDim = initMap == keepDimMap;
    if (initMap != vectorMap && !keepDim)
      return rewriter.notifyMatchFailure(op, "not a reduction to a vector");
    Block &body = *op.getBlock();
    if (!hasOnlyEpilogueComputeOps(body, /*allowIndex=*/false))
      return rewriter.notifyMatchFailure(op, "body is not scalar math");

    // The reduced tensor: one GEMM tile output read elementwise; the other
    // inputs are read per kept index (one value per row, or per column).
    std::optional<unsigned> sourceIndex;
    SmallVector<BlockArgument> rowArgs, tileArgs;
    for (OpOperand *input : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(input);
      if (map == identity && !sourceIndex &&
          getTileOutput(input->get())) {
        sourceIndex = input->getOperandNumber();
      } else if (map == identity) {
        // Another full-size operand: a tile input of the epilogue.
        tileArgs.push_back(body.getArgument(input->getOperandNumber()));
      } else if (map == vectorMap || map == keepDimMap) {
        rowArgs.push_back(body.getArgument(input->getOperandNumber()));
      } else {
        return rewriter.notifyMatchFailure(op, "operand access");
      }
    }
    if (!sourceIndex)
      return rewriter.notifyMatchFailure(op, "no [m, n] operand");
    std::optional<TileOutput> reducedOutput =
        getTileOutput(op.getDpsInputs()[*sourceIndex]);
    if (!reducedOutput || reducedOutput->gemm.isBatched())
      return rewriter.notifyMatchFailure(op, "not a GEMM tile output");
    GemmOp producer = reducedOutput->gemm;
    OpResult source = reducedOutput->result;
    Value yielded = reducedOutput->yielded;
    SmallVector<EpilogueInput> tileInputs;
    for (BlockArgument arg : tileArgs) {
      Value value = op.getDpsInputs()[arg.getArgNumber()];
      if (!isAvailableBefore(value, producer))
        return rewriter.notifyMatchFailure(op, "operand after the GEMM");
      tileInputs.push_back({value, AccessForm::tile});
    }
    SmallVector<BlockArgument> elementArgs(tileArgs);

    // Which reduction is it?
    BlockArgument in = body.getArgument(*sourceIndex);
    BlockArgument out = body.getArgument(initOperand->getOperandNumber());
    Operation *combine = body.getTerminator()->getOperand(0).getDefiningOp();
    if (!combine || combine->getNumOperands() != 2 ||
        (combine->getOperand(0) != out && combine->getOperand(1) != out))
      return rewriter.notifyMatchFailure(op, "not an accumulation");
    Value term = combine->getOperand(0) == out ? combine->getOperand(1)
                                               : combine->getOperand(0);
    std::optional<APFloat> start = getFillConstant(op.getDpsInits()[0]);
    if (!start)
      return rewriter.notifyMatchFailure(op, "no constant start value");
    ReductionKind kind;
    Value reducedValue = term, shift;
    if (isa<arith::AddFOp>(combine) && start->isZero()) {
      auto exp = term.getDefiningOp<math::ExpOp>();
      auto sub = exp ? exp.getOperand().getDefiningOp<arith::SubFOp>()
                     : arith::SubFOp();
      elementArgs.push_back(in);
      if (sub && !rowArgs.empty() &&
          readsOnly(sub.getLhs(), body, elementArgs) &&
          readsOnly(sub.getRhs(), body, rowArgs)) {
        kind = ReductionKind::logsumexp;
        reducedValue = sub.getLhs();
        shift = sub.getRhs();
      } else {
        kind = ReductionKind::sum;
      }
    } else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combine) &&
               start->isInfinity() && start->isNegative()) {
      kind = ReductionKind::max;
    } else {
      return rewriter.notifyMatchFailure(op, "not a sum, max or exp-sum");
    }
    if (!llvm::is_contained(elementArgs, in))
      elementArgs.push_back(in);
    if (!readsOnly(reducedValue, body, elementArgs))
      return rewriter.notifyMatchFailure(op, "reduced value reads vectors");

    auto sourceType = cast<RankedTensorType>(source.getType());
    auto resultType = cast<RankedTensorType>(op.getDpsInits()[0].getType());
    auto elementType = dyn_cast<FloatType>(resultType.getElementType());
    int64_t cols = sourceType.getDimSize(1);
    if (ShapedType::isDynamic(cols) || !elementType ||
        reducedValue.getType() != elementType)
      return rewriter.notifyMatchFailure(op, "dynamic N, or types");

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(producer);
    // Row partials are M x ceil(N / tile); column partials ceil(M / tile) x N.
    Value partials;
    if (rows) {
      partials = createEmptyWithRows(
          rewriter, loc, producer,
          {static_cast<int64_t>(llvm::divideCeil(cols, tile))}, elementType);
    } else {
      int64_t m = sourceType.getDimSize(0);
      SmallVector<Value> dynamicSizes;
      int64_t tiles = ShapedType::kDynamic;
      if (ShapedType::isDynamic(m)) {
        Value size = tensor::DimOp::create(rewriter, loc, producer.getLhs(),
                                           producer.getLhsMDim());
        dynamicSizes.push_back(arith::CeilDivUIOp::create(
            rewriter, loc, size,
            arith::ConstantIndexOp::create(rewriter, loc, tile)));
      } else {
        tiles = llvm::divideCeil(m, tile);
      }
      partials = tensor::EmptyOp::create(rewriter, loc, {tiles, cols},
                                         elementType, dynamicSizes);
    }
    SmallVector<Value> outputs(producer.getOutputs());
    outputs.push_back(partials);
    YieldOp oldYield = producer.getYieldOp();
    GemmOp fused = rebuildGemm(
        rewriter, producer, producer.getLhs(), producer.getRhs(),
        producer.getTransposeB(), tileInputs, outputs,
        [&](OpBuilder &b, IRMapping &mapping, ValueRange addedArgs) {
          SmallVector<Value> yields;
          for (Value value : oldYield.getValues())
            yields.push_back(mapping.lookupOrDefault(value));
          IRMapping inner;
          cloneCapturedConstants(b, body, inner);
          inner.map(in, mapping.lookupOrDefault(yielded));
          for (auto [arg, added] : llvm::zip(tileArgs, addedArgs))
            inner.map(arg, added);
          for (Operation &inner_op : body.without_terminator())
            if (readsOnly(inner_op.getResult(0), body, elementArgs))
              b.clone(inner_op, inner);
          Value summand = inner.lookupOrDefault(reducedValue);
          yields.push_back(
              rows ? RowReduceOp::create(b, loc, summand, kind, tile)
                         .getResult()
                   : ColReduceOp::create(b, loc, summand, kind, tile)
                         .getResult());
          return yields;
        });
    rewriter.replaceOp(producer, fused->getResults().drop_back());

    rewriter.setInsertionPoint(op);
    Value fusedPartials = fused->getResults().back();
    // The finished vector: M values (rows) or N values (columns).
    auto makeVector = [&]() -> Value {
      if (rows)
        return createEmptyWithRows(rewriter, loc, fusedPartials, {},
                                   elementType);
      return tensor::EmptyOp::create(rewriter, loc, {cols}, elementType);
    };
    Value total = ReducePartialsOp::create(rewriter, loc, fusedPartials,
                                           makeVector(), kind, axis)
                      .getResult();
    if (shift) {
      // sum exp(f - g) = exp(logsumexp(f) - g), per row.
      SmallVector<Value> inputs = {total};
      SmallVector<AffineMap> maps = {
          AffineMap::getMultiDimIdentityMap(1, ctx)};
      for (BlockArgument arg : rowArgs) {
        OpOperand *operand = op.getDpsInputOperand(arg.getArgNumber());
        inputs.push_back(materializeEpilogueInput(
            rewriter, loc, operand->get(), op.getMatchingIndexingMap(operand),
            rows ? AccessForm::row : AccessForm::col));
        maps.push_back(AffineMap::getMultiDimIdentityMap(1, ctx));
      }
      maps.push_back(AffineMap::getMultiDimIdentityMap(1, ctx));
      Value init = makeVector();
      total = linalg::GenericOp::create(
                  rewriter, loc, TypeRange{init.getType()}, inputs,
                  ValueRange{init}, maps, {utils::IteratorType::parallel},
                  [&](OpBuilder &b, Location nloc, ValueRange args) {
                    IRMapping inner;
                    for (auto [i, arg] : llvm::enumerate(rowArgs))
                      inner.map(arg, args[1 + i]);
                    for (Operation &inner_op : body.without_terminator())
                      if (readsOnly(inner_op.getResult(0), body, rowArgs))
                        b.clone(inner_op, inner);
                    Value difference = arith::SubFOp::create(
                        b, nloc, args[0], inner.lookupOrDefault(shift));
                    linalg::YieldOp::create(
                        b, nloc, math::ExpOp::create(b, nloc, difference)
                                     .getResult());
                  })
                  .getResult(0);
    }
    if (keepDim) {
      SmallVector<OpFoldResult> shape(2, rewriter.getIndexAttr(1));
      shape[kept] = tensor::getMixedSize(rewriter, loc, total, 0);
      total = tensor::ExpandShapeOp::create(
          rewriter, loc, resultType, total,
          SmallVector<ReassociationIndices>{{0, 1}}, shape);
    }
    rewriter.replaceOp(op, total);
    return success();
  }

  ReductionAxis axis;
  int64_t tile;
};

struct CodaFuseReductionsPass
    : coda::impl::CodaFuseReductionsBase<CodaFuseReductionsPass> {
  using CodaFuseReductionsBase::CodaFuseReductionsBase;

  void runOnOperation() override {
    if (tile <= 0) {
      getOperation()->emitError("coda-fuse-reductions: tile must be "
                                "positive, got ")
          << static_cast<int64_t>(tile);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    populateFuseReductionsPatterns(patterns, tile);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateFuseReductionsPatterns(RewritePatternSet &patterns,
                                                   int64_t tile) {
  patterns.add<FuseReduction>(patterns.getContext(), ReductionAxis::row, tile);
  patterns.add<FuseReduction>(patterns.getContext(), ReductionAxis::col, tile);
}
