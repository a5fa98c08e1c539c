//===- SinkTransposes.cpp - transposes moved after the ops that follow ----===//
//
// Frontends transpose a projection's heads before the ops that follow it
// (`q_proj(x).view(B, T, H, D).transpose(1, 2)` and then RoPE, as Hugging
// Face's Llama writes it): the transpose stands between the GEMM and its
// epilogue. These patterns move a transpose after the slices, concatenations
// and elementwise ops that read it, so that those ops read the GEMM's result
// (through its heads reshape) in loop order and can join its epilogue; the
// transpose is then applied once, to what they produce.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The permutation through which `op` reads its one input if `op` is a
/// generic that only transposes it (out[i] = in[perm(i)]).
std::optional<AffineMap> transposeMap(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getNumReductionLoops() != 0)
    return std::nullopt;
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  if (!maps[1].isIdentity() || !maps[0].isPermutation() ||
      maps[0].isIdentity() ||
      generic.getBlock()->getTerminator()->getOperand(0) !=
          generic.getBlock()->getArgument(0))
    return std::nullopt;
  return maps[0];
}

/// True for a map that reads a broadcast operand: distinct loop dimensions
/// and constant zeros (unit dimensions), fewer loops than the op has.
bool isBroadcast(AffineMap map) {
  llvm::SmallDenseSet<unsigned> dims;
  for (AffineExpr result : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(result)) {
      if (!dims.insert(dim.getPosition()).second)
        return false;
    } else if (auto constant = dyn_cast<AffineConstantExpr>(result)) {
      if (constant.getValue() != 0)
        return false;
    } else {
      return false;
    }
  }
  return dims.size() < map.getNumDims();
}

/// True when `value` is computed from a matrix product's result (a
/// coda.gemm or a contraction still in linalg) through reshapes, slices,
/// concatenations and elementwise ops: the values whose consumers could
/// join an epilogue. Other transposes (a weight's, say) stay where they are.
bool comesFromProduct(Value value, unsigned depth = 0) {
  Operation *op = value.getDefiningOp();
  if (!op || depth > 8)
    return false;
  if (isa<GemmOp>(op))
    return true;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    if (linalgOp.getNumReductionLoops() != 0)
      return linalg::isaContractionOpInterface(linalgOp);
    return llvm::any_of(linalgOp.getDpsInputs(), [&](Value input) {
      return comesFromProduct(input, depth + 1);
    });
  }
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
          tensor::ExtractSliceOp, tensor::ConcatOp>(op))
    return llvm::any_of(op->getOperands(), [&](Value operand) {
      return isa<RankedTensorType>(operand.getType()) &&
             comesFromProduct(operand, depth + 1);
    });
  return false;
}

