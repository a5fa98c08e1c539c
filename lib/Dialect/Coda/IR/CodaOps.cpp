//===- CodaOps.cpp - coda operations --------------------------------------===//
//
// Parsers, printers and verifiers of the coda operations.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::coda;

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

static std::string formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "a scalar";
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      shape, os,
      [&](int64_t dim) {
        if (ShapedType::isDynamic(dim))
          os << '?';
        else
          os << dim;
      },
      "x");
  return text;
}

/// Checks that `type` has the rank of `expected` and that every static pair of
/// sizes agrees. `what` names the operand in the message; `fix`, when given,
/// is attached to it as a note.
static LogicalResult checkShape(Operation *op, const Twine &what,
                                ShapedType type, ArrayRef<int64_t> expected,
                                StringRef fix = {}) {
  bool ok = type.getRank() == static_cast<int64_t>(expected.size());
  for (unsigned i = 0; ok && i < expected.size(); ++i) {
    int64_t got = type.getDimSize(i);
    if (!ShapedType::isDynamic(got) && !ShapedType::isDynamic(expected[i]) &&
        got != expected[i])
      ok = false;
  }
  if (ok)
    return success();
  InFlightDiagnostic diag = op->emitOpError()
                            << "expects " << what << " of shape "
                            << formatShape(expected) << ", got "
                            << formatShape(type.getShape());
  if (!fix.empty())
    diag.attachNote() << fix;
  return diag;
}

static int64_t ceilDivStatic(int64_t size, int64_t tile) {
  if (ShapedType::isDynamic(size))
    return ShapedType::kDynamic;
  return llvm::divideCeil(size, tile);
}

/// True for the types an epilogue value may have (besides the sink types).
static bool isEpilogueScalarType(Type type) {
  return type.isIntOrIndexOrFloat();
}

static bool isSinkType(Type type) {
  return isa<PartialType, PairType, InterleavedType, RowType, GroupedType,
             TransposedType>(type);
}

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

int64_t GemmOp::getStaticM() { return getLhsType().getDimSize(getLhsMDim()); }

int64_t GemmOp::getStaticK() { return getLhsType().getDimSize(getLhsKDim()); }

int64_t GemmOp::getStaticN() { return getRhsType().getDimSize(getRhsNDim()); }

int64_t GemmOp::getStaticBatch() {
  return isBatched() ? getLhsType().getDimSize(0) : 1;
}

AccessForm GemmOp::getInputForm(unsigned i) {
  return cast<AccessFormAttr>(getInputForms()[i]).getValue();
}

YieldOp GemmOp::getYieldOp() { return cast<YieldOp>(getBody().getTerminator()); }

std::optional<int64_t> GemmOp::getPairStride() {
  for (Operation &op : getBody()) {
    if (auto map = dyn_cast<PairMapOp>(op))
      return map.getStride();
    if (auto contract = dyn_cast<PairContractOp>(op))
      return contract.getStride();
  }
  return std::nullopt;
}

Type GemmOp::getInputElementType(Type inputType) {
  if (auto shaped = dyn_cast<ShapedType>(inputType))
    return shaped.getElementType();
  return inputType;
}

void GemmOp::print(OpAsmPrinter &p) {
  p << ' ' << getLhs() << ", " << getRhs();
  if (getTransposeA())
    p << " transpose_a";
  if (getTransposeB())
    p << " transpose_b";
  p << " : " << getLhs().getType() << ", " << getRhs().getType();
  p.increaseIndent();
  p.printNewline();
  p << "epilogue(" << getAccumulatorArg();
  for (auto [i, input] : llvm::enumerate(getEpilogueInputs())) {
    p << ", " << stringifyAccessForm(getInputForm(i)) << ' ' << getInputArg(i)
      << " = " << input << " : " << input.getType();
  }
  p << ')';
  p.printNewline();
  p << "outs(" << getOutputs() << " : " << getOutputs().getTypes() << ')';
  p.decreaseIndent();
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getInputFormsAttrName(), getTransposeAAttrName(),
       getTransposeBAttrName(), "operandSegmentSizes"});
  p << ' ';
  p.printRegion(getEpilogue(), /*printEntryBlockArgs=*/false);
}

