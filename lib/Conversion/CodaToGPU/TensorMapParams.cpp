//===- TensorMapParams.cpp - TMA descriptors as grid-constant parameters --===//
//
// `--coda-to-gpu` passes each TMA descriptor to its kernel by value, as an
// `!llvm.array<16 x i64>` parameter stored into an aligned alloca whose
// address the TMA instructions take. TMA cannot read a descriptor in local
// memory; after the conversion to NVVM this pass makes that address the
// parameter's own: a `byval` pointer in the kernel's parameter space marked
// `nvvm.grid_constant`, which NVPTX addresses in place (`cvta.param`).
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODATENSORMAPPARAMS
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

Type gpu_lowering::tensorMapParamType(MLIRContext *ctx) {
  return LLVM::LLVMArrayType::get(IntegerType::get(ctx, 64), 16);
}

Value gpu_lowering::tensorMapParamAddress(ImplicitLocOpBuilder &b,
                                          Value param) {
  Value one =
      LLVM::ConstantOp::create(b, b.getI32Type(), b.getI32IntegerAttr(1));
  Value slot = LLVM::AllocaOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext()), param.getType(), one,
      /*alignment=*/64);
  LLVM::StoreOp::create(b, param, slot);
  return slot;
}

namespace {

/// Rewrites the descriptor parameter `index` of `kernel` (see the file
/// comment); fails unless its one use is the store into its alloca.
LogicalResult passByValue(LLVM::LLVMFuncOp kernel, unsigned index) {
  BlockArgument param = kernel.getArgument(index);
  auto store = param.hasOneUse()
                   ? dyn_cast<LLVM::StoreOp>(*param.getUsers().begin())
                   : LLVM::StoreOp();
  auto slot = store ? store.getAddr().getDefiningOp<LLVM::AllocaOp>()
                    : LLVM::AllocaOp();
  if (!slot || store.getValue() != param ||
      llvm::any_of(slot->getUsers(), [&](Operation *user) {
        auto other = dyn_cast<LLVM::StoreOp>(user);
        return other && other != store && other.getAddr() == slot;
      }))
    return kernel.emitError()
           << "TMA descriptor parameter #" << index
           << " is not only stored into its own alloca; it cannot be passed "
              "by value";
  MLIRContext *ctx = kernel.getContext();
  Type byValueType = param.getType();
  Type ptrType = LLVM::LLVMPointerType::get(ctx);
  store.erase();
  param.setType(ptrType);
  slot.getResult().replaceAllUsesWith(param);
  slot.erase();
  kernel.setArgAttr(index, LLVM::LLVMDialect::getByValAttrName(),
                    TypeAttr::get(byValueType));
  kernel.setArgAttr(index, LLVM::LLVMDialect::getAlignAttrName(),
                    IntegerAttr::get(IntegerType::get(ctx, 64), 64));
  kernel.setArgAttr(index, NVVM::NVVMDialect::getGridConstantAttrName(),
                    UnitAttr::get(ctx));
  return success();
}

struct CodaTensorMapParamsPass
    : coda::impl::CodaTensorMapParamsBase<CodaTensorMapParamsPass> {
  void runOnOperation() override {
    bool anyFailed = false;
    getOperation().walk([&](LLVM::LLVMFuncOp kernel) {
      if (!kernel->hasAttr(kTensorMapParamsAttr))
        return;
      if (kernel.isExternal() ||
          !kernel->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName())) {
        kernel.emitError() << "'" << kTensorMapParamsAttr
                           << "' is only meaningful on an NVVM kernel "
                              "definition";
        anyFailed = true;
        return;
      }
      Type descriptor = tensorMapParamType(kernel.getContext());
      SmallVector<Type> inputs;
      for (unsigned i = 0, e = kernel.getNumArguments(); i < e; ++i) {
        if (kernel.getArgument(i).getType() == descriptor &&
            failed(passByValue(kernel, i)))
          anyFailed = true;
        inputs.push_back(kernel.getArgument(i).getType());
      }
      auto type = kernel.getFunctionType();
      kernel.setFunctionType(LLVM::LLVMFunctionType::get(
          type.getReturnType(), inputs, type.isVarArg()));
      kernel->removeAttr(kTensorMapParamsAttr);
    });
    if (anyFailed)
      signalPassFailure();
  }
};

} // namespace
