//===- HostLaunch.cpp - host code that launches the lowered kernels -------===//
//
// In place of each lowered op, the host function builds what its kernel
// takes (the TMA descriptors of a GEMM's operands and TMA-stored outputs,
// which here must have 16-byte aligned rows, passed by value) and launches
// it with gpu.launch_func: the path `host.mlir` and mlir-cpu-runner
// programs run.
// The runtime launches the same kernels from their coda.kernel ABI instead.
//
//===----------------------------------------------------------------------===//

#include "EpiloguePlan.h"

#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {
/// Persistent CTAs that host code (gpu.launch_func) launches: the SMs of an
/// H100 SXM. The runtime launches one per SM of the device at hand.
constexpr int64_t kHostLaunchSMs = 132;
} // namespace

namespace {

/// The bytes of the TMA descriptor `map` (a device pointer, where
/// nvgpu.tma.create.descriptor encodes it), read back into a value of the
/// type by which the kernel takes it (tensorMapParamType): through MLIR's
/// CUDA runtime wrappers, which host code links (mgpuMemcpy on the default
/// stream, then mgpuStreamSynchronize).
Value descriptorBytes(ImplicitLocOpBuilder &hb, Value map,
                      FunctionOpInterface function) {
  MLIRContext *ctx = hb.getContext();
  auto module = function->getParentOfType<ModuleOp>();
  Type ptrType = LLVM::LLVMPointerType::get(ctx);
  Type voidType = LLVM::LLVMVoidType::get(ctx);
  Type i64 = hb.getI64Type();
  Type bytesType = tensorMapParamType(ctx);
  // The wrappers' declarations, as gpu-to-llvm makes them (it reuses these).
  auto memcpy = LLVM::lookupOrCreateFn(
      hb, module, "mgpuMemcpy", {ptrType, ptrType, i64, ptrType}, voidType);
  auto synchronize = LLVM::lookupOrCreateFn(hb, module, "mgpuStreamSynchronize",
                                            {ptrType}, voidType);
  // A module declaring them otherwise has been told so (lookupOrCreateFn's
  // error); the launch then keeps the pointer, which the verifier refuses.
  if (failed(memcpy) || failed(synchronize))
    return map;
  // The host copy lives in the function's entry block, so that a launch in
  // a loop reuses it.
  Block &entry = function.getFunctionBody().front();
  ImplicitLocOpBuilder eb(hb.getLoc(), ctx);
  eb.setInsertionPointToStart(&entry);
  Value one =
      LLVM::ConstantOp::create(eb, eb.getI32Type(), eb.getI32IntegerAttr(1));
  Value host = LLVM::AllocaOp::create(eb, ptrType, bytesType, one,
                                      /*alignment=*/64);
  Value null = LLVM::ZeroOp::create(hb, ptrType);
  Value size = LLVM::ConstantOp::create(hb, i64, hb.getI64IntegerAttr(128));
  LLVM::CallOp::create(hb, *memcpy, ValueRange{host, map, size, null});
  LLVM::CallOp::create(hb, *synchronize, ValueRange{null});
  return LLVM::LoadOp::create(hb, bytesType, host);
}

} // namespace

Value mlir::coda::gpu_lowering::descriptorSource(Value launchOperand) {
  // descriptorBytes' chain, backwards: load of the host copy <- mgpuMemcpy
  // into it <- the descriptor's pointer <- nvgpu.tma.create.descriptor <-
  // memref.cast to unranked <- the operand.
  Value v = launchOperand;
  if (auto load = v.getDefiningOp<LLVM::LoadOp>()) {
    v = nullptr;
    for (Operation *user : load.getAddr().getUsers())
      if (auto call = dyn_cast<LLVM::CallOp>(user))
        if (call.getCallee() == StringRef("mgpuMemcpy") &&
            call.getArgOperands().front() == load.getAddr())
          v = call.getArgOperands()[1];
    if (!v)
      return nullptr;
  }
  if (auto cast = v.getDefiningOp<UnrealizedConversionCastOp>())
    v = cast.getInputs().front();
  auto create = v.getDefiningOp<nvgpu::TmaCreateDescriptorOp>();
  if (!create)
    return nullptr;
  v = create.getTensor();
  if (auto cast = v.getDefiningOp<memref::CastOp>())
    v = cast.getSource();
  return v;
}

