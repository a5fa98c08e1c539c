//===- FastMathToNVVM.cpp - afn arithmetic as PTX's approximations --------===//
//
// An f32 op marked `afn` in a GPU kernel becomes the single approximate
// instruction the hardware has for it, in its flush-to-zero form: the
// non-flushing forms that the usual lowering selects (libdevice's fast
// exponential, LLVM's `div.approx.f32`) wrap each multi-function unit
// instruction in a test, two scalings and a select for subnormal ranges,
// four more instructions per value in an epilogue that issues from one
// warp per scheduler beside the other consumer's K loop.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::coda {
#define GEN_PASS_DEF_CODAFASTMATHTONVVM
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Whether `op` is a scalar f32 op that allows approximate functions.
bool approximateF32(Operation *op) {
  auto flags = dyn_cast<arith::ArithFastMathInterface>(op);
  if (!flags || !op->getResult(0).getType().isF32())
    return false;
  arith::FastMathFlagsAttr attr = flags.getFastMathFlagsAttr();
  return attr &&
         arith::bitEnumContainsAll(attr.getValue(), arith::FastMathFlags::afn);
}

/// 2^x by ex2.approx.ftz.f32.
Value exp2Approx(OpBuilder &b, Location loc, Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, loc, b.getF32Type(),
             b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"), ValueRange{x})
      .getResult(0);
}

template <typename ExpOp> struct ApproximateExp : OpRewritePattern<ExpOp> {
  using OpRewritePattern<ExpOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ExpOp op,
                                PatternRewriter &rewriter) const override {
    if (!approximateF32(op))
      return rewriter.notifyMatchFailure(op, "not an f32 op marked afn");
    Value x = op.getOperand();
    if constexpr (std::is_same_v<ExpOp, math::ExpOp>)
      x = arith::MulFOp::create(
          rewriter, op.getLoc(), x,
          arith::ConstantOp::create(
              rewriter, op.getLoc(),
              rewriter.getF32FloatAttr(static_cast<float>(M_LOG2E))));
    rewriter.replaceOp(op, exp2Approx(rewriter, op.getLoc(), x));
    return success();
  }
};

/// a / b by div.approx.ftz.f32 (a times an approximate reciprocal of b,
/// which ptxas computes once for the divisions that share b).
struct ApproximateDivision : OpRewritePattern<arith::DivFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::DivFOp op,
                                PatternRewriter &rewriter) const override {
    if (!approximateF32(op))
      return rewriter.notifyMatchFailure(op, "not an f32 op marked afn");
    rewriter.replaceOpWithNewOp<LLVM::CallIntrinsicOp>(
        op, rewriter.getF32Type(),
        rewriter.getStringAttr("llvm.nvvm.div.approx.ftz.f"),
        ValueRange{op.getLhs(), op.getRhs()});
    return success();
  }
};

/// tanh(x) by tanh.approx.f32 (one multi-function unit instruction, about
/// 2^-11 relative error) in place of libdevice's exponential, reciprocal and
/// polynomial. NVVM has no intrinsic for it: the instruction is inline PTX.
struct ApproximateTanh : OpRewritePattern<math::TanhOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::TanhOp op,
                                PatternRewriter &rewriter) const override {
    if (!approximateF32(op))
      return rewriter.notifyMatchFailure(op, "not an f32 op marked afn");
    rewriter.replaceOpWithNewOp<LLVM::InlineAsmOp>(
        op, rewriter.getF32Type(), ValueRange{op.getOperand()},
        "tanh.approx.f32 $0, $1;", "=f,f", /*has_side_effects=*/false,
        /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
        LLVM::AsmDialectAttr(), ArrayAttr());
    return success();
  }
};

struct CodaFastMathToNVVMPass
    : coda::impl::CodaFastMathToNVVMBase<CodaFastMathToNVVMPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFastMathToNVVMConversionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::coda::populateFastMathToNVVMConversionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<ApproximateExp<math::ExpOp>, ApproximateExp<math::Exp2Op>,
               ApproximateDivision, ApproximateTanh>(patterns.getContext());
}
