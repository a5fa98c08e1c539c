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

/// What matchReduction found in a reduction that can join a GEMM's epilogue.
struct ReductionMatch {
  bool rows, keepDim;
  unsigned kept;
  /// The body's arguments: the reduced GEMM output's element, the other
  /// full-size operands (tile inputs), the per-kept-index operands, and all
  /// those the reduced value may read.
  BlockArgument in;
  SmallVector<BlockArgument> tileArgs, rowArgs, elementArgs;
  SmallVector<EpilogueInput> tileInputs;
  TileOutput source;
  ReductionKind kind;
  /// The reduced value f (and g, for an exp-sum) in the body.
  Value reducedValue, shift;
  FloatType elementType;
  int64_t cols;
};

/// Reductions of a 2-D GEMM's tile output along its rows (`[m, n] -> [m]`,
/// or keepdim `[m, 0]`) or its columns (`[m, n] -> [n]`, keepdim `[0, n]`),
/// in three forms:
///   sum:       out + f(C)                  from 0
///   max:       max(out, f(C))              from -inf
///   exp-sum:   out + exp(f(C) - g(vector)) from 0  (a softmax denominator)
/// Fills `match`, or says, in words for the fusion report, why `op` is not
/// one.
std::optional<std::string> matchReduction(linalg::GenericOp op,
                                          ReductionAxis axis,
                                          ReductionMatch &match) {
  MLIRContext *ctx = op.getContext();
  bool rows = axis == ReductionAxis::row;
  // Rows reduce over n (loop 1) and keep m (loop 0); columns the reverse.
  unsigned reduced = rows ? 1 : 0, kept = 1 - reduced;
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 2 || op.getNumReductionLoops() != 1 ||
      op.getIteratorTypesArray()[reduced] != utils::IteratorType::reduction)
    return std::string("it is not a reduction of a matrix along its ") +
           (rows ? "rows" : "columns");
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
  if (initMap != vectorMap && !keepDim) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "its result is written through " << initMap
       << ", not one value per " << (rows ? "row" : "column");
    return text;
  }
  Block &body = *op.getBlock();
  if (!hasOnlyEpilogueComputeOps(body, /*allowIndex=*/false))
    return std::string("its body has ops an epilogue does not run");

  // The reduced tensor: one GEMM tile output read elementwise; the other
  // inputs are read per kept index (one value per row, or per column).
  std::optional<unsigned> sourceIndex;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (map == identity && !sourceIndex && getTileOutput(input->get())) {
      sourceIndex = input->getOperandNumber();
    } else if (map == identity) {
      // Another full-size operand: a tile input of the epilogue.
      match.tileArgs.push_back(body.getArgument(input->getOperandNumber()));
    } else if (map == vectorMap || map == keepDimMap) {
      match.rowArgs.push_back(body.getArgument(input->getOperandNumber()));
    } else {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "its operand #" << input->getOperandNumber() << " is read through "
         << map << ", neither elementwise nor once per "
         << (rows ? "row" : "column");
      return text;
    }
  }
  if (!sourceIndex)
    return std::string("it reads no GEMM result elementwise (identity map)");
  std::optional<TileOutput> source =
      getTileOutput(op.getDpsInputs()[*sourceIndex]);
  if (source->gemm.isBatched())
    return std::string("it reduces a batched GEMM's result");
  for (BlockArgument arg : match.tileArgs) {
    Value value = op.getDpsInputs()[arg.getArgNumber()];
    if (!isAvailableBefore(value, source->gemm))
      return "its operand #" + std::to_string(arg.getArgNumber()) +
             " is computed after the GEMM";
    match.tileInputs.push_back({value, AccessForm::tile});
  }
  match.elementArgs = match.tileArgs;

  // Which reduction is it?
  BlockArgument in = body.getArgument(*sourceIndex);
  BlockArgument out = body.getArgument(initOperand->getOperandNumber());
  Operation *combine = body.getTerminator()->getOperand(0).getDefiningOp();
  if (!combine || combine->getNumOperands() != 2 ||
      (combine->getOperand(0) != out && combine->getOperand(1) != out))
    return std::string("its body does not accumulate into its result");
  Value term = combine->getOperand(0) == out ? combine->getOperand(1)
                                             : combine->getOperand(0);
  std::optional<APFloat> start = getFillConstant(op.getDpsInits()[0]);
  if (!start)
    return std::string("its result does not start from a constant fill");
  Value reducedValue = term, shift;
  if (isa<arith::AddFOp>(combine) && start->isZero()) {
    auto exp = term.getDefiningOp<math::ExpOp>();
    auto sub = exp ? exp.getOperand().getDefiningOp<arith::SubFOp>()
                   : arith::SubFOp();
    match.elementArgs.push_back(in);
    if (sub && !match.rowArgs.empty() &&
        readsOnly(sub.getLhs(), body, match.elementArgs) &&
        readsOnly(sub.getRhs(), body, match.rowArgs)) {
      match.kind = ReductionKind::logsumexp;
      reducedValue = sub.getLhs();
      shift = sub.getRhs();
    } else {
      match.kind = ReductionKind::sum;
    }
  } else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(combine) &&
             start->isInfinity() && start->isNegative()) {
    match.kind = ReductionKind::max;
  } else {
    return "it combines with " + combine->getName().getStringRef().str() +
           " from its start value: not a sum from 0, a max from -inf or an "
           "exp-sum from 0";
  }
  if (!llvm::is_contained(match.elementArgs, in))
    match.elementArgs.push_back(in);
  if (!readsOnly(reducedValue, body, match.elementArgs))
    return std::string("the value it reduces reads a per-") +
           (rows ? "row" : "column") + " operand outside an exp-sum's shift";

  auto sourceType = cast<RankedTensorType>(source->result.getType());
  auto resultType = cast<RankedTensorType>(op.getDpsInits()[0].getType());
  auto elementType = dyn_cast<FloatType>(resultType.getElementType());
  int64_t cols = sourceType.getDimSize(1);
  if (ShapedType::isDynamic(cols))
    return std::string("the GEMM's N is dynamic (the partials' tile count "
                       "is static)");
  if (!elementType || reducedValue.getType() != elementType)
    return std::string("the value it reduces is not of its result's type");
  match.rows = rows;
  match.keepDim = keepDim;
  match.kept = kept;
  match.in = in;
  match.source = *source;
  match.reducedValue = reducedValue;
  match.shift = shift;
  match.elementType = elementType;
  match.cols = cols;
  return std::nullopt;
}

