//===- CodaToLinalg.cpp - reference lowering of coda ----------------------===//
//
// Lowers coda.gemm to a linalg contraction plus a loop nest that evaluates the
// epilogue per output element, and coda.reduce_partials to linalg.reduce. This
// is the dialect's executable meaning; it favours clarity over speed.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToLinalg/CodaToLinalg.h"

#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODALOWERTOLINALG
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

Value indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

/// Reads and writes shaped values element by element, over tensors (each write
/// returns the updated tensor) or memrefs (stores in place).
struct ElementAccess {
  bool onTensors;

  Value read(OpBuilder &b, Location loc, Value source, ValueRange indices) {
    if (onTensors)
      return tensor::ExtractOp::create(b, loc, source, indices);
    return memref::LoadOp::create(b, loc, source, indices);
  }

  /// Writes `value` and returns the destination to use from now on.
  Value write(OpBuilder &b, Location loc, Value value, Value dest,
              ValueRange indices) {
    if (onTensors)
      return tensor::InsertOp::create(b, loc, value, dest, indices);
    memref::StoreOp::create(b, loc, value, dest, indices);
    return dest;
  }

  Value fill(OpBuilder &b, Location loc, Value value, Value dest) {
    auto fill = linalg::FillOp::create(b, loc, ValueRange{value},
                                       ValueRange{dest});
    return onTensors ? fill.getResult(0) : dest;
  }
};

/// `indices` after the batch index, where there is one.
SmallVector<Value> batchIndices(Value batch, ArrayRef<Value> indices) {
  SmallVector<Value> all;
  if (batch)
    all.push_back(batch);
  all.append(indices.begin(), indices.end());
  return all;
}

/// The f32 accumulator lhs x rhs as a linalg.generic contraction.
Value buildAccumulator(OpBuilder &b, Location loc, GemmOp op,
                       ElementAccess access) {
  MLIRContext *ctx = b.getContext();
  bool batched = op.isBatched();
  bool batchedRhs = op.getRhsType().getRank() == 3;

  // Sizes of the [B x] M x N accumulator.
  SmallVector<Value> dynamicSizes;
  SmallVector<int64_t> shape;
  auto addDim = [&](Value source, int64_t dim) {
    int64_t size = cast<ShapedType>(source.getType()).getDimSize(dim);
    shape.push_back(size);
    if (ShapedType::isDynamic(size))
      dynamicSizes.push_back(linalg::createOrFoldDimOp(b, loc, source, dim));
  };
  if (batched)
    addDim(op.getLhs(), 0);
  addDim(op.getLhs(), op.getLhsMDim());
  addDim(op.getRhs(), op.getRhsNDim());

  Type f32 = b.getF32Type();
  Value init;
  if (access.onTensors)
    init = tensor::EmptyOp::create(b, loc, shape, f32, dynamicSizes);
  else
    init = memref::AllocOp::create(b, loc, MemRefType::get(shape, f32),
                                   dynamicSizes);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  init = access.fill(b, loc, zero, init);
  // An epilogue that does not read the accumulator needs no product.
  if (!op.readsAccumulator())
    return init;

  // Loops (b, m, n, k) or (m, n, k).
  unsigned numLoops = batched ? 4 : 3;
  unsigned d = batched ? 1 : 0;
  AffineExpr bDim = getAffineDimExpr(0, ctx);
  AffineExpr m = getAffineDimExpr(d, ctx), n = getAffineDimExpr(d + 1, ctx),
             k = getAffineDimExpr(d + 2, ctx);
  SmallVector<AffineExpr> lhsExprs, rhsExprs, outExprs;
  if (batched) {
    lhsExprs.push_back(bDim);
    outExprs.push_back(bDim);
    if (batchedRhs)
      rhsExprs.push_back(bDim);
  }
  if (op.getTransposeA())
    lhsExprs.append({k, m});
  else
    lhsExprs.append({m, k});
  if (op.getTransposeB())
    rhsExprs.append({n, k});
  else
    rhsExprs.append({k, n});
  outExprs.append({m, n});
  SmallVector<AffineMap> maps = {
      AffineMap::get(numLoops, 0, lhsExprs, ctx),
      AffineMap::get(numLoops, 0, rhsExprs, ctx),
      AffineMap::get(numLoops, 0, outExprs, ctx)};
  SmallVector<utils::IteratorType> iterators(numLoops,
                                             utils::IteratorType::parallel);
  iterators.back() = utils::IteratorType::reduction;

  auto body = [&](OpBuilder &nb, Location nloc, ValueRange args) {
    auto toF32 = [&](Value v) -> Value {
      if (v.getType() == f32)
        return v;
      return arith::ExtFOp::create(nb, nloc, f32, v);
    };
    Value product =
        arith::MulFOp::create(nb, nloc, toF32(args[0]), toF32(args[1]));
    Value sum = arith::AddFOp::create(nb, nloc, args[2], product);
    linalg::YieldOp::create(nb, nloc, sum);
  };
  SmallVector<Type> resultTypes;
  if (access.onTensors)
    resultTypes.push_back(init.getType());
  auto contraction = linalg::GenericOp::create(
      b, loc, resultTypes, ValueRange{op.getLhs(), op.getRhs()},
      ValueRange{init}, maps, iterators, body);
  return access.onTensors ? contraction.getResult(0) : init;
}

