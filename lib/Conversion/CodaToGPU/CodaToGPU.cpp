//===- CodaToGPU.cpp - coda.gemm to TMA + WGMMA GPU kernels ---------------===//
//
// Each coda.gemm on memrefs becomes a kernel in the `coda_kernels` gpu.module
// and, in its place, host code that builds the two TMA descriptors and
// launches it (HostLaunch.cpp); each coda.reduce_partials on memrefs becomes
// a kernel that folds the partials. The lowering is two patterns behind
// populateCodaToGPUConversionPatterns. A GEMM's kernel is its configuration
// (GemmConfig.cpp: schedule, tile, stages, cluster), the target's mainloop
// over K (HopperMainloop.cpp) and the epilogue region evaluated on the
// accumulators (Epilogue.cpp); its ABI is recorded on it as the
// `coda.kernel` attribute (KernelAbi.cpp, docs/KernelABI.md), which
// --coda-export-kernel-manifest writes out as JSON.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/CodaToGPU.h"
#include "coda/Conversion/CodaToGPU/KernelOptions.h"

#include "EpiloguePlan.h"

#include "coda/Dialect/Coda/IR/Coda.h"
#include "coda/Dialect/Coda/Utils/EpilogueEvaluation.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODATOGPU
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

constexpr StringLiteral kKernelModuleName = "coda_kernels";
/// Threads per CTA of a reduce_partials kernel.
constexpr int64_t kReduceThreads = 128;

/// The `coda_kernels` gpu.module of `op`'s module, made on first use; the
/// module becomes a GPU container module.
gpu::GPUModuleOp getKernelModule(RewriterBase &rewriter, Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module->hasAttr(gpu::GPUDialect::getContainerModuleAttrName()))
    rewriter.modifyOpInPlace(module, [&] {
      module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                      rewriter.getUnitAttr());
    });
  if (auto kernels = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName))
    return kernels;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(rewriter, module.getLoc(), kKernelModuleName);
}

/// `<host>_<kind><n>` with the first n not yet taken in `kernels`: the
/// patterns run in program order, so a function's kernels are numbered in
/// the order it launches them.
std::string kernelName(gpu::GPUModuleOp kernels, func::FuncOp host,
                       StringRef kind) {
  for (unsigned n = 0;; ++n) {
    std::string name = (host.getSymName() + "_" + kind + Twine(n)).str();
    if (!SymbolTable::lookupSymbolIn(kernels, name))
      return name;
  }
}