/// A reduction matchReduction accepts becomes a coda.row_reduce /
/// coda.col_reduce of f in the GEMM's epilogue and a finish; the exp-sum one
/// is a log-sum-exp of f, finished as exp(lse - g).
struct FuseReduction : OpRewritePattern<linalg::GenericOp> {
  FuseReduction(MLIRContext *ctx, ReductionAxis axis, int64_t tile)
      : OpRewritePattern(ctx), axis(axis), tile(tile) {}

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    ReductionMatch match;
    if (std::optional<std::string> why = matchReduction(op, axis, match))
      return rewriter.notifyMatchFailure(op, *why);
    MLIRContext *ctx = op.getContext();
    bool rows = match.rows;
    unsigned kept = match.kept;
    Block &body = *op.getBlock();
    BlockArgument in = match.in;
    ArrayRef<BlockArgument> tileArgs = match.tileArgs, rowArgs = match.rowArgs,
                            elementArgs = match.elementArgs;
    GemmOp producer = match.source.gemm;
    Value yielded = match.source.yielded;
    ReductionKind kind = match.kind;
    Value reducedValue = match.reducedValue, shift = match.shift;
    FloatType elementType = match.elementType;
    int64_t cols = match.cols;
    auto sourceType = cast<RankedTensorType>(match.source.result.getType());
    auto resultType = cast<RankedTensorType>(op.getDpsInits()[0].getType());
    SmallVector<EpilogueInput> tileInputs = match.tileInputs;
    bool keepDim = match.keepDim;

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

std::optional<std::string>
mlir::coda::whyNotFusedReduction(linalg::GenericOp op) {
  if (op.getNumLoops() != 2 || op.getNumReductionLoops() != 1)
    return std::nullopt;
  ReductionAxis axis =
      op.getIteratorTypesArray()[1] == utils::IteratorType::reduction
          ? ReductionAxis::row
          : ReductionAxis::col;
  ReductionMatch match;
  return matchReduction(op, axis, match);
}

void mlir::coda::populateFuseReductionsPatterns(RewritePatternSet &patterns,
                                                   int64_t tile) {
  patterns.add<FuseReduction>(patterns.getContext(), ReductionAxis::row, tile);
  patterns.add<FuseReduction>(patterns.getContext(), ReductionAxis::col, tile);
}
