//===- Fp8Conversions.cpp - FP8 conversions as PTX cvt --------------------===//
//
// LLVM has no 8-bit float type, so the conversion to LLVM cannot lower
// `arith.truncf` to f8E4M3FN / f8E5M2 or `arith.extf` from them. In GPU
// kernels they become sm_89+'s `cvt` instructions here, with arith's
// meaning kept: `cvt.rn.satfinite.{e4m3,e5m2}x2.f32` rounds to nearest even
// as `arith.truncf` does but saturates (PTX has no unsaturated form), so a
// value that rounds beyond the finite range is given what `arith.truncf`
// gives it (NaN in f8E4M3FN, which has no infinity, made before the cvt;
// the signed infinity in f8E5M2, after it), unless constants clamp it
// within the range.
// The GEMM epilogue converts its output pairs through `truncToFp8` too.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <limits>

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFP8TONVVM
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

bool isFp8(Type type) { return isa<Float8E4M3FNType, Float8E5M2Type>(type); }

double toDouble(APFloat value) {
  bool lost;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return value.convertToDouble();
}

std::optional<double> constantValue(Value value) {
  FloatAttr attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return std::nullopt;
  return attr.getValueAsDouble();
}

/// Whether constants clamp `value` into [-limit, limit]: a min and a max
/// (arith's NaN-propagating or NaN-ignoring forms) with constant bounds, in
/// either nesting and operand order.
bool clampedWithin(Value value, double limit) {
  std::optional<double> lower, upper;
  for (int depth = 0; depth < 2; ++depth) {
    Operation *op = value.getDefiningOp();
    bool isMin = isa_and_nonnull<arith::MinimumFOp, arith::MinNumFOp>(op);
    bool isMax = isa_and_nonnull<arith::MaximumFOp, arith::MaxNumFOp>(op);
    if (!isMin && !isMax)
      break;
    Value next = op->getOperand(0);
    std::optional<double> bound = constantValue(op->getOperand(1));
    if (!bound) {
      next = op->getOperand(1);
      bound = constantValue(op->getOperand(0));
    }
    if (!bound)
      break;
    if (isMin)
      upper = upper ? std::min(*upper, *bound) : *bound;
    else
      lower = lower ? std::max(*lower, *bound) : *bound;
    value = next;
  }
  return lower && upper && *lower >= -limit && *upper <= limit;
}

/// Where f32 `x` rounds beyond `type`'s finite range (NaN excluded): |x|
/// above half an ulp over the largest finite value, or at it when the tie's
/// even neighbour is the next power of two.
Value beyondRange(ImplicitLocOpBuilder &b, Value x, FloatType type) {
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  APFloat largest = APFloat::getLargest(semantics);
  int precision = APFloat::semanticsPrecision(semantics);
  double threshold =
      toDouble(largest) + std::ldexp(1.0, ilogb(largest) - precision);
  APFloat midpoint(threshold);
  bool lost;
  midpoint.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
  auto predicate = midpoint.isFinite() ? arith::CmpFPredicate::OGT
                                       : arith::CmpFPredicate::OGE;
  Value limit = arith::ConstantOp::create(
      b, b.getF32FloatAttr(static_cast<float>(threshold)));
  return arith::CmpFOp::create(b, predicate, math::AbsFOp::create(b, x), limit);
}

/// `x` made ready for the saturating cvt to `type`: in a type without
/// infinities, a value beyond the range becomes NaN first, which cvt keeps
/// (arith.truncf's NaN; its sign is not kept).
Value beforeCvt(ImplicitLocOpBuilder &b, Value x, FloatType type) {
  if (APFloat::semanticsHasInf(type.getFloatSemantics()))
    return x;
  return arith::SelectOp::create(
      b, beyondRange(b, x, type),
      arith::ConstantOp::create(
          b, b.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN())),
      x);
}

/// `byte`, cvt's saturated code for `x`, with the infinity where `x` lies
/// beyond a range that has one: cvt gives the largest finite value of x's
/// sign (S.11110.11 in f8E5M2), the infinity is the next code.
Value afterCvt(ImplicitLocOpBuilder &b, Value x, Value byte, FloatType type) {
  if (!APFloat::semanticsHasInf(type.getFloatSemantics()))
    return byte;
  return arith::SelectOp::create(
      b, beyondRange(b, x, type),
      arith::AddIOp::create(b, byte, arith::ConstantIntOp::create(b, 1, 8)),
      byte);
}