/// coda.reduce_partials: one thread per reduced element folds its partials
/// in order (deterministic), in f32. Batched partials ([B x] M x T or
/// [B x] T x N) are reduced for every batch: B x M (B x N) threads.
gpu::GPUFuncOp buildReducePartialsKernel(OpBuilder &kb, ReducePartialsOp op,
                                         func::FuncOp host, StringRef name) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  Value partials = op.getPartials(), init = op.getInit();
  bool rowAxis = op.getAxis() == ReductionAxis::row;
  ReductionKind kind = op.getKind();
  auto kernel = gpu::GPUFuncOp::create(
      kb, loc, name,
      FunctionType::get(ctx, {partials.getType(), init.getType()}, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  kernel->setAttr(kTensorMapParamsAttr, UnitAttr::get(ctx));
  kernel.setKnownBlockSizeAttr(
      DenseI32ArrayAttr::get(ctx, {int32_t(kReduceThreads), 1, 1}));
  kernel->setAttr(kKernelAbiAttrName,
                  buildReducePartialsAbi(kb, op, host, kReduceThreads));

  Block &entry = kernel.getBody().front();
  ImplicitLocOpBuilder b(loc, ctx);
  b.setInsertionPointToStart(&entry);
  Value in = entry.getArgument(0), out = entry.getArgument(1);
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  Value i = arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::x),
                            idx(kReduceThreads)),
      gpu::ThreadIdOp::create(b, gpu::Dimension::x));
  bool batched = cast<MemRefType>(out.getType()).getRank() == 2;
  unsigned first = batched ? 1 : 0;
  Value perBatch = memref::DimOp::create(b, out, first);
  Value reduced =
      batched
          ? arith::MulIOp::create(b, memref::DimOp::create(b, out, 0), perBatch)
          : perBatch;
  Value count = memref::DimOp::create(b, in, first + (rowAxis ? 1 : 0));
  // The reduced element's indices: (batch,) position.
  auto at = [&](ImplicitLocOpBuilder &ib) -> SmallVector<Value> {
    if (!batched)
      return {i};
    return {arith::DivUIOp::create(ib, i, perBatch),
            arith::RemUIOp::create(ib, i, perBatch)};
  };
  Type f32 = b.getF32Type();
  Type element = cast<MemRefType>(out.getType()).getElementType();
  Value inRange =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, reduced);
  scf::IfOp::create(b, inRange, [&](OpBuilder &ob, Location l) {
    ImplicitLocOpBuilder ib(l, ob);
    SmallVector<Value> position = at(ib);
    Value identity = arith::ConstantOp::create(
        ib, getReductionIdentity(kind, cast<FloatType>(f32)));
    auto loop = scf::ForOp::create(
        ib, arith::ConstantIndexOp::create(ib, 0), count,
        arith::ConstantIndexOp::create(ib, 1), ValueRange{identity},
        [&](OpBuilder &fb, Location fl, Value j, ValueRange acc) {
          ImplicitLocOpBuilder lb(fl, fb);
          SmallVector<Value> indices(position);
          indices.insert(rowAxis ? indices.end() : indices.end() - 1, j);
          Value v = memref::LoadOp::create(lb, in, indices);
          if (!v.getType().isF32())
            v = arith::ExtFOp::create(lb, f32, v);
          scf::YieldOp::create(lb,
                               buildReductionCombine(lb, fl, kind, acc[0], v));
        });
    Value result = loop.getResult(0);
    if (element != f32)
      result = arith::TruncFOp::create(ib, element, result);
    memref::StoreOp::create(ib, result, out, position);
    scf::YieldOp::create(ib);
  });
  gpu::ReturnOp::create(b);
  return kernel;
}

/// Batch `batch` of a batched GEMM's epilogue `inputs` (or `outputs`): the
/// operands with a batch dimension (every output, every memref input but a
/// column one) as rank-reduced views without it; `values` itself when
/// `batch` is null (an unbatched GEMM).
SmallVector<Value> batchViews(ImplicitLocOpBuilder &b, GemmOp op, Value batch,
                              ValueRange values, bool outputs) {
  SmallVector<Value> views(values);
  if (!batch)
    return views;
  for (auto [i, value] : llvm::enumerate(values)) {
    auto type = dyn_cast<MemRefType>(value.getType());
    if (!type || (!outputs && op.getInputForm(i) == AccessForm::col))
      continue;
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    offsets[0] = batch;
    for (int64_t d = 1; d < type.getRank(); ++d)
      sizes.push_back(type.isDynamicDim(d)
                          ? OpFoldResult(memref::DimOp::create(b, value, d))
                          : OpFoldResult(b.getIndexAttr(type.getDimSize(d))));
    auto viewType = memref::SubViewOp::inferRankReducedResultType(
        type.getShape().drop_front(), type, offsets, sizes, strides);
    views[i] =
        memref::SubViewOp::create(b, viewType, value, offsets, sizes, strides);
  }
  return views;
}

