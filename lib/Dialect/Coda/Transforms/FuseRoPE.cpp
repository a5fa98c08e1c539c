//===- FuseRoPE.cpp - rotary embeddings into projection epilogues ---------===//
//
// RoPE on a projection's output becomes a pair_map in its epilogue: the
// rotate_half convention (q * cos + cat(-q2, q1) * sin per head) over the
// column pairs (i, i + d/2) of each head, the interleaved one over (2j, 2j+1).
//
//===----------------------------------------------------------------------===//

#include "EpilogueUtils.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFUSEROPE
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// True when `slice` takes columns [offset, offset + size) of the last
/// dimension of `source`, whole along the others, with unit strides.
bool isLastDimSlice(tensor::ExtractSliceOp slice, Value source, int64_t offset,
                    int64_t size) {
  if (!slice || slice.getSource() != source || !slice.hasUnitStride())
    return false;
  auto sourceType = cast<RankedTensorType>(source.getType());
  unsigned rank = sourceType.getRank();
  for (unsigned d = 0; d < rank; ++d) {
    std::optional<int64_t> off = getConstantIntValue(slice.getMixedOffsets()[d]);
    std::optional<int64_t> len = getConstantIntValue(slice.getMixedSizes()[d]);
    int64_t wantOffset = d + 1 == rank ? offset : 0;
    if (off != wantOffset)
      return false;
    // A dynamic (token) dimension is taken whole: the rotation reads the
    // slices elementwise with q, whose extent they must have.
    if (d + 1 < rank && ShapedType::isDynamic(sourceType.getDimSize(d)))
      continue;
    int64_t wantSize = d + 1 == rank ? size : sourceType.getDimSize(d);
    if (len != wantSize)
      return false;
  }
  return true;
}

/// The operand of an elementwise negation generic, if `value` is one.
Value getNegated(Value value) {
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 || !isElementwise(generic) ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return Value();
  auto neg = generic.getBlock()->getTerminator()->getOperand(0)
                 .getDefiningOp<arith::NegFOp>();
  if (!neg || neg.getOperand() != generic.getBlock()->getArgument(0))
    return Value();
  return generic.getDpsInputs()[0];
}

/// True when a RoPE op reads a table through `map` = `tableMap` ((t, h, i)
/// -> (t, i), or (b, t, h, i) -> (b, t, i) for heads that keep a batch), or
/// through it with unit dimensions of the table read at 0 between (the
/// tables unsqueezed to broadcast over the heads: [1, T, d], [B, 1, T, d]).
bool isTableRead(AffineMap map, Type type, AffineMap tableMap) {
  auto tableType = dyn_cast<RankedTensorType>(type);
  if (!tableType)
    return false;
  SmallVector<AffineExpr> read;
  for (auto [d, result] : llvm::enumerate(map.getResults())) {
    auto constant = dyn_cast<AffineConstantExpr>(result);
    if (!constant) {
      read.push_back(result);
      continue;
    }
    if (constant.getValue() != 0 || tableType.getDimSize(d) != 1)
      return false;
  }
  return ArrayRef<AffineExpr>(read) == tableMap.getResults();
}

/// `table` as rows x d: its leading dimensions (tokens, a batch, unit
/// dimensions) collapsed into the GEMM's rows.
Value collapseToRows(OpBuilder &builder, Location loc, Value table) {
  auto type = cast<RankedTensorType>(table.getType());
  if (type.getRank() <= 2)
    return table;
  ReassociationIndices rows;
  for (int64_t d = 0; d + 1 < type.getRank(); ++d)
    rows.push_back(d);
  return tensor::CollapseShapeOp::create(
      builder, loc, table,
      SmallVector<ReassociationIndices>{rows, {type.getRank() - 1}});
}

