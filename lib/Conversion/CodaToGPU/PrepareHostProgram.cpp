//===- PrepareHostProgram.cpp - host functions the runtime can run --------===//
//
// Two rewrites of bufferized host code that let the runtime run a function
// whole (docs/KernelABI.md, "Functions"): results of static shape become
// caller-provided out-parameters, and copies become kernels.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAPREPAREHOSTPROGRAM
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;

namespace {

/// Whether every memref result of `function` has a static shape and the
/// identity layout (what an out-parameter the caller allocates needs).
bool hasStaticResults(func::FuncOp function) {
  return llvm::all_of(function.getResultTypes(), [](Type type) {
    auto memref = dyn_cast<MemRefType>(type);
    return !memref ||
           (memref.hasStaticShape() && memref.getLayout().isIdentity());
  });
}

/// Makes the memref results of the external function `callee` trailing
/// out-parameters, each call allocating them (upstream's
/// promoteBufferResultsToOutParams leaves declarations alone).
void externalResultsToOutParams(func::FuncOp callee, ModuleOp module) {
  FunctionType type = callee.getFunctionType();
  SmallVector<Type> inputs(type.getInputs());
  llvm::append_range(inputs, type.getResults());
  SmallVector<DictionaryAttr> argAttrs;
  callee.getAllArgAttrs(argAttrs);
  argAttrs.resize(inputs.size(), DictionaryAttr::get(callee.getContext()));
  callee.setFunctionType(FunctionType::get(callee.getContext(), inputs, {}));
  callee.setAllArgAttrs(argAttrs);
  callee.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
  std::optional<SymbolTable::UseRange> uses = callee.getSymbolUses(module);
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto call = dyn_cast<func::CallOp>(use.getUser());
    if (!call)
      continue;
    OpBuilder b(call);
    SmallVector<Value> operands(call.getArgOperands());
    for (Value result : call.getResults()) {
      Value buffer = memref::AllocOp::create(
          b, call.getLoc(), cast<MemRefType>(result.getType()));
      result.replaceAllUsesWith(buffer);
      operands.push_back(buffer);
    }
    func::CallOp::create(b, call.getLoc(), callee, operands);
    call.erase();
  }
}

struct CodaPrepareHostProgramPass
    : coda::impl::CodaPrepareHostProgramBase<CodaPrepareHostProgramPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (func::FuncOp function : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (function.isExternal() && function.getNumResults() &&
          llvm::all_of(function.getResultTypes(), llvm::IsaPred<MemRefType>) &&
          hasStaticResults(function))
        externalResultsToOutParams(function, module);
    bufferization::BufferResultsToOutParamsOpts options;
    options.hoistStaticAllocs = true;
    options.modifyPublicFunctions = true;
    // Marks each out-parameter (`bufferize.result`), which the manifest
    // records as the argument's `output` flag.
    options.addResultAttribute = true;
    // A function and every caller of it change together: one with a result
    // of dynamic shape keeps its results, and so do the functions calling
    // it with such results.
    options.filterFn = [](func::FuncOp *function) {
      return hasStaticResults(*function);
    };
    options.memCpyFn = [](OpBuilder &b, Location loc, Value from, Value to) {
      linalg::CopyOp::create(b, loc, from, to);
      return success();
    };
    if (failed(bufferization::promoteBufferResultsToOutParams(module, options)))
      return signalPassFailure();

    IRRewriter rewriter(&getContext());
    for (func::FuncOp function : module.getOps<func::FuncOp>())
      function.walk([&](memref::CopyOp copy) {
        rewriter.setInsertionPoint(copy);
        rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                    copy.getTarget());
      });
  }
};

} // namespace