ParseResult GemmOp::parse(OpAsmParser &parser, OperationState &result) {
  MLIRContext *ctx = parser.getContext();
  OpAsmParser::UnresolvedOperand lhs, rhs;
  Type lhsType, rhsType;
  Properties &props = result.getOrAddProperties<Properties>();
  if (parser.parseOperand(lhs) || parser.parseComma() ||
      parser.parseOperand(rhs))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("transpose_a")))
    props.transpose_a = UnitAttr::get(ctx);
  if (succeeded(parser.parseOptionalKeyword("transpose_b")))
    props.transpose_b = UnitAttr::get(ctx);
  if (parser.parseColon() || parser.parseType(lhsType) || parser.parseComma() ||
      parser.parseType(rhsType))
    return failure();

  // epilogue(%acc, <form> %arg = %operand : type, ...)
  SmallVector<OpAsmParser::Argument> regionArgs;
  SmallVector<OpAsmParser::UnresolvedOperand> inputs;
  SmallVector<Type> inputTypes;
  SmallVector<Attribute> forms;
  OpAsmParser::Argument acc;
  if (parser.parseKeyword("epilogue") || parser.parseLParen() ||
      parser.parseArgument(acc))
    return failure();
  acc.type = Float32Type::get(ctx);
  regionArgs.push_back(acc);
  while (succeeded(parser.parseOptionalComma())) {
    StringRef formName;
    llvm::SMLoc formLoc = parser.getCurrentLocation();
    OpAsmParser::Argument arg;
    OpAsmParser::UnresolvedOperand input;
    Type inputType;
    if (parser.parseKeyword(&formName))
      return failure();
    std::optional<AccessForm> form = symbolizeAccessForm(formName);
    if (!form)
      return parser.emitError(formLoc)
             << "unknown access form '" << formName
             << "', expected one of tile, row, col, scalar";
    if (parser.parseArgument(arg) || parser.parseEqual() ||
        parser.parseOperand(input) || parser.parseColonType(inputType))
      return failure();
    arg.type = getInputElementType(inputType);
    regionArgs.push_back(arg);
    inputs.push_back(input);
    inputTypes.push_back(inputType);
    forms.push_back(AccessFormAttr::get(ctx, *form));
  }
  if (parser.parseRParen())
    return failure();

  // outs(%o, ... : type, ...)
  SmallVector<OpAsmParser::UnresolvedOperand> outputs;
  SmallVector<Type> outputTypes;
  if (parser.parseKeyword("outs") || parser.parseLParen() ||
      parser.parseOperandList(outputs))
    return failure();
  if (!outputs.empty() &&
      (parser.parseColon() || parser.parseTypeList(outputTypes)))
    return failure();
  if (parser.parseRParen())
    return failure();

  props.input_forms = ArrayAttr::get(ctx, forms);
  llvm::copy(ArrayRef<int32_t>({1, 1, static_cast<int32_t>(inputs.size()),
                                static_cast<int32_t>(outputs.size())}),
             props.operandSegmentSizes.begin());

  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, regionArgs, /*enableNameShadowing=*/false))
    return failure();

  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.resolveOperand(lhs, lhsType, result.operands) ||
      parser.resolveOperand(rhs, rhsType, result.operands) ||
      parser.resolveOperands(inputs, inputTypes, loc, result.operands) ||
      parser.resolveOperands(outputs, outputTypes, loc, result.operands))
    return failure();
  for (Type type : outputTypes)
    if (isa<RankedTensorType>(type))
      result.addTypes(type);
  return success();
}

void GemmOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : (*this)->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    effects.emplace_back(MemoryEffects::Read::get(), &operand,
                         SideEffects::DefaultResource::get());
    if (isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

static bool isSupportedOperandElementType(Type type) {
  return isa<Float32Type, Float16Type, BFloat16Type, Float8E4M3FNType,
             Float8E5M2Type>(type);
}

LogicalResult GemmOp::verify() {
  ShapedType lhsType = getLhsType(), rhsType = getRhsType();
  bool onTensors = isa<RankedTensorType>(lhsType);

  // Every shaped operand lives in the same world: tensors or memrefs.
  for (Value operand : getOperation()->getOperands()) {
    auto shaped = dyn_cast<ShapedType>(operand.getType());
    if (shaped && isa<RankedTensorType>(shaped) != onTensors)
      return emitOpError("expects all shaped operands to be ")
             << (onTensors ? "tensors" : "memrefs") << " like lhs, got "
             << operand.getType();
  }

  if (lhsType.getRank() != 2 && lhsType.getRank() != 3)
    return emitOpError("expects lhs of rank 2 (M x K) or 3 (B x M x K), got "
                       "rank ")
           << lhsType.getRank();
  if (rhsType.getRank() != 2 && rhsType.getRank() != lhsType.getRank())
    return emitOpError("expects rhs of rank 2")
           << (isBatched() ? " or 3" : "") << ", got rank "
           << rhsType.getRank();
  if (lhsType.getElementType() != rhsType.getElementType())
    return emitOpError("expects lhs and rhs of one element type, got ")
           << lhsType.getElementType() << " and " << rhsType.getElementType();
  if (!isSupportedOperandElementType(lhsType.getElementType()))
    return emitOpError("expects operands of bf16, f16, f32, f8E4M3FN or "
                       "f8E5M2, got ")
           << lhsType.getElementType();

  int64_t m = getStaticM(), n = getStaticN(), k = getStaticK();
  int64_t batch = getStaticBatch();
  SmallVector<int64_t> expectedRhs;
  if (rhsType.getRank() == 3)
    expectedRhs.push_back(batch);
  if (getTransposeB())
    expectedRhs.append({n, k});
  else
    expectedRhs.append({k, n});
  // Where flipping transpose_a and/or transpose_b would make lhs and rhs
  // agree on K, the fix is that flip: said in a note.
  std::string fix;
  auto kDims = [&](bool transposeA, bool transposeB) {
    return std::pair{
        lhsType.getDimSize(lhsType.getRank() - (transposeA ? 2 : 1)),
        rhsType.getDimSize(rhsType.getRank() - (transposeB ? 1 : 2))};
  };
  auto [lhsK, rhsK] = kDims(getTransposeA(), getTransposeB());
  bool kDisagrees = !ShapedType::isDynamic(lhsK) &&
                    !ShapedType::isDynamic(rhsK) && lhsK != rhsK;
  for (auto [flipA, flipB] :
       {std::pair{false, true}, {true, false}, {true, true}}) {
    if (!kDisagrees)
      break;
    auto [flippedLhsK, flippedRhsK] =
        kDims(getTransposeA() != flipA, getTransposeB() != flipB);
    if (ShapedType::isDynamic(flippedLhsK) || flippedLhsK != flippedRhsK)
      continue;
    auto flip = [](bool set, StringRef name) {
      return ((set ? "drop " : "add ") + name).str();
    };
    fix = "lhs " + formatShape(lhsType.getShape()) + " and rhs " +
          formatShape(rhsType.getShape()) +
          " agree on K in the other layout: " +
          (flipA && flipB ? flip(getTransposeA(), "transpose_a") + " and " +
                                flip(getTransposeB(), "transpose_b")
           : flipA ? flip(getTransposeA(), "transpose_a")
                   : flip(getTransposeB(), "transpose_b"));
    break;
  }
  if (failed(checkShape(
          *this, getTransposeB() ? "rhs (N x K, transpose_b)" : "rhs (K x N)",
          rhsType, expectedRhs, fix)))
    return failure();

  // Epilogue inputs.
  if (getInputForms().size() != getEpilogueInputs().size())
    return emitOpError("expects one access form per epilogue input, got ")
           << getInputForms().size() << " forms for "
           << getEpilogueInputs().size() << " inputs";
  SmallVector<int64_t> batchPrefix;
  if (isBatched())
    batchPrefix.push_back(batch);
  auto withBatch = [&](ArrayRef<int64_t> dims) {
    SmallVector<int64_t> shape(batchPrefix);
    shape.append(dims.begin(), dims.end());
    return shape;
  };
  for (auto [i, input] : llvm::enumerate(getEpilogueInputs())) {
    AccessForm form = getInputForm(i);
    auto shaped = dyn_cast<ShapedType>(input.getType());
    std::string what = ("epilogue input #" + Twine(i) + " (" +
                        stringifyAccessForm(form) + ")")
                           .str();
    if (form == AccessForm::scalar) {
      if (!isEpilogueScalarType(input.getType()))
        return emitOpError() << "expects " << what
                             << " to be an integer, index or float, got "
                             << input.getType();
      continue;
    }
    if (!shaped)
      return emitOpError() << "expects " << what << " to be a shaped value, got "
                           << input.getType();
    if (!isEpilogueScalarType(shaped.getElementType()))
      return emitOpError() << "expects " << what
                           << " to hold integers or floats, got "
                           << shaped.getElementType();
    SmallVector<int64_t> expected;
    if (form == AccessForm::tile)
      expected = withBatch({m, n});
    else if (form == AccessForm::row)
      expected = withBatch({m});
    else if (form == AccessForm::col)
      expected = {n};
    else if (form == AccessForm::pair) {
      if (!getPairStride())
        return emitOpError() << "expects pairwise ops in the epilogue to read "
                             << what << " at their pairs";
      expected = withBatch({m, ShapedType::isDynamic(n) ? n : n / 2});
    } else {
      // periodic: [B x] M x P with P dividing N.
      int64_t period = shaped.getRank() > 0
                           ? shaped.getDimSize(shaped.getRank() - 1)
                           : ShapedType::kDynamic;
      expected = withBatch({m, period});
      if (!ShapedType::isDynamic(period) && !ShapedType::isDynamic(n) &&
          (period == 0 || n % period != 0))
        return emitOpError() << "expects the period of " << what
                             << " (its last dimension, " << period
                             << ") to divide N = " << n;
    }
    if (failed(checkShape(*this, what, shaped, expected)))
      return failure();
  }

  if (getOutputs().empty())
    return emitOpError("expects at least one output");
  return success();
}

/// Checks that the only users of sink values are the gemm's terminator and
/// that every op in the epilogue is one it can run per element.
static LogicalResult verifyEpilogueOps(GemmOp gemm) {
  WalkResult walk = gemm.getEpilogue().walk([&](Operation *op) {
    bool nested = op->getParentOp() != gemm.getOperation();
    Dialect *dialect = op->getDialect();
    bool allowedDialect =
        isa_and_nonnull<arith::ArithDialect, math::MathDialect>(dialect) ||
        (nested ? isa<YieldOp>(op) : isa_and_nonnull<CodaDialect>(dialect));
    if (!allowedDialect) {
      op->emitOpError("is not allowed in ")
          << (nested ? "a pairwise region" : "a coda.gemm epilogue")
          << ": it may hold only arith and math ops"
          << (nested ? " and coda.yield" : " and coda epilogue ops");
      return WalkResult::interrupt();
    }
    for (Type type : op->getResultTypes()) {
      if (!isEpilogueScalarType(type) && !isSinkType(type)) {
        op->emitOpError("produces a value of type ")
            << type << " in an epilogue, which computes on scalars only";
        return WalkResult::interrupt();
      }
    }
    for (Value result : op->getResults()) {
      if (!isSinkType(result.getType()))
        continue;
      for (Operation *user : result.getUsers()) {
        if (user != gemm.getYieldOp().getOperation()) {
          user->emitOpError("uses ")
              << result.getType()
              << ", which only the coda.gemm terminator may yield";
          return WalkResult::interrupt();
        }
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult GemmOp::verifyRegions() {
  Block &body = getBody();
  if (body.empty() || !isa<YieldOp>(body.back()))
    return emitOpError("expects the epilogue to end with coda.yield");
  unsigned numInputs = getEpilogueInputs().size();
  if (body.getNumArguments() != 1 + numInputs)
    return emitOpError("expects the epilogue to take the accumulator and one "
                       "argument per epilogue input (")
           << 1 + numInputs << " arguments), got " << body.getNumArguments();
  if (!getAccumulatorArg().getType().isF32())
    return emitOpError("expects the accumulator argument to be f32, got ")
           << getAccumulatorArg().getType();
  for (auto [i, input] : llvm::enumerate(getEpilogueInputs())) {
    Type expected = getInputElementType(input.getType());
    if (getInputArg(i).getType() != expected)
      return emitOpError("expects epilogue argument #")
             << i + 1 << " to be " << expected << " (the element of input #"
             << i << "), got " << getInputArg(i).getType();
  }

  if (failed(verifyEpilogueOps(*this)))
    return failure();

  int64_t m = getStaticM(), n = getStaticN(), batch = getStaticBatch();
  if (std::optional<int64_t> stride = getPairStride()) {
    for (Operation &op : body) {
      int64_t opStride = isa<PairMapOp>(op)
                             ? cast<PairMapOp>(op).getStride()
                         : isa<PairContractOp>(op)
                             ? cast<PairContractOp>(op).getStride()
                             : *stride;
      if (opStride != *stride)
        return emitOpError("expects every pairwise op of the epilogue to use "
                           "one stride, got ")
               << *stride << " and " << opStride;
    }
    if (!ShapedType::isDynamic(n) && n % (2 * *stride) != 0)
      return emitOpError("has pairwise epilogue ops over columns (n, n + ")
             << *stride << ") in blocks of " << 2 * *stride << ", but N = " << n
             << " is not a multiple of " << 2 * *stride;
  }

  YieldOp yield = getYieldOp();
  if (yield.getValues().size() != getOutputs().size())
    return emitOpError("expects the epilogue to yield one value per output (")
           << getOutputs().size() << "), got " << yield.getValues().size();

  SmallVector<int64_t> prefix;
  if (isBatched())
    prefix.push_back(batch);
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(yield.getValues(), getOutputs()))) {
    auto [value, output] = pair;
    auto outType = cast<ShapedType>(output.getType());
    Type valueType = value.getType();
    SmallVector<int64_t> expected(prefix);
    Type elementType = valueType;
    std::string what;
    if (auto partial = dyn_cast<PartialType>(valueType)) {
      elementType = partial.getElementType();
      Operation *def = value.getDefiningOp();
      if (auto rowReduce = dyn_cast_or_null<RowReduceOp>(def)) {
        expected.append({m, ceilDivStatic(n, rowReduce.getTile())});
        what = "output #" + std::to_string(i) + " (row partials, tile " +
               std::to_string(rowReduce.getTile()) + ")";
      } else if (auto colReduce = dyn_cast_or_null<ColReduceOp>(def)) {
        expected.append({ceilDivStatic(m, colReduce.getTile()), n});
        what = "output #" + std::to_string(i) + " (column partials, tile " +
               std::to_string(colReduce.getTile()) + ")";
      } else {
        return emitOpError("yields a partial that no block reduction of this "
                           "epilogue produced");
      }
    } else if (auto pairType = dyn_cast<PairType>(valueType)) {
      elementType = pairType.getElementType();
      expected.append({m, ShapedType::isDynamic(n) ? n : n / 2});
      what = "output #" + std::to_string(i) + " (one value per column pair)";
    } else if (auto interleaved = dyn_cast<InterleavedType>(valueType)) {
      elementType = interleaved.getElementType();
      expected.append({m, ShapedType::isDynamic(n) ? n : 2 * n});
      what = "output #" + std::to_string(i) + " (two values per element)";
    } else if (auto transposed = dyn_cast<TransposedType>(valueType)) {
      elementType = transposed.getElementType();
      expected.append({n, m});
      what = "output #" + std::to_string(i) + " (transposed, N x M)";
    } else if (auto rowType = dyn_cast<RowType>(valueType)) {
      elementType = rowType.getElementType();
      expected.push_back(m);
      what = "output #" + std::to_string(i) + " (one value per row)";
    } else if (auto grouped = dyn_cast<GroupedType>(valueType)) {
      elementType = grouped.getElementType();
      auto group = value.getDefiningOp<GroupValueOp>();
      int64_t width = group.getWidth();
      if (group.getAxis() == ReductionAxis::row)
        expected.append({m, ceilDivStatic(n, width)});
      else
        expected.append({ceilDivStatic(m, width), n});
      what = "output #" + std::to_string(i) + " (one value per " +
             (group.getAxis() == ReductionAxis::row ? "1 x " : "") +
             std::to_string(width) +
             (group.getAxis() == ReductionAxis::row ? "" : " x 1") + " group)";
    } else {
      expected.append({m, n});
      what = "output #" + std::to_string(i) + " (tile)";
    }
    if (outType.getElementType() != elementType)
      return emitOpError("expects output #")
             << i << " to hold " << elementType
             << ", the type the epilogue yields for it, got "
             << outType.getElementType();
    if (failed(checkShape(*this, what, outType, expected)))
      return failure();
  }
  return success();
}

namespace {
/// Drops epilogue inputs whose element the epilogue never reads.
struct EraseUnusedEpilogueInputs : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<unsigned> unused;
    for (unsigned i = 0, e = op.getEpilogueInputs().size(); i < e; ++i)
      if (op.getInputArg(i).use_empty())
        unused.push_back(i);
    if (unused.empty())
      return rewriter.notifyMatchFailure(op, "every epilogue input is read");
    rewriter.modifyOpInPlace(op, [&] {
      SmallVector<Attribute> forms(op.getInputForms().getValue());
      for (unsigned i : llvm::reverse(unused)) {
        op.getEpilogueInputsMutable().erase(i);
        op.getBody().eraseArgument(1 + i);
        forms.erase(forms.begin() + i);
      }
      op.setInputFormsAttr(rewriter.getArrayAttr(forms));
    });
    return success();
  }
};
/// Reads an epilogue input once when it is listed twice with the same form.
struct MergeDuplicateEpilogueInputs : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    unsigned numInputs = op.getEpilogueInputs().size();
    for (unsigned later = 1; later < numInputs; ++later) {
      for (unsigned earlier = 0; earlier < later; ++earlier) {
        if (op.getEpilogueInputs()[earlier] != op.getEpilogueInputs()[later] ||
            op.getInputForm(earlier) != op.getInputForm(later) ||
            op.getInputArg(later).use_empty())
          continue;
        rewriter.modifyOpInPlace(op, [&] {
          op.getInputArg(later).replaceAllUsesWith(op.getInputArg(earlier));
        });
        // The now unread input goes with EraseUnusedEpilogueInputs.
        return success();
      }
    }
    return rewriter.notifyMatchFailure(op, "no input listed twice");
  }
};

/// Reads one tile output where two yield the same value into tensors of the
/// same type (a derived adjoint whose accumulator gradient is also a tile
/// input's, as a residual add's is): the later one's uses take the earlier,
/// and EraseUnusedResults drops it.
struct MergeDuplicateTileOutputs : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "writes memrefs");
    ValueRange yielded = op.getYieldOp().getValues();
    for (unsigned later = 1; later < yielded.size(); ++later) {
      if (!yielded[later].getType().isIntOrFloat() ||
          op->getResult(later).use_empty())
        continue;
      for (unsigned earlier = 0; earlier < later; ++earlier) {
        if (yielded[earlier] != yielded[later] ||
            op->getResult(earlier).getType() != op->getResult(later).getType())
          continue;
        rewriter.replaceAllUsesWith(op->getResult(later),
                                    op->getResult(earlier));
        return success();
      }
    }
    return rewriter.notifyMatchFailure(op, "no tile output written twice");
  }
};

