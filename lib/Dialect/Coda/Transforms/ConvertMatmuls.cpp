//===- ConvertMatmuls.cpp - linalg contractions to coda.gemm --------------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODACONVERTMATMULS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The operand of `value` through an optional arith.extf, if it is `arg`.
bool isMaybeExtended(Value value, BlockArgument arg) {
  if (auto ext = value.getDefiningOp<arith::ExtFOp>())
    value = ext.getIn();
  return value == arg;
}

/// Matches `yield(out + a * b)` (with optional extf of a and b) in floats.
bool isMultiplyAccumulateBody(Block &body) {
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1 || body.getNumArguments() != 3)
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value out = body.getArgument(2);
  Value product = add.getLhs() == out ? add.getRhs() : add.getLhs();
  if (add.getLhs() != out && add.getRhs() != out)
    return false;
  auto mul = product.getDefiningOp<arith::MulFOp>();
  if (!mul)
    return false;
  BlockArgument a = body.getArgument(0), b = body.getArgument(1);
  return (isMaybeExtended(mul.getLhs(), a) && isMaybeExtended(mul.getRhs(), b)) ||
         (isMaybeExtended(mul.getLhs(), b) && isMaybeExtended(mul.getRhs(), a));
}

/// True when `value` is a linalg.fill of the constant 0.
bool isZeroFill(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  auto constant = fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  auto attr = constant ? dyn_cast<FloatAttr>(constant.getValue()) : nullptr;
  return attr && attr.getValue().isZero();
}

/// Why `op` is not a tensor product over [b,] m, n, k loops (k innermost)
/// with a multiply-add body, or nothing when it is one.
std::optional<StringRef> whyNotProductLoops(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1)
    return StringRef("not a two-input tensor op");
  unsigned numLoops = op.getNumLoops();
  if ((numLoops != 3 && numLoops != 4) || op.getNumReductionLoops() != 1 ||
      op.getIteratorTypesArray().back() != utils::IteratorType::reduction)
    return StringRef("not [b,] m, n, k loops");
  if (!isMultiplyAccumulateBody(*op.getBlock()))
    return StringRef("body is not a multiply-add");
  return std::nullopt;
}

