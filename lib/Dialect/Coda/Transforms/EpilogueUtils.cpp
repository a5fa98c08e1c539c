//===- EpilogueUtils.cpp - shared helpers of the fusion passes ------------===//

#include "EpilogueUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::coda;

GemmOp mlir::coda::createGemm(RewriterBase &rewriter, Location loc, Value lhs,
                              Value rhs, bool transposeA, bool transposeB,
                              ArrayRef<EpilogueInput> inputs,
                              ValueRange outputs, EpilogueBody body) {
  MLIRContext *ctx = rewriter.getContext();
  SmallVector<Value> values;
  SmallVector<Attribute> forms;
  SmallVector<Type> argTypes = {rewriter.getF32Type()};
  SmallVector<Location> argLocs = {loc};
  for (const EpilogueInput &input : inputs) {
    values.push_back(input.value);
    forms.push_back(AccessFormAttr::get(ctx, input.form));
    argTypes.push_back(GemmOp::getInputElementType(input.value.getType()));
    argLocs.push_back(input.value.getLoc());
  }
  SmallVector<Type> resultTypes;
  for (Value output : outputs)
    if (isa<RankedTensorType>(output.getType()))
      resultTypes.push_back(output.getType());
  auto unit = [&](bool set) { return set ? rewriter.getUnitAttr() : UnitAttr(); };
  auto gemm = GemmOp::create(rewriter, loc, resultTypes, lhs, rhs, values,
                             outputs, ArrayAttr::get(ctx, forms),
                             unit(transposeB), unit(transposeA));
  OpBuilder::InsertionGuard guard(rewriter);
  Block *block =
      rewriter.createBlock(&gemm.getEpilogue(), {}, argTypes, argLocs);
  SmallVector<Value> yields = body(rewriter, *block);
  YieldOp::create(rewriter, loc, yields);
  return gemm;
}

GemmOp mlir::coda::rebuildGemm(RewriterBase &rewriter, GemmOp gemm, Value lhs,
                               Value rhs, bool transposeB,
                               ArrayRef<EpilogueInput> addedInputs,
                               ValueRange outputs, EpilogueExtender extend,
                               AccumulatorTransform transformAccumulator) {
  SmallVector<EpilogueInput> inputs;
  for (unsigned i = 0, e = gemm.getEpilogueInputs().size(); i < e; ++i)
    inputs.push_back({gemm.getEpilogueInputs()[i], gemm.getInputForm(i)});
  llvm::append_range(inputs, addedInputs);
  Block &oldBody = gemm.getBody();
  return createGemm(
      rewriter, gemm.getLoc(), lhs, rhs, gemm.getTransposeA(), transposeB,
      inputs, outputs, [&](OpBuilder &b, Block &body) {
        IRMapping mapping;
        for (unsigned i = 0, e = oldBody.getNumArguments(); i < e; ++i)
          mapping.map(oldBody.getArgument(i), body.getArgument(i));
        ValueRange addedArgs =
            body.getArguments().drop_front(oldBody.getNumArguments());
        if (transformAccumulator)
          mapping.map(oldBody.getArgument(0),
                      transformAccumulator(b, body.getArgument(0), addedArgs));
        for (Operation &op : oldBody.without_terminator())
          b.clone(op, mapping);
        return extend(b, mapping, addedArgs);
      });
}

std::optional<TileOutput> mlir::coda::getTileOutput(Value value) {
  auto result = dyn_cast<OpResult>(value);
  auto gemm = result ? dyn_cast<GemmOp>(result.getOwner()) : GemmOp();
  if (!gemm)
    return std::nullopt;
  Value yielded = gemm.getYieldOp().getValues()[result.getResultNumber()];
  if (!yielded.getType().isIntOrIndexOrFloat())
    return std::nullopt;
  return TileOutput{gemm, result, yielded};
}