/// Drops tensor outputs nobody reads (while at least one is read).
struct EraseUnusedResults : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "writes memrefs");
    SmallVector<unsigned> kept;
    for (OpResult result : op->getResults())
      if (!result.use_empty())
        kept.push_back(result.getResultNumber());
    if (kept.empty() || kept.size() == op->getNumResults())
      return rewriter.notifyMatchFailure(op, "no unread result to drop");
    SmallVector<Value> outputs;
    SmallVector<Type> types;
    for (unsigned i : kept) {
      outputs.push_back(op.getOutputs()[i]);
      types.push_back(op->getResult(i).getType());
    }
    auto rebuilt = GemmOp::create(rewriter, op.getLoc(), types, op.getLhs(),
                                  op.getRhs(), op.getEpilogueInputs(), outputs,
                                  op.getInputFormsAttr(),
                                  op.getTransposeBAttr(),
                                  op.getTransposeAAttr());
    rebuilt->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.inlineRegionBefore(op.getEpilogue(), rebuilt.getEpilogue(),
                                rebuilt.getEpilogue().end());
    YieldOp yield = rebuilt.getYieldOp();
    SmallVector<Value> yields;
    for (unsigned i : kept)
      yields.push_back(yield.getValues()[i]);
    rewriter.setInsertionPoint(yield);
    rewriter.replaceOpWithNewOp<YieldOp>(yield, yields);
    for (auto [newIndex, oldIndex] : llvm::enumerate(kept))
      rewriter.replaceAllUsesWith(op->getResult(oldIndex),
                                  rebuilt->getResult(newIndex));
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void GemmOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<EraseUnusedEpilogueInputs, EraseUnusedResults,
              MergeDuplicateEpilogueInputs, MergeDuplicateTileOutputs>(context);
}