struct ConvertContraction : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (std::optional<StringRef> why = whyNotProductLoops(op))
      return rewriter.notifyMatchFailure(op, *why);

    MLIRContext *ctx = op.getContext();
    unsigned numLoops = op.getNumLoops();
    bool batched = numLoops == 4;
    unsigned d = batched ? 1 : 0;
    AffineExpr b = getAffineDimExpr(0, ctx),
               k = getAffineDimExpr(numLoops - 1, ctx);
    auto makeMap = [&](ArrayRef<AffineExpr> exprs, bool withBatch) {
      SmallVector<AffineExpr> all;
      if (withBatch)
        all.push_back(b);
      all.append(exprs.begin(), exprs.end());
      return AffineMap::get(numLoops, 0, all, ctx);
    };
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    // The result's rows are m and its columns n, in either loop order: a
    // result written transposed, C^T = B^T A^T, is the product of the
    // swapped operands.
    AffineMap resultMap = maps[2];
    if (resultMap.getNumResults() != d + 2 ||
        !resultMap.isProjectedPermutation() ||
        llvm::is_contained(resultMap.getResults(), k) ||
        (batched && resultMap.getResult(0) != b))
      return rewriter.notifyMatchFailure(op, "result map");
    AffineExpr m = resultMap.getResult(d), n = resultMap.getResult(d + 1);
    // Operands may come in either order; the one read at (m, k), or at
    // (k, m) (transpose_a: a weight gradient's X^T), is lhs.
    std::optional<unsigned> lhsIndex;
    bool transposeA = false;
    for (unsigned i = 0; i < 2 && !lhsIndex; ++i) {
      if (maps[i] == makeMap({m, k}, batched))
        lhsIndex = i;
      else if (maps[i] == makeMap({k, m}, batched))
        lhsIndex = i, transposeA = true;
    }
    if (!lhsIndex)
      return rewriter.notifyMatchFailure(op, "lhs map");
    AffineMap rhsMap = maps[1 - *lhsIndex];
    bool transposeB, sharedRhs = false;
    if (rhsMap == makeMap({k, n}, batched) || rhsMap == makeMap({k, n}, false))
      transposeB = false;
    else if (rhsMap == makeMap({n, k}, batched) ||
             rhsMap == makeMap({n, k}, false))
      transposeB = true;
    else
      return rewriter.notifyMatchFailure(op, "rhs map");
    sharedRhs = batched && (rhsMap == makeMap({k, n}, false) ||
                            rhsMap == makeMap({n, k}, false));

    Value lhs = op.getDpsInputs()[*lhsIndex],
          rhs = op.getDpsInputs()[1 - *lhsIndex];
    Type elementType = cast<ShapedType>(lhs.getType()).getElementType();
    if (elementType != cast<ShapedType>(rhs.getType()).getElementType() ||
        !isa<Float32Type, Float16Type, BFloat16Type, Float8E4M3FNType,
             Float8E5M2Type>(elementType))
      return rewriter.notifyMatchFailure(op, "unsupported operand types");
    Value init = op.getDpsInits()[0];
    auto resultType = cast<RankedTensorType>(init.getType());
    Type outElement = resultType.getElementType();
    if (!isa<FloatType>(outElement))
      return rewriter.notifyMatchFailure(op, "non-float result");

    // A zero-filled destination only provides the shape; anything else is
    // accumulated into, i.e. read as a tile input.
    bool accumulates = !isZeroFill(init);
    Value destination = init;
    if (!accumulates)
      destination = init.getDefiningOp<linalg::FillOp>().getOutputs()[0];
    SmallVector<Value> inputs;
    SmallVector<Attribute> forms;
    if (accumulates) {
      inputs.push_back(init);
      forms.push_back(AccessFormAttr::get(ctx, AccessForm::tile));
    }

    Location loc = op.getLoc();
    // A batch that shares its rhs (a linear layer applied to [B, M, K]
    // activations) is one GEMM over B * M rows: the batch is folded into M
    // (a reshape of contiguous rows) and unfolded from the result, whose
    // reshape --coda-convert-matmuls then moves past its elementwise
    // consumers. A transposed lhs (K x M per batch) keeps the batch.
    bool foldBatch = sharedRhs && !transposeA;
    SmallVector<ReassociationIndices> batchIntoRows = {{0, 1}, {2}};
    auto foldRows = [&](Value value) -> Value {
      return tensor::CollapseShapeOp::create(rewriter, loc, value,
                                             batchIntoRows);
    };
    RankedTensorType gemmType = resultType;
    if (foldBatch) {
      lhs = foldRows(lhs);
      // Accumulating, the destination is the one tile input.
      destination = foldRows(destination);
      if (accumulates)
        inputs.front() = destination;
      gemmType = cast<RankedTensorType>(destination.getType());
    }
    auto gemm =
        GemmOp::create(rewriter, loc, TypeRange{gemmType}, lhs, rhs, inputs,
                       ValueRange{destination}, ArrayAttr::get(ctx, forms),
                       transposeB ? rewriter.getUnitAttr() : UnitAttr(),
                       transposeA ? rewriter.getUnitAttr() : UnitAttr());
    SmallVector<Type> argTypes = {rewriter.getF32Type()};
    SmallVector<Location> argLocs = {loc};
    if (accumulates) {
      argTypes.push_back(outElement);
      argLocs.push_back(loc);
    }
    OpBuilder::InsertionGuard guard(rewriter);
    Block *body =
        rewriter.createBlock(&gemm.getEpilogue(), {}, argTypes, argLocs);
    Value value = body->getArgument(0);
    auto f32 = rewriter.getF32Type();
    if (accumulates) {
      Value addend = body->getArgument(1);
      if (addend.getType() != f32)
        addend = arith::ExtFOp::create(rewriter, loc, f32, addend);
      value = arith::AddFOp::create(rewriter, loc, value, addend);
    }
    if (outElement != f32)
      value = arith::TruncFOp::create(rewriter, loc, outElement, value);
    YieldOp::create(rewriter, loc, value);
    rewriter.setInsertionPointAfter(gemm);
    Value result = gemm.getResult(0);
    if (foldBatch)
      result = tensor::ExpandShapeOp::create(
          rewriter, loc, resultType, result, batchIntoRows,
          tensor::getMixedSizes(rewriter, loc, init));
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// `map` with its last two results swapped.
AffineMap swapLastTwo(AffineMap map) {
  SmallVector<AffineExpr> results(map.getResults());
  std::swap(results[results.size() - 2], results.back());
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(), results,
                        map.getContext());
}