Value mlir::coda::replaceTileOutputWithPairMap(
    RewriterBase &rewriter, const TileOutput &output,
    ArrayRef<EpilogueInput> addedInputs, Value destination, Type resultType,
    int64_t stride, PairRegionBuilder build) {
  GemmOp gemm = output.gemm;
  SmallVector<Value> outputs;
  SmallVector<unsigned> kept;
  for (OpResult result : gemm->getResults()) {
    if (result == output.result)
      continue;
    kept.push_back(result.getResultNumber());
    outputs.push_back(gemm.getOutputs()[result.getResultNumber()]);
  }
  outputs.push_back(destination);
  YieldOp oldYield = gemm.getYieldOp();
  Location loc = gemm.getLoc();
  GemmOp rebuilt = rebuildGemm(
      rewriter, gemm, gemm.getLhs(), gemm.getRhs(), gemm.getTransposeB(),
      addedInputs, outputs,
      [&](OpBuilder &b, IRMapping &mapping, ValueRange addedArgs) {
        SmallVector<Value> operands = {mapping.lookup(output.yielded)};
        llvm::append_range(operands, addedArgs);
        SmallVector<Type> argTypes;
        SmallVector<Location> argLocs;
        for (Value operand : operands) {
          argTypes.append(2, operand.getType());
          argLocs.append(2, loc);
        }
        auto pairMap = PairMapOp::create(b, loc, TypeRange{resultType},
                                         operands, stride);
        Block *pair = b.createBlock(&pairMap.getBody(), {}, argTypes, argLocs);
        YieldOp::create(b, loc, build(b, *pair));
        b.setInsertionPointAfter(pairMap);
        SmallVector<Value> yields;
        for (unsigned result : kept)
          yields.push_back(mapping.lookup(oldYield.getValues()[result]));
        yields.push_back(pairMap.getResult(0));
        return yields;
      });
  for (auto [i, result] : llvm::enumerate(kept))
    rewriter.replaceAllUsesWith(gemm->getResult(result), rebuilt->getResult(i));
  return rebuilt->getResults().back();
}

std::optional<SmallVector<unsigned>> mlir::coda::getReadDims(AffineMap map,
                                                             ShapedType type) {
  SmallVector<unsigned> dims;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
      dims.push_back(dim.getPosition());
      continue;
    }
    auto constant = dyn_cast<AffineConstantExpr>(expr);
    if (!constant || constant.getValue() != 0 || type.getDimSize(i) != 1)
      return std::nullopt;
  }
  return dims;
}

std::optional<AccessForm> mlir::coda::classifyAccess(AffineMap map,
                                                     ShapedType type,
                                                     unsigned numLoops) {
  if (map.getNumDims() != numLoops || map.getNumSymbols() != 0)
    return std::nullopt;
  std::optional<SmallVector<unsigned>> read = getReadDims(map, type);
  if (!read)
    return std::nullopt;
  SmallVector<unsigned> &dims = *read;
  unsigned m = numLoops - 2, n = numLoops - 1;
  SmallVector<unsigned> batch;
  if (numLoops == 3)
    batch.push_back(0);
  auto is = [&](ArrayRef<unsigned> expected) {
    return ArrayRef<unsigned>(dims) == expected;
  };
  SmallVector<unsigned> tile(batch), row(batch);
  tile.append({m, n});
  row.push_back(m);
  if (is(tile))
    return AccessForm::tile;
  if (is(row))
    return AccessForm::row;
  if (is({n}))
    return AccessForm::col;
  if (dims.empty())
    return AccessForm::scalar;
  return std::nullopt;
}

Value mlir::coda::materializeEpilogueInput(OpBuilder &builder, Location loc,
                                           Value value, AffineMap map,
                                           AccessForm form) {
  auto type = cast<RankedTensorType>(value.getType());
  if (form == AccessForm::scalar) {
    SmallVector<Value> zeros(
        type.getRank(), arith::ConstantIndexOp::create(builder, loc, 0));
    return tensor::ExtractOp::create(builder, loc, value, zeros);
  }
  // Collapse the size-1 dimensions read at constant 0 into their neighbours.
  SmallVector<ReassociationIndices> groups;
  SmallVector<int64_t> shape;
  ReassociationIndices pending;
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    pending.push_back(i);
    if (isa<AffineDimExpr>(expr)) {
      groups.push_back(pending);
      shape.push_back(type.getDimSize(i));
      pending.clear();
    }
  }
  if (groups.size() == static_cast<size_t>(type.getRank()))
    return value;
  if (!pending.empty())
    groups.back().append(pending.begin(), pending.end());
  auto collapsedType = RankedTensorType::get(shape, type.getElementType());
  return tensor::CollapseShapeOp::create(builder, loc, collapsedType, value,
                                         groups);
}

Value mlir::coda::createEmptyWithRows(OpBuilder &builder, Location loc,
                                      GemmOp gemm, ArrayRef<int64_t> trailing,
                                      Type elementType) {
  SmallVector<int64_t> shape = {gemm.getStaticM()};
  shape.append(trailing.begin(), trailing.end());
  SmallVector<Value> dynamicSizes;
  if (ShapedType::isDynamic(shape[0]))
    dynamicSizes.push_back(tensor::DimOp::create(builder, loc, gemm.getLhs(),
                                                 gemm.getLhsMDim()));
  return tensor::EmptyOp::create(builder, loc, shape, elementType,
                                 dynamicSizes);
}