/// Emits the epilogue for one (batch, row, column group) point of the loop
/// nest. A group is one column, or the two columns of a pair when the epilogue
/// has pairwise ops ("lanes"): pair p with stride s holds columns
/// (p / s) * 2s + p mod s and that plus s.
class EpilogueEmitter {
public:
  EpilogueEmitter(GemmOp op, ElementAccess access, Value accumulator,
                  std::optional<int64_t> pairStride)
      : op(op), access(access), accumulator(accumulator),
        pairStride(pairStride) {}

  /// Emits the body at `ivs` ([b,] m, n or pair index) and returns the
  /// updated outputs.
  SmallVector<Value> emit(OpBuilder &b, Location loc, ValueRange ivs,
                          SmallVector<Value> outputs) {
    Value batch = op.isBatched() ? ivs[0] : Value();
    Value row = ivs[ivs.size() - 2];
    Value group = ivs.back();
    unsigned numLanes = pairStride ? 2 : 1;
    SmallVector<Value> cols = getGroupColumns(b, loc, group, pairStride);

    auto withBatch = [&](ArrayRef<Value> indices) {
      return batchIndices(batch, indices);
    };

    // Block arguments per lane.
    SmallVector<IRMapping> lanes;
    for (Value col : cols)
      lanes.push_back(mapElement(b, loc, batch, row, col, group));
    auto groupStatistic = [&](OpBuilder &gb, GroupReduceOp stat,
                              MutableArrayRef<IRMapping> lanes) {
      for (auto [lane, col] : llvm::zip_equal(lanes, cols))
        lane.map(stat.getResult(),
                 reduceGroup(gb, loc, stat, batch, row, col, lane));
    };
    evaluateEpilogueBody(b, op, row, cols, lanes, groupStatistic);

    YieldOp yield = op.getYieldOp();
    for (auto [i, value] : llvm::enumerate(yield.getValues())) {
      Value &out = outputs[i];
      Operation *def = value.getDefiningOp();
      if (isa<PairType>(value.getType())) {
        out = access.write(b, loc, lanes[0].lookup(value), out,
                           withBatch({row, group}));
        continue;
      }
      if (auto interleave = dyn_cast_or_null<InterleaveOp>(def)) {
        for (unsigned lane = 0; lane < numLanes; ++lane) {
          Value even = arith::MulIOp::create(b, loc, cols[lane],
                                             indexConstant(b, loc, 2));
          Value odd = arith::AddIOp::create(b, loc, even,
                                            indexConstant(b, loc, 1));
          out = access.write(b, loc, lanes[lane].lookup(interleave.getEven()),
                             out, withBatch({row, even}));
          out = access.write(b, loc, lanes[lane].lookup(interleave.getOdd()),
                             out, withBatch({row, odd}));
        }
        continue;
      }
      for (unsigned lane = 0; lane < numLanes; ++lane) {
        Value element = lanes[lane].lookup(value);
        Value col = cols[lane];
        if (auto reduce = dyn_cast_or_null<RowReduceOp>(def)) {
          Value tile = arith::DivUIOp::create(
              b, loc, col, indexConstant(b, loc, reduce.getTile()));
          out = accumulate(b, loc, reduce.getKind(), element, out,
                           withBatch({row, tile}));
        } else if (auto reduce = dyn_cast_or_null<ColReduceOp>(def)) {
          Value tile = arith::DivUIOp::create(
              b, loc, row, indexConstant(b, loc, reduce.getTile()));
          out = accumulate(b, loc, reduce.getKind(), element, out,
                           withBatch({tile, col}));
        } else if (auto grouped = dyn_cast_or_null<GroupValueOp>(def)) {
          Value width = indexConstant(b, loc, grouped.getWidth());
          bool rows = grouped.getAxis() == ReductionAxis::row;
          Value index = arith::DivUIOp::create(b, loc, rows ? col : row, width);
          SmallVector<Value> at = rows ? SmallVector<Value>{row, index}
                                       : SmallVector<Value>{index, col};
          out = access.write(b, loc, element, out, withBatch(at));
        } else if (auto transpose = dyn_cast_or_null<TransposeOp>(def)) {
          out = access.write(b, loc, lanes[lane].lookup(transpose.getValue()),
                             out, withBatch({col, row}));
        } else if (auto select = dyn_cast_or_null<RowSelectOp>(def)) {
          Value target = lanes[lane].lookup(select.getColumn());
          if (!target.getType().isIndex())
            target = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                                target);
          Value hit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            target, col);
          Value old = access.read(b, loc, out, withBatch({row}));
          Value chosen = arith::SelectOp::create(b, loc, hit, element, old);
          out = access.write(b, loc, chosen, out, withBatch({row}));
        } else {
          out = access.write(b, loc, element, out, withBatch({row, col}));
        }
      }
    }
    return outputs;
  }