/// True for a generic that copies its one input unchanged to an output of
/// the same type, reading and writing each element at the same place.
bool isPlainCopy(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getDpsInputs()[0].getType() != op.getResult(0).getType())
    return false;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  return maps[0] == maps[1] && maps[0].isPermutation() &&
         op.getBlock()->getTerminator()->getOperand(0) ==
             op.getBlock()->getArgument(0);
}

/// A product that every reader reads transposed (its last two dimensions
/// swapped: a `linalg.transpose` after a matmul, as frontends lower
/// `x.t()` or `transpose(-1, -2)`, or such a transpose already merged into
/// an elementwise op) computes the transposed result instead, which its
/// readers read in loop order: it then becomes the GEMM of the swapped
/// operands (C^T = B^T A^T), whose elementwise readers can join its
/// epilogue. A reader that is left a plain copy is the product itself.
struct ComputeTransposedProduct : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (std::optional<StringRef> why = whyNotProductLoops(op))
      return rewriter.notifyMatchFailure(op, *why);
    Value init = op.getDpsInits()[0];
    if (!isZeroFill(init))
      return rewriter.notifyMatchFailure(op, "accumulates into a tensor");
    // A batch of products sharing an operand is one GEMM over the folded
    // batch's rows; transposed, its rows would be the shared operand's.
    if (op.getNumLoops() == 4 &&
        llvm::any_of(op.getDpsInputOperands(), [&](OpOperand *operand) {
          return op.getMatchingIndexingMap(operand).getNumResults() != 3;
        }))
      return rewriter.notifyMatchFailure(op, "a batch sharing an operand");
    Value result = op.getResult(0);
    SmallVector<OpOperand *> reads;
    for (OpOperand &use : result.getUses()) {
      auto reader = dyn_cast<linalg::GenericOp>(use.getOwner());
      if (!reader || !reader.hasPureTensorSemantics() ||
          !reader.isDpsInput(&use) || reader.getNumReductionLoops() != 0)
        return rewriter.notifyMatchFailure(op, "a reader is not elementwise");
      AffineMap read = reader.getMatchingIndexingMap(&use);
      if (!read.isPermutation() ||
          llvm::any_of(reader.getDpsInitsMutable(), [&](OpOperand &out) {
            return reader.getMatchingIndexingMap(&out) != swapLastTwo(read);
          }))
        return rewriter.notifyMatchFailure(op, "a reader reads it in order");
      reads.push_back(&use);
    }
    if (reads.empty())
      return rewriter.notifyMatchFailure(op, "no readers");

    Location loc = op.getLoc();
    auto fill = init.getDefiningOp<linalg::FillOp>();
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(rewriter, loc, fill.getOutputs()[0]);
    std::swap(sizes[sizes.size() - 2], sizes.back());
    Value empty = tensor::EmptyOp::create(
        rewriter, loc, sizes, getElementTypeOrSelf(init.getType()));
    Value zero = linalg::FillOp::create(rewriter, loc, fill.getInputs()[0],
                                        empty)
                     .getResult(0);
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    maps[2] = swapLastTwo(maps[2]);
    auto transposed = linalg::GenericOp::create(
        rewriter, loc, zero.getType(), op.getDpsInputs(), ValueRange{zero},
        maps, op.getIteratorTypesArray());
    rewriter.cloneRegionBefore(op.getRegion(), transposed.getRegion(),
                               transposed.getRegion().end());
    llvm::SmallSetVector<Operation *, 4> readers;
    for (OpOperand *read : reads) {
      auto reader = cast<linalg::GenericOp>(read->getOwner());
      readers.insert(reader);
      SmallVector<AffineMap> readerMaps = reader.getIndexingMapsArray();
      unsigned index = read->getOperandNumber();
      readerMaps[index] = swapLastTwo(readerMaps[index]);
      rewriter.modifyOpInPlace(reader, [&] {
        reader.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(readerMaps));
        read->set(transposed.getResult(0));
      });
    }
    rewriter.eraseOp(op);
    for (Operation *reader : readers)
      if (isPlainCopy(cast<linalg::GenericOp>(reader)))
        rewriter.replaceOp(reader, reader->getOperand(0));
    return success();
  }
};