/// The kernel of `op` under `config`: the target's mainloop and the
/// epilogue, with its ABI as `coda.kernel`.
gpu::GPUFuncOp buildGemmKernel(OpBuilder &kb, GemmOp op, func::FuncOp host,
                               const GemmTarget &target,
                               const GemmKernelConfig &config, StringRef name) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  Type mapType = tensorMapParamType(ctx);
  Type indexType = IndexType::get(ctx);
  EpiloguePlan plan = planEpilogue(op, config);
  SmallVector<OutputRole> roles;
  SmallVector<unsigned> tmaStored;
  for (auto [i, output] : llvm::enumerate(plan.outputs)) {
    roles.push_back(output.role);
    if (output.tmaStore)
      tmaStored.push_back(i);
  }

  // Kernel: (lhs map, rhs map, M, N, K, [B,] epilogue inputs...,
  // outputs..., the store maps of the TMA-stored outputs...): B where
  // batched. The maps are passed by value (kTensorMapParamsAttr).
  SmallVector<Type> argTypes = {mapType, mapType, indexType, indexType,
                                indexType};
  if (config.batched)
    argTypes.push_back(indexType);
  for (Value v : op.getEpilogueInputs())
    argTypes.push_back(v.getType());
  for (Value v : op.getOutputs())
    argTypes.push_back(v.getType());
  argTypes.append(tmaStored.size(), mapType);
  auto kernel = gpu::GPUFuncOp::create(kb, loc, name,
                                       FunctionType::get(ctx, argTypes, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  kernel->setAttr(kTensorMapParamsAttr, UnitAttr::get(ctx));
  kernel.setKnownBlockSizeAttr(
      DenseI32ArrayAttr::get(ctx, {int32_t(config.numThreads), 1, 1}));
  // Launch bounds: ptxas needs the register count at entry to honour
  // setmaxnreg (otherwise C7508: ignored).
  kernel->setAttr(
      NVVM::NVVMDialect::getMaxntidAttrName(),
      DenseI32ArrayAttr::get(ctx, {int32_t(config.numThreads), 1, 1}));
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  IntegerAttr::get(IntegerType::get(ctx, 32), 1));
  if (config.clusterM > 1)
    kernel->setAttr(
        NVVM::NVVMDialect::getClusterDimAttrName(),
        DenseI32ArrayAttr::get(ctx, {int32_t(config.clusterM), 1, 1}));
  kernel->setAttr(kKernelAbiAttrName,
                  buildGemmKernelAbi(kb, op, host, target, config, roles));

  Block &entry = kernel.getBody().front();
  ImplicitLocOpBuilder b(loc, ctx);
  b.setInsertionPointToStart(&entry);
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  KernelFrame frame;
  frame.lhsMap = UnrealizedConversionCastOp::create(
                     b, target.getLhsMapType(config),
                     tensorMapParamAddress(b, entry.getArgument(0)))
                     .getResult(0);
  frame.rhsMap = UnrealizedConversionCastOp::create(
                     b, target.getRhsMapType(config),
                     tensorMapParamAddress(b, entry.getArgument(1)))
                     .getResult(0);
  frame.sizeM = entry.getArgument(2);
  frame.sizeN = entry.getArgument(3);
  // An epilogue that never reads the accumulator (the adjoint of RoPE, whose
  // derivative does not depend on it) makes the kernel its epilogue alone:
  // no k-tile is loaded or multiplied.
  frame.sizeK = op.readsAccumulator() ? Value(entry.getArgument(4)) : idx(0);
  frame.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  frame.warp = arith::DivUIOp::create(b, frame.tid, idx(32));
  frame.lane = arith::RemUIOp::create(b, frame.tid, idx(32));
  Attribute workgroup =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  frame.shared = gpu::DynamicSharedMemoryOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                         MemRefLayoutAttrInterface(), workgroup));
  // Align the base to 1024 bytes (128-byte swizzle atoms).
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, frame.shared);
  frame.sharedBase = arith::RemUIOp::create(
      b,
      arith::SubIOp::create(b, idx(1024),
                            arith::RemUIOp::create(b, address, idx(1024))),
      idx(1024));
  frame.accTile = memref::ViewOp::create(
      b,
      MemRefType::get({config.tileM, config.accRowStride()}, b.getF32Type(),
                      MemRefLayoutAttrInterface(), workgroup),
      frame.shared,
      arith::AddIOp::create(b, frame.sharedBase, idx(config.epilogueOffset())),
      ValueRange{});

  frame.syncEpilogue = [](ImplicitLocOpBuilder &sb) {
    gpu::BarrierOp::create(sb);
  };
  unsigned firstInput = 5;
  if (config.batched)
    frame.batchCount = entry.getArgument(firstInput++);
  unsigned numInputs = op.getEpilogueInputs().size();
  unsigned numOutputs = op.getOutputs().size();
  ValueRange epilogueInputs = entry.getArguments().slice(firstInput, numInputs);
  ValueRange epilogueOutputs =
      entry.getArguments().slice(firstInput + numInputs, numOutputs);
  frame.outputMaps.assign(numOutputs, Value());
  for (auto [n, i] : llvm::enumerate(tmaStored))
    frame.outputMaps[i] = tensorMapParamAddress(
        b, entry.getArgument(firstInput + numInputs + numOutputs + n));
  // The epilogue of a batched GEMM's tile works on its batch's views.
  auto prefetch = [&](ImplicitLocOpBuilder &eb, const KernelFrame &tileFrame,
                      int64_t part, int64_t parts) {
    return prefetchEpilogue(
        eb, op, config, plan, tileFrame,
        batchViews(eb, op, tileFrame.batch, epilogueInputs, /*outputs=*/false),
        batchViews(eb, op, tileFrame.batch, epilogueOutputs, /*outputs=*/true),
        part, parts);
  };
  auto emit = [&](ImplicitLocOpBuilder &eb, const KernelFrame &tileFrame) {
    emitEpilogue(
        eb, op, config, plan, tileFrame,
        batchViews(eb, op, tileFrame.batch, epilogueInputs, /*outputs=*/false),
        batchViews(eb, op, tileFrame.batch, epilogueOutputs, /*outputs=*/true));
  };
  auto finish = [&](ImplicitLocOpBuilder &eb, const KernelFrame &lastFrame) {
    finishEpilogue(eb, config, lastFrame);
  };
  target.emitKernelBody(b, frame, config,
                        EpilogueEmitter{prefetch, emit, finish});
  gpu::ReturnOp::create(b);
  return kernel;
}

