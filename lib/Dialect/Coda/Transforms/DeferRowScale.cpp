//===- DeferRowScale.cpp - the RMSNorm reparameterization -----------------===//
//
// y[m, k] = x[m, k] * R[m] * G[k] feeding a GEMM becomes
// diag(R) (x (diag(G) W)): the GEMM reads x, scales its accumulator by R[m]
// and uses the weight diag(G) W.
//
//===----------------------------------------------------------------------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODADEFERROWSCALE
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// One factor of a product: `value`, or its reciprocal.
struct Factor {
  Value value;
  bool reciprocal;
};

/// Splits `value` into the factors of its tree of mulf and divf, looking
/// through rounding casts between them.
void collectFactors(Value value, bool reciprocal,
                    SmallVectorImpl<Factor> &factors) {
  if (isa_and_nonnull<arith::TruncFOp, arith::ExtFOp>(value.getDefiningOp()))
    return collectFactors(value.getDefiningOp()->getOperand(0), reciprocal,
                          factors);
  if (auto mul = value.getDefiningOp<arith::MulFOp>()) {
    collectFactors(mul.getLhs(), reciprocal, factors);
    collectFactors(mul.getRhs(), reciprocal, factors);
    return;
  }
  if (auto div = value.getDefiningOp<arith::DivFOp>()) {
    collectFactors(div.getLhs(), reciprocal, factors);
    collectFactors(div.getRhs(), !reciprocal, factors);
    return;
  }
  factors.push_back({value, reciprocal});
}

/// Strips rounding casts around a value.
Value stripCasts(Value value) {
  while (true) {
    if (auto trunc = value.getDefiningOp<arith::TruncFOp>())
      value = trunc.getIn();
    else if (auto ext = value.getDefiningOp<arith::ExtFOp>())
      value = ext.getIn();
    else
      return value;
  }
}

/// Emits the product of `factors` in f32 from a clone of their computation
/// (`mapping` gives the cloned block's arguments).
Value emitProduct(OpBuilder &b, Location loc, ArrayRef<Factor> factors,
                  Block &source, IRMapping &mapping) {
  Type f32 = b.getF32Type();
  // Clone, in order, every op of the source body that a factor needs.
  DenseSet<Operation *> needed;
  SmallVector<Value> worklist;
  for (const Factor &factor : factors)
    worklist.push_back(factor.value);
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (def && needed.insert(def).second)
      llvm::append_range(worklist, def->getOperands());
  }
  for (Operation &op : source.without_terminator())
    if (needed.contains(&op))
      b.clone(op, mapping);
  Value product = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
  for (const Factor &factor : factors) {
    Value value = mapping.lookupOrDefault(factor.value);
    if (value.getType() != f32)
      value = arith::ExtFOp::create(b, loc, f32, value);
    product = factor.reciprocal
                  ? arith::DivFOp::create(b, loc, product, value).getResult()
                  : arith::MulFOp::create(b, loc, product, value).getResult();
  }
  return product;
}