/// Generalizes named contractions (linalg.matmul, batch_matmul, their
/// transposed variants) so that one pattern matches them all.
struct GeneralizeContraction
    : OpInterfaceRewritePattern<linalg::ContractionOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::ContractionOpInterface op,
                                PatternRewriter &rewriter) const override {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op.getOperation());
    if (!linalgOp || isa<linalg::GenericOp>(op.getOperation()))
      return rewriter.notifyMatchFailure(op, "already generic");
    // Only products coda.gemm can take: float operands of a supported type.
    if (!llvm::all_of(linalgOp->getOperandTypes(), [](Type type) {
          Type element = getElementTypeOrSelf(type);
          return isa<Float32Type, Float16Type, BFloat16Type, Float8E4M3FNType,
                     Float8E5M2Type>(element);
        }))
      return rewriter.notifyMatchFailure(op, "not a floating-point product");
    if (failed(linalg::generalizeNamedOp(rewriter, linalgOp)))
      return failure();
    return success();
  }
};

/// Moves every tensor reshape, and the size computations and empty tensors
/// beside them, to just after the last definition of its operands. Moving a
/// GEMM result's reshape past its consumers reshapes the consumers' other
/// operands and destinations beside the consumers, after the GEMM; hoisted,
/// what is made from values that exist before the GEMM exists before it
/// too, as the epilogue fusions require of epilogue inputs and
/// destinations.
void hoistReshapes(Operation *root) {
  SmallVector<Operation *> reshapes;
  root->walk([&](Operation *op) {
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::EmptyOp,
            tensor::DimOp, affine::AffineApplyOp>(op))
      reshapes.push_back(op);
  });
  for (Operation *op : reshapes) {
    Block *block = op->getBlock();
    Operation *last = nullptr;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      Operation *inBlock = def ? block->findAncestorOpInBlock(*def) : nullptr;
      if (inBlock && (!last || last->isBeforeInBlock(inBlock)))
        last = inBlock;
    }
    if (last)
      op->moveAfter(last);
    else
      op->moveBefore(&block->front());
  }
}

struct CodaConvertMatmulsPass
    : coda::impl::CodaConvertMatmulsBase<CodaConvertMatmulsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateConvertMatmulsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    hoistReshapes(getOperation());
  }
};

} // namespace

void mlir::coda::populateConvertMatmulsPatterns(RewritePatternSet &patterns) {
  patterns.add<ConvertContraction, GeneralizeContraction>(
      patterns.getContext());
  // Before a product becomes a GEMM: the orientation its readers want.
  patterns.add<ComputeTransposedProduct>(patterns.getContext(),
                                         /*benefit=*/2);
  // Transposes of reshaped GEMM results (the heads) after the ops that
  // read them, which then read the reshape in order.
  populateSinkTransposesPatterns(patterns);
  // A GEMM result reshaped before its elementwise consumers (a folded batch
  // unfolded, the heads split from the hidden dimension): the consumer is
  // collapsed onto the GEMM's 2-D iteration space and the reshape moved
  // after it, so that the epilogue fusions see the GEMM result directly.
  linalg::populateFoldReshapeOpsByCollapsingPatterns(
      patterns, [](OpOperand *operand) {
        auto expand = operand->get().getDefiningOp<tensor::ExpandShapeOp>();
        return expand && expand.getSrc().getDefiningOp<GemmOp>();
      });
  // A folded batch unfolded, then its heads split: one reshape of the GEMM
  // result.
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns,
                                                     patterns.getContext());
  // A folded batch's destination: tensor.empty, reshaped, is tensor.empty
  // (the epilogue fusions make such destinations again where they need).
  tensor::populateFoldTensorEmptyPatterns(patterns);
  // The sizes the moved reshapes take, read from the sizes that made them
  // (tensor.dim of a reshape result would keep the GEMM's own result alive).
  memref::populateResolveRankedShapedTypeResultDimsPatterns(patterns);
}