struct FuseRotateHalf : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = op.getContext();
    // Heads T x H x d, or B x T x H x d (a batch folded into the GEMM's
    // rows): the tokens are every dimension but the last two.
    unsigned rank = op.getNumLoops();
    if (!op.hasPureTensorSemantics() || !isElementwise(op) ||
        (rank != 3 && rank != 4) || op.getNumDpsInits() != 1 ||
        !op->hasOneUse())
      return rewriter.notifyMatchFailure(op, "not 3-D or 4-D elementwise");
    ReassociationIndices tokens;
    for (unsigned d = 0; d + 2 < rank; ++d)
      tokens.push_back(d);
    SmallVector<ReassociationIndices> heads = {tokens, {rank - 2, rank - 1}};
    // The rotated heads are written as the GEMM's rows x (H * d) result: a
    // collapse back to that shape is replaced by it, any other reader reads
    // it through the heads reshape.
    auto collapse = dyn_cast<tensor::CollapseShapeOp>(*op->getUsers().begin());
    if (collapse && collapse.getReassociationIndices() != heads)
      collapse = nullptr;
    if (!hasOnlyEpilogueComputeOps(*op.getBlock(), /*allowIndex=*/false))
      return rewriter.notifyMatchFailure(op, "body is not scalar math");

    // Find q (the expanded GEMM output) and its rotation.
    AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
    SmallVector<AffineExpr> tableExprs;
    for (unsigned d : tokens)
      tableExprs.push_back(getAffineDimExpr(d, ctx));
    tableExprs.push_back(getAffineDimExpr(rank - 1, ctx));
    AffineMap tableMap = AffineMap::get(rank, 0, tableExprs, ctx);
    std::optional<unsigned> qInput, rotInput;
    SmallVector<unsigned> tableInputs;
    tensor::ExpandShapeOp expand;
    for (OpOperand *input : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(input);
      if (isTableRead(map, input->get().getType(), tableMap)) {
        tableInputs.push_back(input->getOperandNumber());
        continue;
      }
      if (map != identity)
        return rewriter.notifyMatchFailure(op, "unexpected operand access");
      if (auto e = input->get().getDefiningOp<tensor::ExpandShapeOp>()) {
        if (qInput)
          return rewriter.notifyMatchFailure(op, "two expanded operands");
        qInput = input->getOperandNumber();
        expand = e;
      } else if (input->get().getDefiningOp<tensor::ConcatOp>()) {
        if (rotInput)
          return rewriter.notifyMatchFailure(op, "two concatenations");
        rotInput = input->getOperandNumber();
      } else {
        return rewriter.notifyMatchFailure(op, "unexpected operand");
      }
    }
    if (!qInput || !rotInput)
      return rewriter.notifyMatchFailure(op, "no q and rotate_half(q)");
    Value q3 = expand.getResult();
    auto q3Type = cast<RankedTensorType>(q3.getType());
    if (ShapedType::isDynamic(q3Type.getDimSize(rank - 2)) ||
        ShapedType::isDynamic(q3Type.getDimSize(rank - 1)) ||
        q3Type.getDimSize(rank - 1) % 2 != 0 ||
        expand.getReassociationIndices() != heads)
      return rewriter.notifyMatchFailure(op, "q is not [B x] T x H x d");
    int64_t headDim = q3Type.getDimSize(rank - 1), half = headDim / 2;

    // rotate_half(q) = cat(-q[..., half:], q[..., :half]) along the head dim.
    auto concat =
        op.getDpsInputs()[*rotInput].getDefiningOp<tensor::ConcatOp>();
    if (concat.getDim() != rank - 1 || concat.getInputs().size() != 2)
      return rewriter.notifyMatchFailure(op, "not a two-way head concat");
    Value negatedHigh = getNegated(concat.getInputs()[0]);
    auto high = negatedHigh ? negatedHigh.getDefiningOp<tensor::ExtractSliceOp>()
                            : tensor::ExtractSliceOp();
    auto low = concat.getInputs()[1].getDefiningOp<tensor::ExtractSliceOp>();
    if (!isLastDimSlice(high, q3, half, half) ||
        !isLastDimSlice(low, q3, 0, half))
      return rewriter.notifyMatchFailure(op, "not rotate_half of q");
    // The rotation's pieces must serve only the rotation, or q would still
    // be needed (and its GEMM kept) after the rewrite.
    Operation *negation = concat.getInputs()[0].getDefiningOp();
    auto onlyUsedBy = [](Operation *producer, Operation *user) {
      return llvm::all_of(producer->getUsers(),
                          [&](Operation *u) { return u == user; });
    };
    if (!onlyUsedBy(concat, op) || !onlyUsedBy(negation, concat) ||
        !onlyUsedBy(low, concat) || !onlyUsedBy(high, negation))
      return rewriter.notifyMatchFailure(op, "rotation pieces read elsewhere");

    // q must be a tile output of a 2-D GEMM that nothing else reads.
    std::optional<TileOutput> q = getTileOutput(expand.getSrc());
    if (!q || q->gemm.isBatched() || !q->result.hasOneUse())
      return rewriter.notifyMatchFailure(op, "q is not a GEMM output");
    GemmOp gemm = q->gemm;
    for (Operation *user : q3.getUsers())
      if (user != op.getOperation() && user != high.getOperation() &&
          user != low.getOperation())
        return rewriter.notifyMatchFailure(op, "q is read elsewhere");

    // The tables are per-token, per-head-column: periodic inputs.
    SmallVector<EpilogueInput> added;
    for (unsigned index : tableInputs) {
      Value table = op.getDpsInputs()[index];
      auto tableType = cast<RankedTensorType>(table.getType());
      if (tableType.getShape().back() != headDim ||
          !isAvailableBefore(table, gemm))
        return rewriter.notifyMatchFailure(op, "table not usable");
      added.push_back({table, AccessForm::periodic});
    }
    Type resultElement = getElementTypeOrSelf(op.getResult(0).getType());
    int64_t resultColumns = q3Type.getDimSize(rank - 2) * headDim;

    Location loc = op.getLoc();
    rewriter.setInsertionPoint(gemm);
    for (EpilogueInput &table : added)
      table.value = collapseToRows(rewriter, loc, table.value);
    Value destination =
        createEmptyWithRows(rewriter, loc, gemm, {resultColumns}, resultElement);
    Block &body = *op.getBlock();
    Value rotated = replaceTileOutputWithPairMap(
        rewriter, *q, added, destination, resultElement, half,
        [&](OpBuilder &b, Block &pair) {
          IRMapping constants;
          cloneCapturedConstants(b, body, constants);
          Value qLow = pair.getArgument(0), qHigh = pair.getArgument(1);
          Value negHigh = arith::NegFOp::create(b, loc, qHigh);
          SmallVector<Value> lanes;
          for (unsigned lane = 0; lane < 2; ++lane) {
            IRMapping inner = constants;
            inner.map(body.getArgument(*qInput), lane ? qHigh : qLow);
            inner.map(body.getArgument(*rotInput), lane ? qLow : negHigh);
            for (auto [i, index] : llvm::enumerate(tableInputs))
              inner.map(body.getArgument(index),
                        pair.getArgument(2 + 2 * i + lane));
            for (Operation &inner_op : body.without_terminator())
              b.clone(inner_op, inner);
            lanes.push_back(inner.lookup(body.getTerminator()->getOperand(0)));
          }
          return lanes;
        });
    if (collapse) {
      rewriter.replaceOp(collapse, rotated);
      rewriter.eraseOp(op);
      return success();
    }
    rewriter.setInsertionPoint(op);
    rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(
        op, op.getResult(0).getType(), rotated, expand.getReassociationIndices(),
        tensor::getMixedSizes(rewriter, loc, op.getDpsInits()[0]));
    return success();
  }
};

