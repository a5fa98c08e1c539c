//===- TestDifferentialMain.cpp - build @main for CPU differential tests --===//
//
// `--coda-test-differential-main` turns a module holding two functions,
//   @fused(inputs..., destinations...) -> (results...)
//   @reference(inputs...)              -> (results...)
// into a runnable program: @main fills every input with deterministic
// pseudo-random data (seed = input position + 1), fills the extra
// destinations of @fused with NaN so that unwritten elements show, calls both
// functions and compares each pair of results with coda_check_close_* (or,
// with `norm-tol`, coda_check_norm_*), which exit with status 1 on a mismatch.
// FP8 results compare by value, an element one code from the expected one
// passing too.
//
// With `fuse`, @fused is made by the pass: a copy of @reference run through
// `--coda-fuse` (with `fuse-tile` columns per partial), so that a fusion is
// checked against the program it rewrote.
//
// Several pairs, @fused_<k> and @reference_<k>, are checked one after the
// other by one @main (a batch of generated programs in one run).
//
// Dynamic dimensions of inputs and destinations run with `dynamic-size`.
//
// An integer input is drawn from [lo, hi) given by the argument attribute
// `coda_test.range = array<i64: lo, hi>` on @reference, or on @fused where
// @reference is derived (default [0, 16)); an integer scalar at position i
// is lo + (i + 1) mod (hi - lo).
// A scalar float input gets 0.5 + 0.25 * position. The function attributes
// `coda_test.rtol` and `coda_test.atol` of a reference override the options;
// with `coda_test.atol_scaled`, atol is a fraction of each result's largest
// expected magnitude, and `coda_test.atol_floor` (one f32 per result) bounds
// it from below: the rounding noise of a result whose terms cancel (a sum of
// x and -x in another order) is not a fraction of that result.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {

struct TestDifferentialMainPass
    : PassWrapper<TestDifferentialMainPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestDifferentialMainPass)

  TestDifferentialMainPass() = default;
  TestDifferentialMainPass(const TestDifferentialMainPass &other)
      : PassWrapper(other) {}

  StringRef getArgument() const final { return "coda-test-differential-main"; }
  StringRef getDescription() const final {
    return "Build @main comparing @fused against @reference on random inputs";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<coda::CodaDialect, arith::ArithDialect,
                    bufferization::BufferizationDialect, func::FuncDialect,
                    linalg::LinalgDialect, memref::MemRefDialect,
                    tensor::TensorDialect>();
  }

  Option<double> rtol{*this, "rtol", llvm::cl::desc("relative tolerance"),
                      llvm::cl::init(1e-5)};
  Option<double> atol{*this, "atol", llvm::cl::desc("absolute tolerance"),
                      llvm::cl::init(1e-5)};
  Option<double> normTolerance{
      *this, "norm-tol",
      llvm::cl::desc("compare by relative L2 error with this tolerance "
                     "instead of elementwise"),
      llvm::cl::init(0.0)};
  Option<int64_t> dynamicSize{
      *this, "dynamic-size",
      llvm::cl::desc("the size to run dynamic dimensions of the inputs and "
                     "destinations with"),
      llvm::cl::init(0)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("make @fused by running coda-fuse on a "
                                   "copy of @reference"),
                    llvm::cl::init(false)};
  Option<int64_t> fuseTile{*this, "fuse-tile",
                           llvm::cl::desc("coda-fuse's tile option"),
                           llvm::cl::init(128)};

  void runOnOperation() override;