/// `value` (f8) converted exactly to `to` (f16, bf16, f32 or f64).
Value extendFromFp8(ImplicitLocOpBuilder &b, Value value, FloatType to) {
  auto type = cast<FloatType>(value.getType());
  Value byte = arith::BitcastOp::create(b, b.getI8Type(), value);
  Value zero = arith::ConstantOp::create(b, b.getI8IntegerAttr(0));
  SmallVector<Value> elements = {byte, zero};
  Value bytes = vector::FromElementsOp::create(
      b, VectorType::get({2}, b.getI8Type()), elements);
  Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
      b, VectorType::get({2}, b.getF16Type()), bytes, b.getBoolAttr(false),
      TypeAttr::get(type));
  Value half = vector::ExtractOp::create(b, halves, ArrayRef<int64_t>{0});
  if (to.isF16())
    return half;
  if (to.isBF16()) // Exact: every f8 value is a bf16 value.
    return arith::TruncFOp::create(
        b, to, arith::ExtFOp::create(b, b.getF32Type(), half));
  return arith::ExtFOp::create(b, to, half);
}

/// Why `op` (a conversion to or from f8) cannot become a cvt, or nothing.
std::optional<StringRef> unsupported(Operation *op) {
  Type in = op->getOperand(0).getType(), out = op->getResult(0).getType();
  if (isa<ShapedType>(in))
    return StringRef("converts vectors; --coda-fp8-to-nvvm converts "
                     "scalars");
  if (auto trunc = dyn_cast<arith::TruncFOp>(op)) {
    if (!isa<Float32Type, Float16Type, BFloat16Type>(in))
      return StringRef("converts from a type other than f32, f16 or bf16 "
                       "to FP8 (from f64, two roundings would differ from "
                       "one)");
    if (trunc.getRoundingmode() &&
        *trunc.getRoundingmode() != arith::RoundingMode::to_nearest_even)
      return StringRef("rounds other than to nearest even, which is all "
                       "PTX's FP8 conversion does");
  }
  if (isa<arith::ExtFOp>(op) &&
      !isa<Float16Type, BFloat16Type, Float32Type, Float64Type>(out))
    return StringRef("extends FP8 to a type other than f16, bf16, f32 or f64");
  return std::nullopt;
}

struct TruncFToFp8 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    if (!isFp8(op.getType()) || unsupported(op))
      return rewriter.notifyMatchFailure(op, "not a scalar FP8 truncation");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Value in = op.getIn();
    if (!in.getType().isF32())
      in = arith::ExtFOp::create(b, b.getF32Type(), in);
    rewriter.replaceOp(op, truncToFp8(b, {in}, cast<FloatType>(op.getType())));
    return success();
  }
};

struct ExtFFromFp8 : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    if (!isFp8(op.getIn().getType()) || unsupported(op))
      return rewriter.notifyMatchFailure(op, "not a scalar FP8 extension");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    rewriter.replaceOp(
        op, extendFromFp8(b, op.getIn(), cast<FloatType>(op.getType())));
    return success();
  }
};

struct CodaFp8ToNVVMPass : coda::impl::CodaFp8ToNVVMBase<CodaFp8ToNVVMPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFp8ToNVVMConversionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // What the patterns left is what they cannot convert.
    WalkResult result = getOperation()->walk([](Operation *op) {
      if (!isa<arith::TruncFOp, arith::ExtFOp>(op) ||
          (!isFp8(getElementTypeOrSelf(op->getOperand(0).getType())) &&
           !isFp8(getElementTypeOrSelf(op->getResult(0).getType()))))
        return WalkResult::advance();
      op->emitOpError("cannot be lowered for the GPU: it ")
          << unsupported(op).value_or("has no PTX conversion");
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

SmallVector<Value> gpu_lowering::truncToFp8(ImplicitLocOpBuilder &b,
                                            ArrayRef<Value> values,
                                            FloatType type) {
  double limit = toDouble(APFloat::getLargest(type.getFloatSemantics()));
  auto pairType = VectorType::get({2}, b.getI8Type());
  SmallVector<Value> result;
  for (size_t e = 0; e < values.size(); e += 2) {
    // The range check is left out where constants clamp the value.
    auto checked = [&](Value v) { return !clampedWithin(v, limit); };
    Value lo = checked(values[e]) ? beforeCvt(b, values[e], type) : values[e];
    Value hi = e + 1 >= values.size()
                   ? arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f))
               : checked(values[e + 1]) ? beforeCvt(b, values[e + 1], type)
                                        : values[e + 1];
    // The i16 holds `a` in its upper byte: element 0 of the pair is `b`.
    Value pair = NVVM::ConvertF32x2ToF8x2Op::create(
        b, pairType, /*a=*/hi, /*b=*/lo, NVVM::FPRoundingMode::RN,
        NVVM::SaturationMode::SATFINITE, /*relu=*/false, type);
    for (size_t i = e; i < std::min(e + 2, values.size()); ++i) {
      Value byte =
          vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{int64_t(i - e)});
      if (checked(values[i]))
        byte = afterCvt(b, values[i], byte, type);
      result.push_back(arith::BitcastOp::create(b, type, byte));
    }
  }
  return result;
}

void mlir::coda::populateFp8ToNVVMConversionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<TruncFToFp8, ExtFFromFp8>(patterns.getContext());
}