/// Adds to `kernel`'s ABI that it is `variant`, a variant of the GEMM
/// kernel `name`: for K up to its max_k (0: beyond every other variant's
/// bound), or weighing its waves by its wave_cost.
void recordVariant(OpBuilder &b, gpu::GPUFuncOp kernel, StringRef name,
                   const GemmVariant &variant) {
  auto abi = kernel->getAttrOfType<DictionaryAttr>(kKernelAbiAttrName);
  NamedAttrList entries(abi);
  entries.set("variant_of", b.getStringAttr(name));
  if (variant.waveCost)
    entries.set("wave_cost", b.getI64IntegerAttr(variant.waveCost));
  else
    entries.set("max_k", b.getI64IntegerAttr(variant.maxK));
  kernel->setAttr(kKernelAbiAttrName, entries.getDictionary(b.getContext()));
}

/// A coda.gemm on memrefs inside a function: its kernels (one per
/// configuration it is dispatched between) and, in its place, the host code
/// that launches them.
struct GemmToKernel : OpRewritePattern<GemmOp> {
  GemmToKernel(MLIRContext *ctx, const CodaToGPUOptions &options,
               std::shared_ptr<const GemmTarget> target)
      : OpRewritePattern<GemmOp>(ctx), options(options),
        target(std::move(target)) {}

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    auto host = op->getParentOfType<func::FuncOp>();
    if (!host || !op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op,
                                         "not a GEMM on memrefs in a function");
    FailureOr<SmallVector<GemmVariant>> variants =
        configureGemm(op, *target, options);
    if (failed(variants))
      return failure();
    gpu::GPUModuleOp kernels = getKernelModule(rewriter, op);
    // One kernel per variant: dispatched by K, the last (any larger K)
    // takes the GEMM's name, the others the name and their K bound;
    // dispatched by waves, the first takes the name, the others the name
    // and their position. Launching the GEMM's name dispatches (its ABI
    // lists the variants).
    std::string name = kernelName(kernels, host, "gemm");
    SmallVector<gpu::GPUFuncOp> variantKernels;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToEnd(kernels.getBody());
      for (auto [i, variant] : llvm::enumerate(*variants)) {
        std::string variantName =
            variant.maxK            ? name + "_k" + std::to_string(variant.maxK)
            : variant.waveCost && i ? name + "_w" + std::to_string(i)
                                    : name;
        gpu::GPUFuncOp kernel = buildGemmKernel(rewriter, op, host, *target,
                                                variant.config, variantName);
        if (Attribute id = op->getAttr(kGemmIdAttrName))
          kernel->setAttr(kGemmIdAttrName, id);
        if (variants->size() > 1)
          recordVariant(rewriter, kernel, name, variant);
        variantKernels.push_back(kernel);
      }
    }
    ImplicitLocOpBuilder hb(op.getLoc(), rewriter);
    emitGemmLaunch(hb, op, variantKernels, *target, *variants);
    rewriter.eraseOp(op);
    return success();
  }

  CodaToGPUOptions options;
  std::shared_ptr<const GemmTarget> target;
};