//===----------------------------------------------------------------------===//
// PairMapOp and PairContractOp
//===----------------------------------------------------------------------===//

/// Prints `[stride s] (%e, %o) = %x, ... : types -> types {region}`.
static void printPairOp(OpAsmPrinter &p, Operation *op, Region &body,
                        int64_t stride) {
  Block &block = body.front();
  if (stride != 1)
    p << " stride " << stride;
  p << ' ';
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (i)
      p << ", ";
    p << '(' << block.getArgument(2 * i) << ", " << block.getArgument(2 * i + 1)
      << ") = " << operand;
  }
  p << " : " << op->getOperandTypes() << " -> " << op->getResultTypes();
  p.printOptionalAttrDictWithKeyword(op->getAttrs(), {"stride"});
  p << ' ';
  p.printRegion(body, /*printEntryBlockArgs=*/false);
}

template <typename PairOp>
static ParseResult parsePairOp(OpAsmParser &parser, OperationState &result) {
  if (succeeded(parser.parseOptionalKeyword("stride"))) {
    int64_t stride;
    if (parser.parseInteger(stride))
      return failure();
    result.getOrAddProperties<typename PairOp::Properties>().stride =
        parser.getBuilder().getI64IntegerAttr(stride);
  }
  SmallVector<OpAsmParser::Argument> args;
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  SmallVector<Type> operandTypes, resultTypes;
  auto parseOne = [&]() -> ParseResult {
    OpAsmParser::Argument even, odd;
    OpAsmParser::UnresolvedOperand operand;
    if (parser.parseLParen() || parser.parseArgument(even) ||
        parser.parseComma() || parser.parseArgument(odd) ||
        parser.parseRParen() || parser.parseEqual() ||
        parser.parseOperand(operand))
      return failure();
    args.append({even, odd});
    operands.push_back(operand);
    return success();
  };
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseCommaSeparatedList(parseOne) || parser.parseColon() ||
      parser.parseTypeList(operandTypes) || parser.parseArrow() ||
      parser.parseTypeList(resultTypes))
    return failure();
  if (operandTypes.size() != operands.size())
    return parser.emitError(loc) << "expects one type per operand ("
                                 << operands.size() << "), got "
                                 << operandTypes.size();
  for (auto [i, type] : llvm::enumerate(operandTypes)) {
    args[2 * i].type = type;
    args[2 * i + 1].type = type;
  }
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes) ||
      parser.resolveOperands(operands, operandTypes, loc, result.operands))
    return failure();
  result.addTypes(resultTypes);
  return parser.parseRegion(*result.addRegion(), args,
                            /*enableNameShadowing=*/false);
}