private:
  /// The accumulator and the inputs at element (row, col) of `batch`; pair
  /// inputs at pair `group`.
  IRMapping mapElement(OpBuilder &b, Location loc, Value batch, Value row,
                       Value col, Value group) {
    auto withBatch = [&](ArrayRef<Value> indices) {
      return batchIndices(batch, indices);
    };
    IRMapping lane;
    lane.map(op.getAccumulatorArg(),
             access.read(b, loc, accumulator, withBatch({row, col})));
    for (auto [i, input] : llvm::enumerate(op.getEpilogueInputs())) {
      Value element;
      switch (op.getInputForm(i)) {
      case AccessForm::tile:
        element = access.read(b, loc, input, withBatch({row, col}));
        break;
      case AccessForm::row:
        element = access.read(b, loc, input, withBatch({row}));
        break;
      case AccessForm::col:
        element = access.read(b, loc, input, {col});
        break;
      case AccessForm::scalar:
        element = input;
        break;
      case AccessForm::pair:
        element = access.read(b, loc, input, withBatch({row, group}));
        break;
      case AccessForm::periodic: {
        auto type = cast<ShapedType>(input.getType());
        Value period =
            linalg::createOrFoldDimOp(b, loc, input, type.getRank() - 1);
        Value wrapped = arith::RemUIOp::create(b, loc, col, period);
        element = access.read(b, loc, input, withBatch({row, wrapped}));
        break;
      }
      }
      lane.map(op.getInputArg(i), element);
    }
    return lane;
  }

  /// The pair holding column `col` (getGroupColumns' inverse): with
  /// stride s, (col / 2s) s + col mod s; no pair without pairwise ops.
  Value pairOfColumn(OpBuilder &b, Location loc, Value col) {
    if (!pairStride)
      return col;
    Value stride = indexConstant(b, loc, *pairStride);
    Value block = arith::DivUIOp::create(
        b, loc, col, indexConstant(b, loc, 2 * *pairStride));
    return arith::AddIOp::create(b, loc,
                                 arith::MulIOp::create(b, loc, block, stride),
                                 arith::RemUIOp::create(b, loc, col, stride));
  }

  /// The statistic `stat` of the group holding (row, col): a loop over the
  /// group's elements (clipped at M or N) that evaluates what `stat` reduces
  /// at each. Statistics of the same group it reads are `lane`'s.
  Value reduceGroup(OpBuilder &b, Location loc, GroupReduceOp stat,
                    Value batch, Value row, Value col, IRMapping &lane) {
    bool rows = stat.getAxis() == ReductionAxis::row;
    Value position = rows ? col : row;
    Value width = indexConstant(b, loc, stat.getWidth());
    Value first = arith::MulIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, position, width), width);
    Value size = linalg::createOrFoldDimOp(b, loc, accumulator,
                                           op.isBatched() ? (rows ? 2 : 1)
                                                          : (rows ? 1 : 0));
    Value end = arith::MinUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, first, width), size);
    auto type = cast<FloatType>(stat.getValue().getType());
    GroupStatistic kind = stat.getKind();
    SmallVector<Value> init = {arith::ConstantOp::create(
        b, loc, getGroupIdentity(kind, type))};
    if (kind == GroupStatistic::argmax)
      init.push_back(first);
    SmallVector<Operation *> slice = getGroupOperandSlice(op, stat.getValue());
    auto loop = scf::ForOp::create(
        b, loc, first, end, indexConstant(b, loc, 1), init,
        [&](OpBuilder &lb, Location lloc, Value at, ValueRange carried) {
          Value r = rows ? row : at, c = rows ? at : col;
          // What a statistic reduces reads no pair input (the verifier's
          // rule), but every input is mapped: a pair input at c's pair.
          IRMapping element =
              mapElement(lb, lloc, batch, r, c, pairOfColumn(lb, lloc, c));
          // Statistics of the same group, read by what `stat` reduces.
          for (GroupReduceOp known : op.getBody().getOps<GroupReduceOp>())
            if (lane.contains(known.getResult()))
              element.map(known.getResult(), lane.lookup(known.getResult()));
          for (Operation *inner : slice) {
            if (isa<RowIndexOp>(inner))
              element.map(inner->getResult(0), r);
            else if (isa<ColIndexOp>(inner))
              element.map(inner->getResult(0), c);
            else
              lb.clone(*inner, element);
          }
          Value v = element.lookup(stat.getValue());
          GroupTerm acc{carried[0], kind == GroupStatistic::argmax
                                        ? carried[1]
                                        : Value()};
          GroupTerm next = buildGroupCombine(lb, lloc, kind, acc, {v, at});
          SmallVector<Value> yielded = {next.value};
          if (next.position)
            yielded.push_back(next.position);
          scf::YieldOp::create(lb, lloc, yielded);
        });
    return loop.getResult(kind == GroupStatistic::argmax ? 1 : 0);
  }

  Value accumulate(OpBuilder &b, Location loc, ReductionKind kind,
                   Value element, Value out, ValueRange indices) {
    Value old = access.read(b, loc, out, indices);
    Value combined = buildReductionCombine(b, loc, kind, old, element);
    return access.write(b, loc, combined, out, indices);
  }

  GemmOp op;
  ElementAccess access;
  Value accumulator;
  std::optional<int64_t> pairStride;
};