/// A coda.reduce_partials of a 2-D memref inside a function (on tensors, or
/// batched, it stays for the reference lowering).
struct ReducePartialsToKernel : OpRewritePattern<ReducePartialsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReducePartialsOp op,
                                PatternRewriter &rewriter) const override {
    auto host = op->getParentOfType<func::FuncOp>();
    auto partials = dyn_cast<MemRefType>(op.getPartials().getType());
    if (!host || !partials)
      return rewriter.notifyMatchFailure(op, "not partials in a function");
    gpu::GPUModuleOp kernels = getKernelModule(rewriter, op);
    gpu::GPUFuncOp kernel;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToEnd(kernels.getBody());
      kernel = buildReducePartialsKernel(rewriter, op, host,
                                         kernelName(kernels, host, "finish"));
    }
    ImplicitLocOpBuilder hb(op.getLoc(), rewriter);
    emitReducePartialsLaunch(hb, op, kernel, kReduceThreads);
    rewriter.eraseOp(op);
    return success();
  }
};

struct CodaToGPUPass : coda::impl::CodaToGPUBase<CodaToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    CodaToGPUOptions options;
    options.chip = chip;
    options.tileM = tileM;
    options.tileN = tileN;
    options.stages = stages;
    options.schedule = schedule;
    options.clusterM = clusterM;
    options.raster = raster;
    options.swizzle = swizzle;
    SmallVector<GemmOp> gemms;
    module.walk([&](GemmOp op) { gemms.push_back(op); });
    std::unique_ptr<GemmTarget> target = getGemmTarget(chip);
    if (!target && !gemms.empty()) {
      module.emitError() << "coda-to-gpu: no GEMM lowering for chip '" << chip
                         << "' (supported: sm_90a)";
      return signalPassFailure();
    }
    // Check every GEMM first so that one run reports every problem.
    bool failed = false;
    // A matrix product still in linalg would become one of the loop
    // kernels made from what is left, far slower than a GEMM: said, not
    // compiled.
    module.walk([&](linalg::LinalgOp op) {
      if (op->getParentOfType<gpu::GPUModuleOp>() ||
          !linalg::isaContractionOpInterface(op))
        return;
      op->emitError() << "'" << op->getName()
                      << "' is a matrix product left in linalg, which the "
                         "GPU lowering would run as a loop kernel, not a "
                         "GEMM; --coda-fuse (coda-compile's default) makes "
                         "matrix products coda.gemm, and its report lists "
                         "what it could not";
      failed = true;
    });
    for (GemmOp op : gemms) {
      if (::mlir::failed(configureGemm(op, *target, options))) {
        failed = true;
        continue;
      }
      if (!op->getParentOfType<func::FuncOp>()) {
        op.emitOpError("GPU lowering needs the GEMM inside a func.func");
        failed = true;
      }
    }
    if (failed)
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateCodaToGPUConversionPatterns(patterns, options);
    walkAndApplyPatterns(module, std::move(patterns));
  }
};

} // namespace

void mlir::coda::populateCodaToGPUConversionPatterns(
    RewritePatternSet &patterns, const CodaToGPUOptions &options) {
  std::shared_ptr<const GemmTarget> target = getGemmTarget(options.chip);
  if (target)
    patterns.add<GemmToKernel>(patterns.getContext(), options,
                               std::move(target));
  patterns.add<ReducePartialsToKernel>(patterns.getContext());
}