namespace {

void emitOneGemmLaunch(ImplicitLocOpBuilder &hb, GemmOp op,
                       gpu::GPUFuncOp kernel, const GemmTarget &target,
                       const GemmKernelConfig &config) {
  Type ptrType = LLVM::LLVMPointerType::get(hb.getContext());
  auto hidx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(hb, v);
  };
  auto descriptor = [&](Value operand, Type mapType,
                        ArrayRef<int64_t> box) -> Value {
    auto type = cast<MemRefType>(operand.getType());
    Value unranked = memref::CastOp::create(
        hb, UnrankedMemRefType::get(type.getElementType(), 0), operand);
    SmallVector<Value> boxSizes;
    for (int64_t size : llvm::reverse(box))
      boxSizes.push_back(hidx(size));
    Value map =
        nvgpu::TmaCreateDescriptorOp::create(hb, mapType, unranked, boxSizes);
    return descriptorBytes(
        hb, UnrealizedConversionCastOp::create(hb, ptrType, map).getResult(0),
        op->getParentOfType<FunctionOpInterface>());
  };
  Value sizeM = memref::DimOp::create(hb, op.getLhs(), op.getLhsMDim());
  Value sizeK = memref::DimOp::create(hb, op.getLhs(), op.getLhsKDim());
  Value sizeN = memref::DimOp::create(hb, op.getRhs(), op.getRhsNDim());
  SmallVector<Value> args = {
      descriptor(op.getLhs(), target.getLhsMapType(config),
                 target.getLhsBox(config)),
      descriptor(op.getRhs(), target.getRhsMapType(config),
                 target.getRhsBox(config)),
      sizeM, sizeN, sizeK};
  Value batches;
  if (config.batched) {
    batches = memref::DimOp::create(hb, op.getLhs(), 0);
    args.push_back(batches);
  }
  llvm::append_range(args, op.getEpilogueInputs());
  llvm::append_range(args, op.getOutputs());
  for (unsigned i : tmaStoredOutputs(op, config)) {
    Value output = op.getOutputs()[i];
    Type element = cast<MemRefType>(output.getType()).getElementType();
    args.push_back(descriptor(output, target.getOutputMapType(element),
                              target.getOutputBox(element)));
  }
  Value gridX = arith::CeilDivUIOp::create(hb, sizeN, hidx(config.tileN));
  Value gridY = arith::CeilDivUIOp::create(hb, sizeM, hidx(config.tileM));
  // The batches' tile rows one after the other (assignTile splits them).
  if (batches)
    gridY = arith::MulIOp::create(hb, gridY, batches);
  if (config.persistent()) {
    // Any grid is correct (clusters stride over their tiles); one CTA per
    // SM of an H100 SXM here, the device's SM count in the runtime.
    Value clusterRows =
        config.clusterM == 1
            ? gridY
            : arith::CeilDivUIOp::create(hb, sizeM,
                                         hidx(config.tileM * config.clusterM));
    if (batches && config.clusterM > 1)
      clusterRows = arith::MulIOp::create(hb, clusterRows, batches);
    gridX = arith::MinUIOp::create(
        hb, arith::MulIOp::create(hb, gridX, clusterRows),
        hidx(kHostLaunchSMs / config.clusterM));
    if (config.clusterM > 1)
      gridX = arith::MulIOp::create(hb, gridX, hidx(config.clusterM));
    gridY = hidx(1);
  }
  Value sharedBytes =
      arith::ConstantIntOp::create(hb, hb.getI32Type(), config.sharedBytes());
  gpu::LaunchFuncOp::create(
      hb, kernel, gpu::KernelDim3{gridX, gridY, hidx(1)},
      gpu::KernelDim3{hidx(config.numThreads), hidx(1), hidx(1)}, sharedBytes,
      args);
}

} // namespace