Value mlir::coda::createEmptyWithRows(OpBuilder &builder, Location loc,
                                      Value rowSource,
                                      ArrayRef<int64_t> trailing,
                                      Type elementType) {
  auto sourceType = cast<RankedTensorType>(rowSource.getType());
  SmallVector<int64_t> shape = {sourceType.getDimSize(0)};
  shape.append(trailing.begin(), trailing.end());
  SmallVector<Value> dynamicSizes;
  if (ShapedType::isDynamic(shape[0]))
    dynamicSizes.push_back(tensor::DimOp::create(builder, loc, rowSource, 0));
  return tensor::EmptyOp::create(builder, loc, shape, elementType,
                                 dynamicSizes);
}

std::optional<llvm::SmallSetVector<BlockArgument, 4>>
mlir::coda::readBlockArguments(Value value, Block &block) {
  llvm::SmallSetVector<BlockArgument, 4> args;
  SmallVector<Value> worklist = {value};
  DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value current = worklist.pop_back_val();
    if (!seen.insert(current).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(current)) {
      if (arg.getOwner() != &block)
        return std::nullopt;
      args.insert(arg);
      continue;
    }
    Operation *def = current.getDefiningOp();
    if (isa<linalg::IndexOp>(def))
      return std::nullopt;
    llvm::append_range(worklist, def->getOperands());
  }
  return args;
}

bool mlir::coda::isEpilogueComputeOp(Operation *op) {
  if (!isa_and_nonnull<arith::ArithDialect, math::MathDialect>(
          op->getDialect()))
    return false;
  auto scalar = [](Type type) { return type.isIntOrIndexOrFloat(); };
  return llvm::all_of(op->getOperandTypes(), scalar) &&
         llvm::all_of(op->getResultTypes(), scalar) &&
         op->getNumRegions() == 0;
}

/// Values `op` uses that are defined outside `block`.
static SmallVector<Value> capturedValues(Operation &op, Block &block) {
  SmallVector<Value> captured;
  for (Value operand : op.getOperands()) {
    Operation *def = operand.getDefiningOp();
    Block *owner = def ? def->getBlock()
                       : cast<BlockArgument>(operand).getOwner();
    if (owner != &block)
      captured.push_back(operand);
  }
  return captured;
}

static bool isCapturedScalar(Value value) {
  Operation *def = value.getDefiningOp();
  return !(def && def->hasTrait<OpTrait::ConstantLike>()) &&
         isa<FloatType>(value.getType());
}

bool mlir::coda::hasOnlyEpilogueComputeOps(Block &block, bool allowIndex,
                                           bool allowCapturedScalars) {
  return llvm::all_of(block, [&](Operation &op) {
    if (!op.hasTrait<OpTrait::IsTerminator>() && !isEpilogueComputeOp(&op) &&
        !(allowIndex && isa<linalg::IndexOp>(op)))
      return false;
    return llvm::all_of(capturedValues(op, block), [&](Value value) {
      Operation *def = value.getDefiningOp();
      return (def && def->hasTrait<OpTrait::ConstantLike>()) ||
             (allowCapturedScalars && isCapturedScalar(value));
    });
  });
}

SmallVector<Value> mlir::coda::capturedScalars(Block &block) {
  SmallVector<Value> scalars;
  for (Operation &op : block)
    for (Value value : capturedValues(op, block))
      if (isCapturedScalar(value) && !llvm::is_contained(scalars, value))
        scalars.push_back(value);
  return scalars;
}

void mlir::coda::cloneCapturedConstants(OpBuilder &builder, Block &block,
                                        IRMapping &mapping) {
  for (Operation &op : block)
    for (Value value : capturedValues(op, block))
      if (!mapping.contains(value))
        mapping.map(value, builder.clone(*value.getDefiningOp())->getResult(0));
}

bool mlir::coda::isElementwise(linalg::GenericOp generic) {
  if (generic.getNumReductionLoops() != 0)
    return false;
  for (OpOperand &init : generic.getDpsInitsMutable())
    if (generic.payloadUsesValueFromOperand(&init))
      return false;
  return true;
}

bool mlir::coda::isAvailableBefore(Value value, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    return arg.getOwner()->findAncestorOpInBlock(*op) != nullptr;
  Operation *def = value.getDefiningOp();
  Operation *ancestor = def->getBlock()->findAncestorOpInBlock(*op);
  return ancestor && ancestor != def && def->isBeforeInBlock(ancestor);
}

std::optional<APFloat> mlir::coda::getFillConstant(Value value) {
  while (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
      value.getDefiningOp()))
    value = value.getDefiningOp()->getOperand(0);
  auto fill = value.getDefiningOp<linalg::FillOp>();
  auto constant = fill ? fill.getInputs()[0].getDefiningOp<arith::ConstantOp>()
                       : arith::ConstantOp();
  auto attr = constant ? dyn_cast<FloatAttr>(constant.getValue()) : nullptr;
  if (!attr)
    return std::nullopt;
  return attr.getValue();
}