struct DeferRowScale : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp gemm,
                                PatternRewriter &rewriter) const override {
    auto scale = gemm.getLhs().getDefiningOp<linalg::GenericOp>();
    // Every reader of the scaled lhs must be a GEMM taking it as lhs: each of
    // them gets the scale deferred, and the scaled copy disappears.
    auto readsAsLhs = [&](Operation *user) {
      auto consumer = dyn_cast<GemmOp>(user);
      return consumer && consumer.getLhs() == gemm.getLhs() &&
             consumer.getRhs() != gemm.getLhs() &&
             llvm::count(consumer.getEpilogueInputs(), gemm.getLhs()) == 0;
    };
    if (!scale || gemm.isBatched() || gemm.getRhsType().getRank() != 2 ||
        !llvm::all_of(scale->getUsers(), readsAsLhs) ||
        !scale.hasPureTensorSemantics() ||
        !isElementwise(scale) || scale.getNumLoops() != 2 ||
        scale.getNumDpsInits() != 1)
      return rewriter.notifyMatchFailure(gemm, "lhs is not elementwise");
    if (!hasOnlyEpilogueComputeOps(*scale.getBlock(), /*allowIndex=*/false))
      return rewriter.notifyMatchFailure(gemm, "lhs body is not scalar math");

    // Classify the scaling op's operands.
    Block &body = *scale.getBlock();
    SmallVector<std::optional<AccessForm>> forms;
    for (OpOperand *input : scale.getDpsInputOperands()) {
      auto type = cast<RankedTensorType>(input->get().getType());
      forms.push_back(
          classifyAccess(scale.getMatchingIndexingMap(input), type, 2));
      if (!forms.back())
        return rewriter.notifyMatchFailure(gemm, "lhs operand access");
    }

    // y = x * (row factors) * (col factors), up to casts.
    SmallVector<Factor> factors;
    collectFactors(stripCasts(body.getTerminator()->getOperand(0)), false,
                   factors);
    std::optional<unsigned> xInput;
    SmallVector<Factor> rowFactors, colFactors;
    for (const Factor &factor : factors) {
      auto deps = readBlockArguments(factor.value, body);
      if (!deps)
        return rewriter.notifyMatchFailure(gemm, "factor reads positions");
      bool row = true, col = true, tile = false;
      for (BlockArgument arg : *deps) {
        AccessForm form = *forms[arg.getArgNumber()];
        row &= form == AccessForm::row || form == AccessForm::scalar;
        col &= form == AccessForm::col || form == AccessForm::scalar;
        tile |= form == AccessForm::tile;
      }
      if (tile) {
        BlockArgument arg = dyn_cast<BlockArgument>(stripCasts(factor.value));
        if (xInput || factor.reciprocal || !arg || deps->size() != 1)
          return rewriter.notifyMatchFailure(gemm, "x is not a plain factor");
        xInput = arg.getArgNumber();
      } else if (row) {
        rowFactors.push_back(factor);
      } else if (col) {
        colFactors.push_back(factor);
      } else {
        return rewriter.notifyMatchFailure(gemm, "factor mixes rows and cols");
      }
    }
    if (!xInput || (rowFactors.empty() && colFactors.empty()))
      return rewriter.notifyMatchFailure(gemm, "no row or column scaling");
    Value x = scale.getDpsInputs()[*xInput];
    auto xType = cast<RankedTensorType>(x.getType());
    if (xType.getElementType() != gemm.getRhsType().getElementType())
      return rewriter.notifyMatchFailure(gemm, "x and weight types differ");
    if (!isAvailableBefore(x, gemm) || !gemm.getRhsType().hasStaticShape())
      return rewriter.notifyMatchFailure(gemm, "x not available or weight "
                                               "not static");

    Location loc = gemm.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Type f32 = rewriter.getF32Type();
    rewriter.setInsertionPoint(gemm);

    // The operands of the scaling op that one group of factors reads:
    // vectors (read with `readMap`) become operands of the op computing the
    // group, scalars are captured by its body.
    struct FactorOperands {
      SmallVector<Value> tensors;
      SmallVector<AffineMap> maps;
      SmallVector<BlockArgument> tensorArgs;
      IRMapping captured;

      /// Maps the scaling body's arguments to `blockArgs[first...]`.
      IRMapping bind(ValueRange blockArgs, unsigned first) const {
        IRMapping mapping = captured;
        for (auto [i, arg] : llvm::enumerate(tensorArgs))
          mapping.map(arg, blockArgs[first + i]);
        return mapping;
      }
    };
    auto operandsFor = [&](AccessForm wanted, AffineMap readMap) {
      FactorOperands operands;
      for (OpOperand *input : scale.getDpsInputOperands()) {
        AccessForm form = *forms[input->getOperandNumber()];
        if (form != wanted && form != AccessForm::scalar)
          continue;
        Value value = materializeEpilogueInput(
            rewriter, loc, input->get(), scale.getMatchingIndexingMap(input),
            form);
        BlockArgument arg = body.getArgument(input->getOperandNumber());
        if (form == AccessForm::scalar) {
          operands.captured.map(arg, value);
          continue;
        }
        operands.tensors.push_back(value);
        operands.maps.push_back(readMap);
        operands.tensorArgs.push_back(arg);
      }
      return operands;
    };

    // R[m]: the row factors, evaluated once per row.
    Value rowScale;
    {
      AffineMap rowMap = AffineMap::getMultiDimIdentityMap(1, ctx);
      FactorOperands operands = operandsFor(AccessForm::row, rowMap);
      SmallVector<AffineMap> maps = operands.maps;
      maps.push_back(rowMap);
      Value init = createEmptyWithRows(rewriter, loc, x, {}, f32);
      auto generic = linalg::GenericOp::create(
          rewriter, loc, TypeRange{init.getType()}, operands.tensors,
          ValueRange{init}, maps, {utils::IteratorType::parallel},
          [&](OpBuilder &b, Location nloc, ValueRange blockArgs) {
            IRMapping mapping = operands.bind(blockArgs, 0);
            linalg::YieldOp::create(
                b, nloc, emitProduct(b, nloc, rowFactors, body, mapping));
          });
      rowScale = generic.getResult(0);
    }

    // diag(G) W: the column factors folded into the weight.
    Value weight = gemm.getRhs();
    if (!colFactors.empty()) {
      auto weightType = cast<RankedTensorType>(weight.getType());
      bool transposed = gemm.getTransposeB();
      unsigned kDim = transposed ? 1 : 0;
      AffineMap identity = AffineMap::getMultiDimIdentityMap(2, ctx);
      AffineMap colMap =
          AffineMap::get(2, 0, {getAffineDimExpr(kDim, ctx)}, ctx);
      FactorOperands operands = operandsFor(AccessForm::col, colMap);
      SmallVector<Value> tensors = {weight};
      llvm::append_range(tensors, operands.tensors);
      SmallVector<AffineMap> maps = {identity};
      llvm::append_range(maps, operands.maps);
      maps.push_back(identity);
      Value init = tensor::EmptyOp::create(rewriter, loc, weightType.getShape(),
                                           weightType.getElementType());
      auto generic = linalg::GenericOp::create(
          rewriter, loc, TypeRange{weightType}, tensors, ValueRange{init},
          maps,
          {utils::IteratorType::parallel, utils::IteratorType::parallel},
          [&](OpBuilder &b, Location nloc, ValueRange blockArgs) {
            IRMapping mapping = operands.bind(blockArgs, 1);
            Value g = emitProduct(b, nloc, colFactors, body, mapping);
            Value w = blockArgs[0];
            Type wType = w.getType();
            if (wType != f32)
              w = arith::ExtFOp::create(b, nloc, f32, w);
            Value scaled = arith::MulFOp::create(b, nloc, w, g);
            if (wType != f32)
              scaled = arith::TruncFOp::create(b, nloc, wType, scaled);
            linalg::YieldOp::create(b, nloc, scaled);
          });
      generic->setAttr("coda.weight_transform", rewriter.getUnitAttr());
      weight = generic.getResult(0);
    }

    YieldOp oldYield = gemm.getYieldOp();
    GemmOp rebuilt = rebuildGemm(
        rewriter, gemm, x, weight, gemm.getTransposeB(),
        {{rowScale, AccessForm::row}}, gemm.getOutputs(),
        [&](OpBuilder &, IRMapping &mapping, ValueRange) {
          SmallVector<Value> yields;
          for (Value value : oldYield.getValues())
            yields.push_back(mapping.lookupOrDefault(value));
          return yields;
        },
        [&](OpBuilder &b, Value acc, ValueRange added) -> Value {
          return arith::MulFOp::create(b, loc, acc, added[0]);
        });
    rewriter.replaceOp(gemm, rebuilt->getResults());
    if (scale->use_empty())
      rewriter.eraseOp(scale);
    return success();
  }
};

struct CodaDeferRowScalePass
    : coda::impl::CodaDeferRowScaleBase<CodaDeferRowScalePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDeferRowScalePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateDeferRowScalePatterns(RewritePatternSet &patterns) {
  patterns.add<DeferRowScale>(patterns.getContext());
}