/// out[i] = input[perm(i)], as a generic.
Value createTranspose(OpBuilder &builder, Location loc, Value input,
                      AffineMap perm) {
  SmallVector<OpFoldResult> inSizes = tensor::getMixedSizes(builder, loc, input);
  SmallVector<OpFoldResult> outSizes(inSizes.size());
  for (unsigned k = 0; k < inSizes.size(); ++k)
    outSizes[perm.getDimPosition(k)] = inSizes[k];
  Value empty = tensor::EmptyOp::create(builder, loc, outSizes,
                                        getElementTypeOrSelf(input.getType()));
  SmallVector<AffineMap> maps = {
      perm, builder.getMultiDimIdentityMap(perm.getNumDims())};
  SmallVector<utils::IteratorType> iterators(perm.getNumDims(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      builder, loc, empty.getType(), ValueRange{input}, ValueRange{empty}, maps,
      iterators, [](OpBuilder &b, Location l, ValueRange args) {
        linalg::YieldOp::create(b, l, args[0]);
      });
  return generic.getResult(0);
}

/// extract_slice(transpose(x)) -> transpose(extract_slice(x)).
struct SinkTransposeBelowSlice : OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice,
                                PatternRewriter &rewriter) const override {
    Operation *producer = slice.getSource().getDefiningOp();
    std::optional<AffineMap> perm = transposeMap(producer);
    if (!perm)
      return rewriter.notifyMatchFailure(slice, "not a slice of a transpose");
    if (slice.getSourceType().getRank() != slice.getResultType().getRank())
      return rewriter.notifyMatchFailure(slice, "rank-reducing");
    SmallVector<OpFoldResult> offsets = slice.getMixedOffsets(),
                              sizes = slice.getMixedSizes(),
                              strides = slice.getMixedStrides();
    SmallVector<OpFoldResult> newOffsets, newSizes, newStrides;
    for (unsigned k = 0; k < offsets.size(); ++k) {
      unsigned d = perm->getDimPosition(k);
      newOffsets.push_back(offsets[d]);
      newSizes.push_back(sizes[d]);
      newStrides.push_back(strides[d]);
    }
    Location loc = slice.getLoc();
    Value inner = tensor::ExtractSliceOp::create(
        rewriter, loc, producer->getOperand(0), newOffsets, newSizes,
        newStrides);
    rewriter.replaceOp(slice, createTranspose(rewriter, loc, inner, *perm));
    return success();
  }
};

/// concat(transpose(x), transpose(y), ...) -> transpose(concat(x, y, ...)),
/// the same permutation for every operand.
struct SinkTransposeBelowConcat : OpRewritePattern<tensor::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::ConcatOp concat,
                                PatternRewriter &rewriter) const override {
    std::optional<AffineMap> perm;
    SmallVector<Value> inners;
    for (Value input : concat.getInputs()) {
      std::optional<AffineMap> inputPerm = transposeMap(input.getDefiningOp());
      if (!inputPerm || (perm && *perm != *inputPerm))
        return rewriter.notifyMatchFailure(concat,
                                           "not one transpose for all");
      perm = inputPerm;
      inners.push_back(input.getDefiningOp()->getOperand(0));
    }
    unsigned dim = concat.getDim();
    unsigned innerDim = 0;
    while (perm->getDimPosition(innerDim) != dim)
      ++innerDim;
    Location loc = concat.getLoc();
    Value inner = tensor::ConcatOp::create(rewriter, loc, innerDim, inners);
    rewriter.replaceOp(concat, createTranspose(rewriter, loc, inner, *perm));
    return success();
  }
};

/// An elementwise generic reading a transpose reads the transposed tensor
/// through the composed map instead.
struct FoldTransposeIntoElementwise : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumReductionLoops() != 0 ||
        transposeMap(op))
      return rewriter.notifyMatchFailure(op, "not an elementwise op");
    for (OpOperand *input : op.getDpsInputOperands()) {
      Operation *producer = input->get().getDefiningOp();
      std::optional<AffineMap> perm = transposeMap(producer);
      if (!perm)
        continue;
      SmallVector<AffineMap> maps = op.getIndexingMapsArray();
      unsigned index = input->getOperandNumber();
      maps[index] = perm->compose(maps[index]);
      rewriter.modifyOpInPlace(op, [&] {
        op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
        input->set(producer->getOperand(0));
      });
      return success();
    }
    return rewriter.notifyMatchFailure(op, "reads no transpose");
  }
};