struct LowerGemm : OpConversionPattern<GemmOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(GemmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ElementAccess access{op.hasPureTensorSemantics()};
    if (!access.onTensors && !op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "mixes tensors and memrefs");

    Value accumulator = buildAccumulator(rewriter, loc, op, access);

    // Partials start at their reduction's identity.
    SmallVector<Value> outputs(op.getOutputs());
    YieldOp yield = op.getYieldOp();
    for (auto [i, value] : llvm::enumerate(yield.getValues())) {
      auto partial = dyn_cast<PartialType>(value.getType());
      if (!partial)
        continue;
      ReductionKind kind = getPartialKind(value);
      auto floatType = dyn_cast<FloatType>(partial.getElementType());
      if (!floatType)
        return rewriter.notifyMatchFailure(op, "non-float partials");
      Value identity = arith::ConstantOp::create(
          rewriter, loc, getReductionIdentity(kind, floatType));
      outputs[i] = access.fill(rewriter, loc, identity, outputs[i]);
    }

    std::optional<int64_t> pairStride = op.getPairStride();

    // Loop bounds [B,] M, N from the accumulator; over pairs, N / 2.
    SmallVector<Value> lbs, ubs, steps;
    unsigned rank = op.isBatched() ? 3 : 2;
    for (unsigned d = 0; d < rank; ++d) {
      lbs.push_back(indexConstant(rewriter, loc, 0));
      ubs.push_back(linalg::createOrFoldDimOp(rewriter, loc, accumulator, d));
      steps.push_back(indexConstant(rewriter, loc, 1));
    }
    if (pairStride) {
      if (ShapedType::isDynamic(op.getStaticN())) {
        Value rem = arith::RemUIOp::create(
            rewriter, loc, ubs.back(),
            indexConstant(rewriter, loc, 2 * *pairStride));
        Value whole =
            arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq, rem,
                                  indexConstant(rewriter, loc, 0));
        cf::AssertOp::create(rewriter, loc, whole,
                             "coda.gemm: N must be a multiple of twice the "
                             "pair stride");
      }
      ubs.back() = arith::DivUIOp::create(rewriter, loc, ubs.back(),
                                          indexConstant(rewriter, loc, 2));
    }

    EpilogueEmitter emitter(op, access, accumulator, pairStride);
    SmallVector<Value> results;
    if (access.onTensors) {
      scf::LoopNest nest = scf::buildLoopNest(
          rewriter, loc, lbs, ubs, steps, outputs,
          [&](OpBuilder &b, Location nloc, ValueRange ivs,
              ValueRange iterArgs) -> scf::ValueVector {
            return emitter.emit(b, nloc, ivs, SmallVector<Value>(iterArgs));
          });
      results = SmallVector<Value>(nest.results);
    } else {
      scf::buildLoopNest(rewriter, loc, lbs, ubs, steps,
                         [&](OpBuilder &b, Location nloc, ValueRange ivs) {
                           emitter.emit(b, nloc, ivs, outputs);
                         });
      memref::DeallocOp::create(rewriter, loc, accumulator);
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct LowerReducePartials : OpConversionPattern<ReducePartialsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ReducePartialsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto partialsType = cast<ShapedType>(op.getPartials().getType());
    ElementAccess access{isa<RankedTensorType>(partialsType)};
    ReductionKind kind = op.getKind();
    auto elementType = cast<FloatType>(partialsType.getElementType());
    Value identity = arith::ConstantOp::create(
        rewriter, loc, getReductionIdentity(kind, elementType));
    Value init = access.fill(rewriter, loc, identity, op.getInit());
    int64_t tileDim = op.getAxis() == ReductionAxis::row
                          ? partialsType.getRank() - 1
                          : partialsType.getRank() - 2;
    auto reduce = linalg::ReduceOp::create(
        rewriter, loc, ValueRange{op.getPartials()}, ValueRange{init},
        ArrayRef<int64_t>{tileDim},
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          // args: (partial, running value)
          linalg::YieldOp::create(
              b, nloc, buildReductionCombine(b, nloc, kind, args[1], args[0]));
        });
    rewriter.replaceOp(op, reduce->getResults());
    return success();
  }
};

struct CodaLowerToLinalgPass
    : coda::impl::CodaLowerToLinalgBase<CodaLowerToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<CodaDialect>();
    // Epilogue ops disappear with their coda.gemm.
    target.addLegalOp<RowIndexOp, ColIndexOp, RowReduceOp, ColReduceOp,
                      RowSelectOp, PairMapOp, PairContractOp, InterleaveOp,
                      TransposeOp, GroupReduceOp, GroupValueOp, YieldOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    populateCodaToLinalgConversionPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateCodaToLinalgConversionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LowerGemm, LowerReducePartials>(patterns.getContext());
}