/// The checks both pairwise ops share: two region arguments per operand, of
/// the operand's type, and scalar operands.
static LogicalResult verifyPairRegionArgs(Operation *op, Block &block) {
  if (block.empty() || !isa<YieldOp>(block.back()))
    return op->emitOpError("expects the region to end with coda.yield");
  if (op->getNumOperands() == 0)
    return op->emitOpError("expects at least one operand");
  if (op->getNumResults() == 0)
    return op->emitOpError("expects at least one result");
  if (block.getNumArguments() != 2 * op->getNumOperands())
    return op->emitOpError("expects two region arguments (even, odd column) "
                           "per operand (")
           << 2 * op->getNumOperands() << "), got " << block.getNumArguments();
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (!isEpilogueScalarType(operand.getType()))
      return op->emitOpError("expects scalar operands, got ")
             << operand.getType();
    for (unsigned lane = 0; lane < 2; ++lane)
      if (block.getArgument(2 * i + lane).getType() != operand.getType())
        return op->emitOpError("expects region argument #")
               << 2 * i + lane << " to have the type of operand #" << i << " ("
               << operand.getType() << "), got "
               << block.getArgument(2 * i + lane).getType();
  }
  return success();
}

void PairMapOp::print(OpAsmPrinter &p) {
  printPairOp(p, *this, getBody(), getStride());
}