/// The interleaved convention, written without complex numbers:
///   x = q.reshape(T, H, d/2, 2); x0 = x[..., 0]; x1 = x[..., 1]
///   y = stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], -1).flatten()
/// with T x d/2 tables. It becomes a stride-1 pair_map: pair j of a head is
/// columns (2j, 2j + 1); the tables, repeated to T x d (each column twice),
/// are periodic inputs.
struct FuseInterleavedRotation : OpRewritePattern<tensor::CollapseShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::CollapseShapeOp collapse,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = collapse.getContext();
    if (collapse.getReassociationIndices() !=
        SmallVector<ReassociationIndices>{{0}, {1, 2, 3}})
      return rewriter.notifyMatchFailure(collapse, "not [T, H, d/2, 2] -> [T, D]");
    auto concat = collapse.getSrc().getDefiningOp<tensor::ConcatOp>();
    if (!concat || concat.getDim() != 3 || concat.getInputs().size() != 2 ||
        !concat->hasOneUse())
      return rewriter.notifyMatchFailure(collapse, "not a stack of two halves");

    // The two lanes: [T, H, d/2] elementwise ops expanded to [T, H, d/2, 1].
    SmallVector<linalg::GenericOp, 2> lanes;
    for (Value piece : concat.getInputs()) {
      auto expand = piece.getDefiningOp<tensor::ExpandShapeOp>();
      auto lane = expand ? expand.getSrc().getDefiningOp<linalg::GenericOp>()
                         : linalg::GenericOp();
      if (!lane || !expand->hasOneUse() || !lane->hasOneUse() ||
          !isElementwise(lane) || lane.getNumLoops() != 3 ||
          lane.getNumDpsInits() != 1 ||
          !hasOnlyEpilogueComputeOps(*lane.getBlock(), /*allowIndex=*/false))
        return rewriter.notifyMatchFailure(collapse, "lane is not elementwise");
      lanes.push_back(lane);
    }

    // Their operands: x0 / x1 (slices of q reshaped to [T, H, d/2, 2]) and
    // per-token tables [T, d/2].
    AffineMap identity = AffineMap::getMultiDimIdentityMap(3, ctx);
    AffineMap tableMap = AffineMap::get(
        3, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(2, ctx)}, ctx);
    Value q4;
    SmallVector<Value> tables;
    for (linalg::GenericOp lane : lanes) {
      for (OpOperand *input : lane.getDpsInputOperands()) {
        AffineMap map = lane.getMatchingIndexingMap(input);
        if (map == tableMap) {
          if (!llvm::is_contained(tables, input->get()))
            tables.push_back(input->get());
          continue;
        }
        auto slice = input->get().getDefiningOp<tensor::ExtractSliceOp>();
        if (map != identity || !slice)
          return rewriter.notifyMatchFailure(collapse, "lane operand");
        if (q4 && slice.getSource() != q4)
          return rewriter.notifyMatchFailure(collapse, "two sources");
        q4 = slice.getSource();
      }
    }
    auto expand = q4 ? q4.getDefiningOp<tensor::ExpandShapeOp>()
                     : tensor::ExpandShapeOp();
    if (!expand || expand.getReassociationIndices() !=
                       SmallVector<ReassociationIndices>{{0}, {1, 2, 3}})
      return rewriter.notifyMatchFailure(collapse, "q is not [T, H, d/2, 2]");
    auto q4Type = cast<RankedTensorType>(q4.getType());
    if (ShapedType::isDynamic(q4Type.getDimSize(1)) ||
        ShapedType::isDynamic(q4Type.getDimSize(2)) ||
        q4Type.getDimSize(3) != 2)
      return rewriter.notifyMatchFailure(collapse, "not pairs");
    int64_t halfHead = q4Type.getDimSize(2);
    // Each slice is x[..., k] for k = 0 or 1; every reader of q4 is one.
    DenseMap<Value, unsigned> laneOfSlice;
    for (Operation *user : q4.getUsers()) {
      auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
      if (!slice || !slice.hasUnitStride() ||
          slice.getResultType().getRank() != 3)
        return rewriter.notifyMatchFailure(collapse, "q read otherwise");
      SmallVector<int64_t> offsets = llvm::map_to_vector(
          slice.getMixedOffsets(), [](OpFoldResult offset) {
            return getConstantIntValue(offset).value_or(-1);
          });
      if (offsets.size() != 4 || offsets[0] || offsets[1] || offsets[2] ||
          (offsets[3] != 0 && offsets[3] != 1))
        return rewriter.notifyMatchFailure(collapse, "not a lane slice");
      for (Operation *reader : slice->getUsers())
        if (!llvm::is_contained(lanes, reader))
          return rewriter.notifyMatchFailure(collapse, "lane read elsewhere");
      laneOfSlice[slice.getResult()] = offsets[3];
    }
    std::optional<TileOutput> q = getTileOutput(expand.getSrc());
    if (!q || q->gemm.isBatched() || !q->result.hasOneUse())
      return rewriter.notifyMatchFailure(collapse, "q is not a GEMM output");
    GemmOp gemm = q->gemm;
    for (Value table : tables)
      if (!isAvailableBefore(table, gemm))
        return rewriter.notifyMatchFailure(collapse, "table after the GEMM");

    Location loc = collapse.getLoc();
    rewriter.setInsertionPoint(gemm);
    // Repeat each table column for both columns of its pair: [T, d].
    SmallVector<EpilogueInput> added;
    AffineMap repeatMap = AffineMap::get(
        2, 0, {getAffineDimExpr(0, ctx), getAffineDimExpr(1, ctx).floorDiv(2)},
        ctx);
    for (Value table : tables) {
      auto tableType = cast<RankedTensorType>(table.getType());
      Value init = createEmptyWithRows(rewriter, loc, table, {2 * halfHead},
                                       tableType.getElementType());
      Value repeated =
          linalg::GenericOp::create(
              rewriter, loc, TypeRange{init.getType()}, ValueRange{table},
              ValueRange{init},
              {repeatMap, AffineMap::getMultiDimIdentityMap(2, ctx)},
              {utils::IteratorType::parallel, utils::IteratorType::parallel},
              [](OpBuilder &b, Location nloc, ValueRange args) {
                linalg::YieldOp::create(b, nloc, args[0]);
              })
              .getResult(0);
      added.push_back({repeated, AccessForm::periodic});
    }
    auto resultType = cast<RankedTensorType>(collapse.getResultType());
    Value destination =
        createEmptyWithRows(rewriter, loc, gemm, {resultType.getDimSize(1)},
                            resultType.getElementType());
    Value rotated = replaceTileOutputWithPairMap(
        rewriter, *q, added, destination, resultType.getElementType(),
        /*stride=*/1, [&](OpBuilder &b, Block &pair) {
          SmallVector<Value> results;
          for (linalg::GenericOp lane : lanes) {
            Block &body = *lane.getBlock();
            IRMapping inner;
            cloneCapturedConstants(b, body, inner);
            for (OpOperand *input : lane.getDpsInputOperands()) {
              BlockArgument arg = body.getArgument(input->getOperandNumber());
              auto it = laneOfSlice.find(input->get());
              if (it != laneOfSlice.end()) {
                inner.map(arg, pair.getArgument(it->second));
                continue;
              }
              unsigned table = llvm::find(tables, input->get()) - tables.begin();
              // Both columns of a pair read the same table entry.
              inner.map(arg, pair.getArgument(2 + 2 * table));
            }
            for (Operation &bodyOp : body.without_terminator())
              b.clone(bodyOp, inner);
            results.push_back(inner.lookup(body.getTerminator()->getOperand(0)));
          }
          return results;
        });
    rewriter.replaceOp(collapse, rotated);
    return success();
  }
};

struct CodaFuseRoPEPass : coda::impl::CodaFuseRoPEBase<CodaFuseRoPEPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseRoPEPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateFuseRoPEPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseRotateHalf, FuseInterleavedRotation>(patterns.getContext());
}
