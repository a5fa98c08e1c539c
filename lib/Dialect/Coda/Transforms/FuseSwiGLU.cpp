//===- FuseSwiGLU.cpp - two GEMMs sharing lhs into a pairwise epilogue ----===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSESWIGLU
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// A gemm whose epilogue is a function of the accumulator alone (no inputs,
/// no position or sink ops) and whose single result has a single use.
bool isPlainGemm(GemmOp gemm) {
  return gemm && gemm.getEpilogueInputs().empty() &&
         gemm->getNumResults() == 1 && gemm->hasOneUse() &&
         hasOnlyEpilogueComputeOps(gemm.getBody(), /*allowIndex=*/false);
}

/// Interleaves the output columns of two weights: column 2j of the result is
/// column j of `first`, column 2j + 1 column j of `second`. K x N weights
/// become K x 2N; N x K (transposed) ones 2N x K.
Value interleaveColumns(OpBuilder &b, Location loc, Value first, Value second,
                        bool transposed) {
  auto type = cast<RankedTensorType>(first.getType());
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  SmallVector<int64_t> stackedShape =
      transposed ? SmallVector<int64_t>{rows, 2, cols}
                 : SmallVector<int64_t>{rows, cols, 2};
  Value stacked = tensor::EmptyOp::create(b, loc, stackedShape,
                                          type.getElementType());
  unsigned pairDim = transposed ? 1 : 2;
  SmallVector<OpFoldResult> sizes;
  for (int64_t size : stackedShape)
    sizes.push_back(b.getIndexAttr(size));
  sizes[pairDim] = b.getIndexAttr(1);
  SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
  SmallVector<Value, 2> weights = {first, second};
  for (auto [lane, weight] : llvm::enumerate(weights)) {
    SmallVector<OpFoldResult> offsets(3, b.getIndexAttr(0));
    offsets[pairDim] = b.getIndexAttr(lane);
    auto insert = tensor::InsertSliceOp::create(b, loc, weight, stacked,
                                                offsets, sizes, strides);
    insert->setAttr("coda.weight_transform", b.getUnitAttr());
    stacked = insert;
  }
  SmallVector<ReassociationIndices> groups =
      transposed ? SmallVector<ReassociationIndices>{{0, 1}, {2}}
                 : SmallVector<ReassociationIndices>{{0}, {1, 2}};
  SmallVector<int64_t> shape = transposed ? SmallVector<int64_t>{2 * rows, cols}
                                          : SmallVector<int64_t>{rows, 2 * cols};
  auto collapsed = tensor::CollapseShapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), stacked,
      groups);
  collapsed->setAttr("coda.weight_transform", b.getUnitAttr());
  return collapsed;
}

/// Clones the epilogue body of a plain gemm with the accumulator replaced by
/// `acc`; returns the value it yields.
Value cloneEpilogue(OpBuilder &b, GemmOp gemm, Value acc) {
  IRMapping mapping;
  mapping.map(gemm.getAccumulatorArg(), acc);
  for (Operation &op : gemm.getBody().without_terminator())
    b.clone(op, mapping);
  return mapping.lookupOrDefault(gemm.getYieldOp().getValues()[0]);
}

struct FuseGatedPair : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || !isElementwise(op) ||
        op.getNumLoops() != 2 || op.getNumDpsInputs() != 2 ||
        op.getNumDpsInits() != 1)
      return rewriter.notifyMatchFailure(op, "not a 2-D binary elementwise op");
    if (!llvm::all_of(op.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); }))
      return rewriter.notifyMatchFailure(op, "not elementwise on both");
    if (!hasOnlyEpilogueComputeOps(*op.getBlock(), /*allowIndex=*/false))
      return rewriter.notifyMatchFailure(op, "body is not scalar math");
    auto gate = op.getDpsInputs()[0].getDefiningOp<GemmOp>();
    auto up = op.getDpsInputs()[1].getDefiningOp<GemmOp>();
    if (!isPlainGemm(gate) || !isPlainGemm(up) || gate == up)
      return rewriter.notifyMatchFailure(op, "operands are not plain GEMMs");
    if (gate.getLhs() != up.getLhs() ||
        gate.getTransposeB() != up.getTransposeB() ||
        gate.getRhs().getType() != up.getRhs().getType() ||
        gate.getRhsType().getRank() != 2 || gate.isBatched())
      return rewriter.notifyMatchFailure(op, "GEMMs do not share their lhs");
    if (!gate.getRhsType().hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic weight shape");
    // Both weights must exist where the merged GEMM goes (the first one).
    GemmOp first = gate->isBeforeInBlock(up) ? gate : up;
    GemmOp second = first == gate ? up : gate;
    if (first->getBlock() != second->getBlock() ||
        !isAvailableBefore(second.getRhs(), first))
      return rewriter.notifyMatchFailure(op, "weights not available");
    Value destination = op.getDpsInits()[0];
    auto empty = destination.getDefiningOp<tensor::EmptyOp>();
    if (!isAvailableBefore(destination, first) &&
        (!empty || !llvm::all_of(empty->getOperands(), [&](Value size) {
          return isAvailableBefore(size, first);
        })))
      return rewriter.notifyMatchFailure(op, "destination not available");

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(first);
    if (!isAvailableBefore(destination, first))
      destination = rewriter.clone(*empty)->getResult(0);
    Value weights = interleaveColumns(rewriter, loc, gate.getRhs(),
                                      up.getRhs(), gate.getTransposeB());
    Type element = cast<ShapedType>(destination.getType()).getElementType();
    Block &combine = *op.getBlock();

    GemmOp fused = rebuildGemm(
        rewriter, gate, gate.getLhs(), weights, gate.getTransposeB(), {},
        ValueRange{destination},
        [&](OpBuilder &b, IRMapping &mapping, ValueRange) {
          // The copied epilogue of `gate` is dead; the pair region redoes
          // both epilogues per column.
          Value acc = mapping.lookup(gate.getAccumulatorArg());
          auto contract = PairContractOp::create(
              b, loc, TypeRange{PairType::get(element)}, ValueRange{acc},
              /*stride=*/1);
          Block *pair = b.createBlock(&contract.getBody(), {},
                                      {b.getF32Type(), b.getF32Type()},
                                      {loc, loc});
          IRMapping inner;
          cloneCapturedConstants(b, combine, inner);
          inner.map(combine.getArgument(0),
                    cloneEpilogue(b, gate, pair->getArgument(0)));
          inner.map(combine.getArgument(1),
                    cloneEpilogue(b, up, pair->getArgument(1)));
          for (Operation &inner_op : combine.without_terminator())
            b.clone(inner_op, inner);
          YieldOp::create(b, loc,
                          inner.lookup(combine.getTerminator()->getOperand(0)));
          b.setInsertionPointAfter(contract);
          return SmallVector<Value>{contract.getResult(0)};
        });
    rewriter.replaceOp(op, fused->getResults());
    rewriter.eraseOp(gate);
    rewriter.eraseOp(up);
    return success();
  }
};

struct CodaFuseSwiGLUPass
    : coda::impl::CodaFuseSwiGLUBase<CodaFuseSwiGLUPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseSwiGLUPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateFuseSwiGLUPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseGatedPair>(patterns.getContext());
}