/// The waves of `config`'s tiles for `op` times `waveCost`, in host code: a
/// wave is a tile on each of kHostLaunchSMs SMs (clusters of clusterM tile
/// rows on SMs / clusterM), as the runtime counts them on its device.
static Value weighedWaves(ImplicitLocOpBuilder &hb, GemmOp op,
                          const GemmKernelConfig &config, int64_t waveCost) {
  auto hidx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(hb, v);
  };
  Value sizeM = memref::DimOp::create(hb, op.getLhs(), op.getLhsMDim());
  Value sizeN = memref::DimOp::create(hb, op.getRhs(), op.getRhsNDim());
  Value tiles = arith::MulIOp::create(
      hb, arith::CeilDivUIOp::create(hb, sizeN, hidx(config.tileN)),
      arith::CeilDivUIOp::create(hb, sizeM,
                                 hidx(config.tileM * config.clusterM)));
  if (config.batched)
    tiles = arith::MulIOp::create(hb, tiles,
                                  memref::DimOp::create(hb, op.getLhs(), 0));
  Value waves = arith::CeilDivUIOp::create(
      hb, tiles, hidx(kHostLaunchSMs / config.clusterM));
  return arith::MulIOp::create(hb, waves, hidx(waveCost));
}

void mlir::coda::gpu_lowering::emitGemmLaunch(ImplicitLocOpBuilder &hb,
                                              GemmOp op,
                                              ArrayRef<gpu::GPUFuncOp> kernels,
                                              const GemmTarget &target,
                                              ArrayRef<GemmVariant> variants) {
  if (variants.size() == 1)
    return emitOneGemmLaunch(hb, op, kernels.front(), target,
                             variants.front().config);
  Value first;
  if (variants.front().waveCost) {
    // if (the first variant's waves weigh no more than each other's) launch
    // it, else choose among the rest.
    Value weight = weighedWaves(hb, op, variants.front().config,
                                variants.front().waveCost);
    for (const GemmVariant &other : variants.drop_front()) {
      Value lighter = arith::CmpIOp::create(
          hb, arith::CmpIPredicate::ule, weight,
          weighedWaves(hb, op, other.config, other.waveCost));
      first = first ? arith::AndIOp::create(hb, first, lighter) : lighter;
    }
  } else {
    // if (K <= max_k) launch the first variant, else the rest.
    Value sizeK = memref::DimOp::create(hb, op.getLhs(), op.getLhsKDim());
    first = arith::CmpIOp::create(
        hb, arith::CmpIPredicate::ule, sizeK,
        arith::ConstantIndexOp::create(hb, variants.front().maxK));
  }
  scf::IfOp::create(
      hb, first,
      [&](OpBuilder &b, Location loc) {
        ImplicitLocOpBuilder ib(loc, b);
        emitOneGemmLaunch(ib, op, kernels.front(), target,
                          variants.front().config);
        scf::YieldOp::create(ib);
      },
      [&](OpBuilder &b, Location loc) {
        ImplicitLocOpBuilder ib(loc, b);
        emitGemmLaunch(ib, op, kernels.drop_front(), target,
                       variants.drop_front());
        scf::YieldOp::create(ib);
      });
}

void mlir::coda::gpu_lowering::emitReducePartialsLaunch(
    ImplicitLocOpBuilder &hb, ReducePartialsOp op, gpu::GPUFuncOp kernel,
    int64_t threads) {
  Value threadCount = arith::ConstantIndexOp::create(hb, threads);
  Value one = arith::ConstantIndexOp::create(hb, 1);
  // One thread per reduced element, of every batch.
  Value reduced = memref::DimOp::create(hb, op.getInit(), 0);
  for (int64_t d = 1, e = cast<MemRefType>(op.getInit().getType()).getRank();
       d < e; ++d)
    reduced = arith::MulIOp::create(hb, reduced,
                                    memref::DimOp::create(hb, op.getInit(), d));
  Value blocks = arith::CeilDivUIOp::create(hb, reduced, threadCount);
  gpu::LaunchFuncOp::create(hb, kernel, gpu::KernelDim3{blocks, one, one},
                            gpu::KernelDim3{threadCount, one, one}, Value(),
                            ValueRange{op.getPartials(), op.getInit()});
}