/// An elementwise generic whose full-size operands are all read through
/// one permutation is computed in their order, and its result transposed.
/// A product's own result read transposed is left to the product, which
/// computes the transposed result instead (--coda-convert-matmuls).
struct ComputeInOperandOrder : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumReductionLoops() != 0 ||
        op.getNumDpsInits() != 1 || transposeMap(op) ||
        !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity() ||
        op.payloadUsesValueFromOperand(op.getDpsInitOperand(0)) ||
        !op.getBody()->getOps<linalg::IndexOp>().empty())
      return rewriter.notifyMatchFailure(op, "not an elementwise op");
    unsigned numLoops = op.getNumLoops();
    std::optional<AffineMap> perm;
    for (OpOperand *input : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(input);
      if (!map.isPermutation()) {
        // A broadcast operand (unit dimensions read at 0 included) is read
        // the same in any loop order.
        if (isBroadcast(map))
          continue;
        return rewriter.notifyMatchFailure(op, "an operand read otherwise");
      }
      if (perm && *perm != map)
        return rewriter.notifyMatchFailure(op, "operands in different orders");
      auto producer = input->get().getDefiningOp<linalg::LinalgOp>();
      if (producer && producer.getNumReductionLoops() != 0)
        return rewriter.notifyMatchFailure(op, "reads a product");
      perm = map;
    }
    if (!perm || perm->isIdentity())
      return rewriter.notifyMatchFailure(op, "already in operand order");
    if (llvm::none_of(op.getDpsInputOperands(), [&](OpOperand *input) {
          return op.getMatchingIndexingMap(input) == *perm &&
                 comesFromProduct(input->get());
        }))
      return rewriter.notifyMatchFailure(op, "no operand from a product");

    // Loops j = perm(i): every operand map m becomes m o perm^-1, the
    // result is written in the operands' order, then transposed back.
    AffineMap inverse = inversePermutation(*perm);
    SmallVector<AffineMap> maps;
    for (OpOperand *input : op.getDpsInputOperands())
      maps.push_back(op.getMatchingIndexingMap(input).compose(inverse));
    maps.push_back(rewriter.getMultiDimIdentityMap(numLoops));
    Location loc = op.getLoc();
    Value init = op.getDpsInits()[0];
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(rewriter, loc, init);
    SmallVector<OpFoldResult> ordered;
    for (unsigned k = 0; k < numLoops; ++k)
      ordered.push_back(sizes[perm->getDimPosition(k)]);
    Value empty = tensor::EmptyOp::create(rewriter, loc, ordered,
                                          getElementTypeOrSelf(init.getType()));
    auto inOrder = linalg::GenericOp::create(
        rewriter, loc, empty.getType(), op.getDpsInputs(), ValueRange{empty},
        maps, op.getIteratorTypesArray());
    rewriter.cloneRegionBefore(op.getRegion(), inOrder.getRegion(),
                               inOrder.getRegion().end());
    rewriter.replaceOp(op, createTranspose(rewriter, loc, inOrder.getResult(0),
                                           *perm));
    return success();
  }
};

/// A transpose moved after an elementwise op that then did not join an
/// epilogue is merged back into it: one kernel writes the op's result
/// transposed, as before the transpose moved.
struct FoldTransposeIntoProducer : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!transposeMap(op))
      return rewriter.notifyMatchFailure(op, "not a transpose");
    OpOperand *input = op.getDpsInputOperand(0);
    auto producer = input->get().getDefiningOp<linalg::GenericOp>();
    if (!producer || transposeMap(producer) || !producer->hasOneUse() ||
        producer.getNumReductionLoops() != 0 ||
        !linalg::areElementwiseOpsFusable(input))
      return rewriter.notifyMatchFailure(op, "no elementwise producer");
    FailureOr<linalg::ElementwiseOpFusionResult> fused =
        linalg::fuseElementwiseOps(rewriter, input);
    if (failed(fused))
      return rewriter.notifyMatchFailure(op, "fusion failed");
    rewriter.replaceOp(op, fused->replacements.lookup(op.getResult(0)));
    return success();
  }
};

} // namespace

void mlir::coda::populateFoldTransposesIntoProducersPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FoldTransposeIntoProducer>(patterns.getContext());
}

void mlir::coda::populateSinkTransposesPatterns(RewritePatternSet &patterns) {
  patterns.add<SinkTransposeBelowSlice, SinkTransposeBelowConcat,
               FoldTransposeIntoElementwise, ComputeInOperandOrder>(
      patterns.getContext());
}
