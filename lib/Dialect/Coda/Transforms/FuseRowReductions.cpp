//===- FuseRowReductions.cpp - row reductions of a GEMM into partials -----===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSEROWREDUCTIONS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// True when `value` (in `block`) reads no block argument but those in
/// `allowed` (constants are fine).
bool readsOnly(Value value, Block &block, ArrayRef<BlockArgument> allowed) {
  SmallVector<Value> worklist = {value};
  DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value current = worklist.pop_back_val();
    if (!seen.insert(current).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(current)) {
      if (arg.getOwner() == &block && !llvm::is_contained(allowed, arg))
        return false;
      continue;
    }
    llvm::append_range(worklist, current.getDefiningOp()->getOperands());
  }
  return true;
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

/// Row reductions `[m, n] -> [m]` (or keepdim `[m, 0]`) over a 2-D GEMM's
/// tile output, in three forms:
///   sum:       out + f(C)               from 0
///   max:       max(out, f(C))           from -inf
///   exp-sum:   out + exp(f(C) - g(row)) from 0   (a softmax denominator)
/// All become a coda.row_reduce of f in the GEMM's epilogue and a finish; the
/// exp-sum one is a log-sum-exp of f, finished as exp(lse - g).
struct FuseRowReduction : OpRewritePattern<linalg::GenericOp> {
  FuseRowReduction(MLIRContext *ctx, int64_t tile)
      : OpRewritePattern(ctx), tile(tile) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
        op.getNumLoops() != 2 || op.getNumReductionLoops() != 1 ||
        op.getIteratorTypesArray()[1] != utils::IteratorType::reduction)
      return rewriter.notifyMatchFailure(op, "not a row reduction");
    AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
    AffineMap rowMap = AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
    // keepdim form: [m, n] -> [m, 0] into an M x 1 result.
    AffineMap keepDimMap = AffineMap::get(
        2, 0, {getAffineDimExpr(0, ctx), getAffineConstantExpr(0, ctx)}, ctx);
    OpOperand *initOperand = op.getDpsInitOperand(0);
    AffineMap initMap = op.getMatchingIndexingMap(initOperand);
    bool keepDim = initMap == keepDimMap;
    if (initMap != rowMap && !keepDim)
      return rewriter.notifyMatchFailure(op, "not [m, n] -> [m]");
    Block &body = *op.getBlock();
    if (!hasOnlyEpilogueComputeOps(body, /*allowIndex=*/false))
      return rewriter.notifyMatchFailure(op, "body is not scalar math");

    // The reduced tensor: one GEMM tile output read elementwise; the other
    // inputs are read per row.
    std::optional<unsigned> sourceIndex;
    SmallVector<BlockArgument> rowArgs;
    for (OpOperand *input : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(input);
      if (map == identity && !sourceIndex) {
        sourceIndex = input->getOperandNumber();
      } else if (map == rowMap || map == keepDimMap) {
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
    Value reduced = term, shift;
    if (isa<arith::AddFOp>(combine) && start->isZero()) {
      auto exp = term.getDefiningOp<math::ExpOp>();
      auto sub = exp ? exp.getOperand().getDefiningOp<arith::SubFOp>()
                     : arith::SubFOp();
      if (sub && !rowArgs.empty() && readsOnly(sub.getLhs(), body, {in}) &&
          readsOnly(sub.getRhs(), body, rowArgs)) {
        kind = ReductionKind::logsumexp;
        reduced = sub.getLhs();
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
    if (!readsOnly(reduced, body, {in}))
      return rewriter.notifyMatchFailure(op, "reduced value reads more than C");

    auto sourceType = cast<RankedTensorType>(source.getType());
    auto resultType = cast<RankedTensorType>(op.getDpsInits()[0].getType());
    auto elementType = dyn_cast<FloatType>(resultType.getElementType());
    if (ShapedType::isDynamic(sourceType.getDimSize(1)) || !elementType ||
        reduced.getType() != elementType)
      return rewriter.notifyMatchFailure(op, "dynamic N, or types");

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(producer);
    int64_t cols = sourceType.getDimSize(1);
    Value partials = createEmptyWithRows(
        rewriter, loc, producer.getLhs(),
        {static_cast<int64_t>(llvm::divideCeil(cols, tile))}, elementType);
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
            if (readsOnly(inner_op.getResult(0), body, {in}))
              b.clone(inner_op, inner);
          yields.push_back(RowReduceOp::create(
              b, loc, inner.lookupOrDefault(reduced), kind, tile));
          return yields;
        });
    rewriter.replaceOp(producer, fused->getResults().drop_back());

    rewriter.setInsertionPoint(op);
    Value fusedPartials = fused->getResults().back();
    Value finishInit =
        createEmptyWithRows(rewriter, loc, fusedPartials, {}, elementType);
    Value total = ReducePartialsOp::create(rewriter, loc,
                                           fused->getResults().back(),
                                           finishInit, kind,
                                           ReductionAxis::row)
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
            AccessForm::row));
        maps.push_back(AffineMap::getMultiDimIdentityMap(1, ctx));
      }
      maps.push_back(AffineMap::getMultiDimIdentityMap(1, ctx));
      Value init =
          createEmptyWithRows(rewriter, loc, fusedPartials, {}, elementType);
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
      SmallVector<OpFoldResult> shape = {
          tensor::getMixedSize(rewriter, loc, total, 0),
          rewriter.getIndexAttr(1)};
      total = tensor::ExpandShapeOp::create(
          rewriter, loc, resultType, total,
          SmallVector<ReassociationIndices>{{0, 1}}, shape);
    }
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
  patterns.add<FuseRowReduction>(patterns.getContext(), tile);
}