ParseResult PairMapOp::parse(OpAsmParser &parser, OperationState &result) {
  return parsePairOp<PairMapOp>(parser, result);
}

LogicalResult PairMapOp::verifyRegions() {
  Block &block = getBody().front();
  if (failed(verifyPairRegionArgs(*this, block)))
    return failure();
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().size() != 2 * getNumResults())
    return emitOpError("expects the region to yield two values (even, odd "
                       "column) per result (")
           << 2 * getNumResults() << "), got " << yield.getValues().size();
  for (auto [r, type] : llvm::enumerate(getResultTypes())) {
    if (!isEpilogueScalarType(type))
      return emitOpError("expects scalar results, got ") << type;
    for (unsigned lane = 0; lane < 2; ++lane)
      if (yield.getValues()[2 * r + lane].getType() != type)
        return emitOpError("expects yielded value #")
               << 2 * r + lane << " to have the type of result #" << r << " ("
               << type << "), got "
               << yield.getValues()[2 * r + lane].getType();
  }
  return success();
}

namespace {
/// Drops the results nobody reads, then the operands whose two region
/// arguments the remaining body no longer reads (while one is left): a
/// derived adjoint computes every operand's gradient, and an unread
/// gradient would keep the accumulator read (and its GEMM) alive.
struct EraseUnusedPairMapValues : OpRewritePattern<PairMapOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PairMapOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<unsigned> results;
    for (OpResult result : op->getResults())
      if (!result.use_empty())
        results.push_back(result.getResultNumber());
    if (results.empty())
      return rewriter.notifyMatchFailure(op, "dead: left to DCE");
    Block &block = op.getBody().front();
    auto yield = cast<YieldOp>(block.getTerminator());
    // The arguments the body still reads once the unread results' values
    // are no longer yielded (their computation goes with DCE).
    llvm::DenseSet<Value> live;
    for (unsigned r : results)
      for (unsigned lane = 0; lane < 2; ++lane)
        live.insert(yield.getValues()[2 * r + lane]);
    SmallVector<Value> pending(live.begin(), live.end());
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      Operation *def = value.getDefiningOp();
      if (!def)
        continue;
      for (Value operand : def->getOperands())
        if (live.insert(operand).second)
          pending.push_back(operand);
    }
    SmallVector<unsigned> operands;
    for (unsigned i = 0, e = op.getNumOperands(); i < e; ++i)
      if (live.contains(block.getArgument(2 * i)) ||
          live.contains(block.getArgument(2 * i + 1)))
        operands.push_back(i);
    if (operands.empty())
      operands.push_back(0);
    if (results.size() == op.getNumResults() &&
        operands.size() == op.getNumOperands())
      return rewriter.notifyMatchFailure(op, "every value is read");
    SmallVector<Value> kept;
    for (unsigned i : operands)
      kept.push_back(op.getOperand(i));
    SmallVector<Type> types;
    for (unsigned r : results)
      types.push_back(op->getResult(r).getType());
    auto rebuilt = PairMapOp::create(rewriter, op.getLoc(), types, kept,
                                     op.getStrideAttr());
    rewriter.inlineRegionBefore(op.getBody(), rebuilt.getBody(),
                                rebuilt.getBody().end());
    Block &body = rebuilt.getBody().front();
    SmallVector<Value> yields;
    for (unsigned r : results)
      for (unsigned lane = 0; lane < 2; ++lane)
        yields.push_back(yield.getValues()[2 * r + lane]);
    rewriter.setInsertionPoint(yield);
    rewriter.replaceOpWithNewOp<YieldOp>(yield, yields);
    // The ops no kept value reads first (users before their operands), so
    // that the dropped arguments have no uses left.
    SmallVector<Operation *> unread;
    for (Operation &inner : body.without_terminator())
      if (llvm::none_of(inner.getResults(),
                        [&](Value v) { return live.contains(v); }))
        unread.push_back(&inner);
    for (Operation *inner : llvm::reverse(unread))
      rewriter.eraseOp(inner);
    llvm::BitVector erased(body.getNumArguments(), true);
    for (unsigned i : operands)
      erased.reset(2 * i, 2 * i + 2);
    body.eraseArguments(erased);
    for (auto [newIndex, oldIndex] : llvm::enumerate(results))
      rewriter.replaceAllUsesWith(op->getResult(oldIndex),
                                  rebuilt->getResult(newIndex));
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void PairMapOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<EraseUnusedPairMapValues>(context);
}