private:
  /// Adds `fusedName`: `reference` rewritten by coda-fuse in a scratch module.
  LogicalResult makeFusedCopy(ModuleOp module, func::FuncOp reference,
                              StringRef fusedName) {
    if (module.lookupSymbol(fusedName))
      return module.emitError("with fuse, expects no @") << fusedName;
    OpBuilder b(module.getContext());
    b.setInsertionPointToEnd(module.getBody());
    auto scratch = ModuleOp::create(b, module.getLoc());
    b.setInsertionPointToEnd(scratch.getBody());
    // Declarations of the functions @reference may call.
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func == reference)
        continue;
      auto declaration = func::FuncOp::create(b, func.getLoc(), func.getName(),
                                              func.getFunctionType());
      declaration.setPrivate();
    }
    auto copy = cast<func::FuncOp>(b.clone(*reference));
    copy.setName(fusedName);
    OpPassManager pm(ModuleOp::getOperationName());
    coda::CodaFuseOptions options;
    options.tile = fuseTile;
    pm.addPass(coda::createCodaFuse(options));
    if (failed(runPipeline(pm, scratch)))
      return failure();
    copy->moveBefore(scratch);
    scratch.erase();
    return success();
  }

  /// The suffix of the runtime helper for `elementType`, or "" if none.
  static StringRef helperSuffix(Type elementType) {
    if (elementType.isF32())
      return "f32";
    if (elementType.isBF16())
      return "bf16";
    if (elementType.isF16())
      return "f16";
    if (isa<Float8E4M3FNType>(elementType))
      return "f8e4m3fn";
    if (isa<Float8E5M2Type>(elementType))
      return "f8e5m2";
    if (elementType.isInteger(32))
      return "i32";
    if (elementType.isInteger(64))
      return "i64";
    return "";
  }

  func::FuncOp declareHelper(OpBuilder &b, ModuleOp module, StringRef name,
                             TypeRange inputs) {
    if (auto existing = module.lookupSymbol<func::FuncOp>(name))
      return existing;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto func = func::FuncOp::create(b, module.getLoc(), name,
                                     b.getFunctionType(inputs, {}));
    func.setPrivate();
    func->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    return func;
  }
};