void PairContractOp::print(OpAsmPrinter &p) {
  printPairOp(p, *this, getBody(), getStride());
}

ParseResult PairContractOp::parse(OpAsmParser &parser,
                                  OperationState &result) {
  return parsePairOp<PairContractOp>(parser, result);
}

LogicalResult PairContractOp::verifyRegions() {
  Block &block = getBody().front();
  if (failed(verifyPairRegionArgs(*this, block)))
    return failure();
  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().size() != getNumResults())
    return emitOpError("expects the region to yield one value per result (")
           << getNumResults() << "), got " << yield.getValues().size();
  for (auto [r, type] : llvm::enumerate(getResultTypes())) {
    Type element = cast<PairType>(type).getElementType();
    if (yield.getValues()[r].getType() != element)
      return emitOpError("expects yielded value #")
             << r << " to be " << element << " (result #" << r << " is "
             << type << "), got " << yield.getValues()[r].getType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ReducePartialsOp
//===----------------------------------------------------------------------===//

void ReducePartialsOp::build(OpBuilder &builder, OperationState &state,
                             Value partials, Value init, ReductionKind kind,
                             ReductionAxis axis) {
  Type resultType = isa<RankedTensorType>(init.getType()) ? init.getType()
                                                          : Type();
  build(builder, state, resultType, partials, init,
        ReductionKindAttr::get(builder.getContext(), kind),
        ReductionAxisAttr::get(builder.getContext(), axis));
}

LogicalResult ReducePartialsOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location,
    ValueRange operands, DictionaryAttr attributes,
    OpaqueProperties properties, RegionRange regions,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  if (operands.size() == 2 && isa<RankedTensorType>(operands[1].getType()))
    inferredReturnTypes.push_back(operands[1].getType());
  return success();
}

void ReducePartialsOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (isa<MemRefType>(getPartials().getType()))
    effects.emplace_back(MemoryEffects::Read::get(), &getPartialsMutable(),
                         SideEffects::DefaultResource::get());
  if (isa<MemRefType>(getInit().getType()))
    effects.emplace_back(MemoryEffects::Write::get(), &getInitMutable(),
                         SideEffects::DefaultResource::get());
}

LogicalResult ReducePartialsOp::verify() {
  auto partials = cast<ShapedType>(getPartials().getType());
  auto init = cast<ShapedType>(getInit().getType());
  if (isa<RankedTensorType>(partials) != isa<RankedTensorType>(init))
    return emitOpError("expects partials and init to be both tensors or both "
                       "memrefs");
  if (partials.getRank() != 2 && partials.getRank() != 3)
    return emitOpError("expects partials of rank 2 or 3 (with a batch "
                       "dimension), got rank ")
           << partials.getRank();
  if (!isa<FloatType>(partials.getElementType()) ||
      partials.getElementType() != init.getElementType())
    return emitOpError("expects partials and init of one float element type, "
                       "got ")
           << partials.getElementType() << " and " << init.getElementType();
  // Row partials are [B x] M x T, column partials [B x] T x N: drop T.
  int64_t tileDim = getAxis() == ReductionAxis::row ? partials.getRank() - 1
                                                    : partials.getRank() - 2;
  SmallVector<int64_t> expected;
  for (int64_t d = 0; d < partials.getRank(); ++d)
    if (d != tileDim)
      expected.push_back(partials.getDimSize(d));
  return checkShape(*this, "init (the partials without their tile dimension)",
                    init, expected);
}

#define GET_OP_CLASSES
#include "coda/Dialect/Coda/IR/CodaOps.cpp.inc"