void TestDifferentialMainPass::runOnOperation() {
  ModuleOp module = getOperation();
  // The static type to allocate for a (possibly dynamic) tensor type.
  auto staticTypeFor = [&](RankedTensorType type) -> RankedTensorType {
    SmallVector<int64_t> shape(type.getShape());
    for (int64_t &dim : shape)
      if (ShapedType::isDynamic(dim))
        dim = dynamicSize;
    return RankedTensorType::get(shape, type.getElementType());
  };
  // The pairs: @fused/@reference, or @fused_<k>/@reference_<k> for each k.
  SmallVector<std::pair<std::string, func::FuncOp>> references;
  for (auto func : module.getOps<func::FuncOp>()) {
    StringRef name = func.getName();
    if (name == "reference" || name.starts_with("reference_"))
      references.push_back(
          {("fused" + name.drop_front(strlen("reference"))).str(), func});
  }
  if (references.empty()) {
    module.emitError("expects functions @fused and @reference");
    return signalPassFailure();
  }
  if (fuse)
    for (auto &[fusedName, reference] : references)
      if (failed(makeFusedCopy(module, reference, fusedName)))
        return signalPassFailure();

  Location loc = module.getLoc();
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  auto main = func::FuncOp::create(b, loc, "main", b.getFunctionType({}, {}));
  b.setInsertionPointToStart(main.addEntryBlock());
  Type i64 = b.getI64Type();

  auto unranked = [](Type element) {
    return UnrankedMemRefType::get(element, /*memorySpace=*/0);
  };

  auto checkPair = [&](StringRef fusedName,
                       func::FuncOp reference) -> LogicalResult {
    auto fused = module.lookupSymbol<func::FuncOp>(fusedName);
    if (!fused) {
      reference.emitError("expects a function @") << fusedName;
      return failure();
    }
    FunctionType fusedType = fused.getFunctionType();
    FunctionType refType = reference.getFunctionType();
    if (fusedType.getNumInputs() < refType.getNumInputs() ||
        fusedType.getInputs().take_front(refType.getNumInputs()) !=
            refType.getInputs() ||
        fusedType.getResults() != refType.getResults()) {
      fused.emitError("expects @")
          << fusedName << " to take @" << reference.getName()
          << "'s inputs followed by its destinations, and to return the same "
             "types";
      return failure();
    }

    // Inputs.
    SmallVector<Value> inputs;
    for (auto [i, type] : llvm::enumerate(refType.getInputs())) {
      // An integer input's range: coda_test.range on @reference's argument,
      // else on @fused's (a derived @reference carries no attributes).
      int64_t lo = 0, hi = 16;
      DenseI64ArrayAttr range =
          reference.getArgAttrOfType<DenseI64ArrayAttr>(i, "coda_test.range");
      if (!range)
        range = fused.getArgAttrOfType<DenseI64ArrayAttr>(i, "coda_test.range");
      if (range) {
        if (range.size() != 2 || range[0] >= range[1]) {
          reference.emitError("coda_test.range takes two values: lo < hi");
          return failure();
        }
        lo = range[0];
        hi = range[1];
      }
      auto tensorType = dyn_cast<RankedTensorType>(type);
      if (!tensorType) {
        if (auto intType = dyn_cast<IntegerType>(type)) {
          inputs.push_back(arith::ConstantOp::create(
              b, loc,
              b.getIntegerAttr(intType, lo + int64_t(i + 1) % (hi - lo))));
          continue;
        }
        auto floatType = dyn_cast<FloatType>(type);
        if (!floatType) {
          reference.emitError("cannot make up a value for scalar input #")
              << i << " of type " << type;
          return failure();
        }
        inputs.push_back(arith::ConstantOp::create(
            b, loc, b.getFloatAttr(floatType, 0.5 + 0.25 * i)));
        continue;
      }
      if (!tensorType.hasStaticShape() && dynamicSize <= 0) {
        reference.emitError("input #")
            << i << " has a dynamic shape: pass dynamic-size=N";
        return failure();
      }
      RankedTensorType declaredType = tensorType;
      tensorType = staticTypeFor(tensorType);
      Type element = tensorType.getElementType();
      StringRef suffix = helperSuffix(element);
      if (suffix.empty()) {
        reference.emitError("no random fill for element type ") << element;
        return failure();
      }
      auto memrefType =
          MemRefType::get(tensorType.getShape(), tensorType.getElementType());
      Value buffer = memref::AllocOp::create(b, loc, memrefType);
      Value erased = memref::CastOp::create(b, loc, unranked(element), buffer);
      Value seed = arith::ConstantIntOp::create(b, loc, i64, i + 1);
      if (isa<FloatType>(element)) {
        func::FuncOp fill =
            declareHelper(b, module, ("coda_fill_random_" + suffix).str(),
                          {unranked(element), i64});
        func::CallOp::create(b, loc, fill, ValueRange{erased, seed});
      } else {
        func::FuncOp fill =
            declareHelper(b, module, ("coda_fill_random_" + suffix).str(),
                          {unranked(element), i64, i64, i64});
        Value loValue = arith::ConstantIntOp::create(b, loc, i64, lo);
        Value hiValue = arith::ConstantIntOp::create(b, loc, i64, hi);
        func::CallOp::create(b, loc, fill,
                             ValueRange{erased, seed, loValue, hiValue});
      }
      Value input = bufferization::ToTensorOp::create(
          b, loc, tensorType, buffer, /*restrict=*/true, /*writable=*/false);
      if (declaredType != tensorType)
        input = tensor::CastOp::create(b, loc, declaredType, input);
      inputs.push_back(input);
    }

    // Poisoned destinations for @fused.
    SmallVector<Value> fusedArgs(inputs);
    for (Type type : fusedType.getInputs().drop_front(refType.getNumInputs())) {
      auto tensorType = dyn_cast<RankedTensorType>(type);
      auto element = tensorType
                         ? dyn_cast<FloatType>(tensorType.getElementType())
                         : nullptr;
      if (!element) {
        fused.emitError("expects destinations to be float tensors, got ")
            << type;
        return failure();
      }
      RankedTensorType staticType = staticTypeFor(tensorType);
      Value empty = tensor::EmptyOp::create(b, loc, staticType.getShape(),
                                            staticType.getElementType());
      Value nan = arith::ConstantOp::create(
          b, loc,
          b.getFloatAttr(element,
                         llvm::APFloat::getQNaN(element.getFloatSemantics())));
      Value poisoned =
          linalg::FillOp::create(b, loc, ValueRange{nan}, ValueRange{empty})
              .getResult(0);
      if (staticType != tensorType)
        poisoned = tensor::CastOp::create(b, loc, tensorType, poisoned);
      fusedArgs.push_back(poisoned);
    }

    auto fusedCall = func::CallOp::create(b, loc, fused, fusedArgs);
    auto refCall = func::CallOp::create(b, loc, reference, inputs);
    // A reference may carry its own tolerances (coda_test.rtol/atol).
    auto tolerance = [&](StringRef name, double option) -> Value {
      double value = option;
      if (auto attr = reference->getAttrOfType<FloatAttr>(name))
        value = attr.getValueAsDouble();
      return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
    };
    Value rtolValue = tolerance("coda_test.rtol", rtol);
    Value atolValue = tolerance("coda_test.atol", atol);
    auto floors = reference->getAttrOfType<ArrayAttr>("coda_test.atol_floor");
    if (floors && floors.size() != refCall.getNumResults()) {
      reference->emitError("coda_test.atol_floor needs one value per result");
      return failure();
    }
    for (auto [index, got, want] :
         llvm::enumerate(fusedCall.getResults(), refCall.getResults())) {
      auto tensorType = dyn_cast<RankedTensorType>(got.getType());
      Type element = tensorType ? tensorType.getElementType() : Type();
      bool fp8 = element && isa<Float8E4M3FNType, Float8E5M2Type>(element);
      if (!element ||
          !(fp8 || isa<Float32Type, BFloat16Type, Float16Type>(element))) {
        fused.emitError("can only compare f32, bf16, f16, f8E4M3FN and "
                        "f8E5M2 tensors, got ")
            << got.getType();
        return failure();
      }
      if (fp8 && normTolerance > 0) {
        fused.emitError("norm-tol compares f32, bf16 and f16 tensors, got ")
            << got.getType();
        return failure();
      }
      auto memrefType = MemRefType::get(tensorType.getShape(), element);
      auto toUnranked = [&](Value tensor) -> Value {
        Value buffer =
            bufferization::ToBufferOp::create(b, loc, memrefType, tensor);
        return memref::CastOp::create(b, loc, unranked(element), buffer);
      };
      if (normTolerance > 0) {
        func::FuncOp check = declareHelper(
            b, module, ("coda_check_norm_" + helperSuffix(element)).str(),
            {unranked(element), unranked(element), b.getF32Type()});
        Value tolerance = arith::ConstantOp::create(
            b, loc, b.getF32FloatAttr(normTolerance.getValue()));
        func::CallOp::create(
            b, loc, check,
            ValueRange{toUnranked(got), toUnranked(want), tolerance});
        continue;
      }
      // With coda_test.atol_scaled, atol is a fraction of the largest
      // expected magnitude of each result.
      if (reference->hasAttr("coda_test.atol_scaled")) {
        double floor =
            floors ? cast<FloatAttr>(floors[index]).getValueAsDouble() : 0.0;
        Value floorValue =
            arith::ConstantOp::create(b, loc, b.getF32FloatAttr(floor));
        func::FuncOp check = declareHelper(
            b, module, ("coda_check_scaled_" + helperSuffix(element)).str(),
            {unranked(element), unranked(element), b.getF32Type(),
             b.getF32Type(), b.getF32Type()});
        func::CallOp::create(b, loc, check,
                             ValueRange{toUnranked(got), toUnranked(want),
                                        rtolValue, atolValue, floorValue});
        continue;
      }
      func::FuncOp check = declareHelper(
          b, module, ("coda_check_close_" + helperSuffix(element)).str(),
          {unranked(element), unranked(element), b.getF32Type(),
           b.getF32Type()});
      func::CallOp::create(
          b, loc, check,
          ValueRange{toUnranked(got), toUnranked(want), rtolValue, atolValue});
    }
    return success();
  };
  for (auto &[fusedName, reference] : references)
    if (failed(checkPair(fusedName, reference)))
      return signalPassFailure();
  func::ReturnOp::create(b, loc);
}

} // namespace

namespace mlir::coda {
void registerTestEpiloguePlanPass();
void registerCodaTestPasses() {
  PassRegistration<TestDifferentialMainPass>();
  registerTestEpiloguePlanPass();
}
} // namespace mlir::coda
