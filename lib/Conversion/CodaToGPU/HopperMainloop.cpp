//===- HopperMainloop.cpp - sm_90a GEMM mainloop: TMA ring + WGMMA --------===//
//
// One warpgroup (128 threads) per CTA. Thread 0 issues TMA loads of the lhs
// and rhs tiles into a ring of `stages` shared-memory slots, each guarded by an
// mbarrier that counts the bytes landing in it (arrive.expect_tx /
// try_wait.parity). Every thread waits on its slot, then the warpgroup issues
// wgmma.mma_async over the slot (128-byte swizzle, bf16/f16 in, f32 out),
// keeping one WGMMA group in flight; once a slot's group has retired, thread 0
// refills it with the tile `stages` steps ahead. The accumulator fragments end
// in a shared-memory tile that the epilogue reads.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

/// WGMMA's instruction shape: 64 rows; K is 32 bytes of operand.
constexpr int64_t kWgmmaM = 64;
/// The swizzle span: one shared-memory row of a 128B-swizzled tile.
constexpr int64_t kSwizzleBytes = 128;
/// MN-major rhs tiles are loaded as chunks this many bytes wide along N.
constexpr int64_t kChunkBytes = kSwizzleBytes;

Attribute workgroupSpace(MLIRContext *ctx) {
  return gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
}

MemRefType sharedTileType(MLIRContext *ctx, ArrayRef<int64_t> shape,
                          Type element) {
  return MemRefType::get(shape, element, MemRefLayoutAttrInterface(),
                         workgroupSpace(ctx));
}

nvgpu::TensorMapDescriptorType tensorMapType(MemRefType box) {
  return nvgpu::TensorMapDescriptorType::get(
      box.getContext(), box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
}

class HopperTarget : public GemmTarget {
public:
  LogicalResult checkOperands(GemmOp op,
                              const GemmKernelConfig &config) const override {
    Type element = config.operandType;
    if (!element.isBF16() && !element.isF16())
      return op.emitOpError("sm_90a lowering supports bf16 and f16 operands "
                            "(f32 accumulation), got ")
             << element;
    if (config.tileK * config.operandBytes != kSwizzleBytes)
      return op.emitOpError("tile K must span the 128-byte swizzle (")
             << kSwizzleBytes / config.operandBytes << " elements)";
    if (config.tileM % kWgmmaM != 0)
      return op.emitOpError("tile M must be a multiple of ") << kWgmmaM;
    // Accumulator registers: tileM * tileN / 128 f32 per thread.
    if (config.tileM * config.tileN > 128 * 128)
      return op.emitOpError("a ")
             << config.tileM << "x" << config.tileN
             << " tile needs more than 128 accumulator registers per thread "
                "in one warpgroup; use tile-m=64 with tile-n above 128";
    return success();
  }

  Type getLhsMapType(const GemmKernelConfig &c) const override {
    return tensorMapType(lhsBoxType(c));
  }
  Type getRhsMapType(const GemmKernelConfig &c) const override {
    return tensorMapType(rhsBoxType(c));
  }
  SmallVector<int64_t> getLhsBox(const GemmKernelConfig &c) const override {
    return {c.tileK, c.tileM};
  }
  SmallVector<int64_t> getRhsBox(const GemmKernelConfig &c) const override {
    if (c.rhsKMajor)
      return {c.tileK, c.tileN};
    return {chunkElements(c), c.tileK};
  }

  void emitMainloop(ImplicitLocOpBuilder &b, const KernelFrame &frame,
                    const GemmKernelConfig &config) const override;

private:
  static int64_t chunkElements(const GemmKernelConfig &c) {
    return kChunkBytes / c.operandBytes;
  }
  static MemRefType lhsBoxType(const GemmKernelConfig &c) {
    return sharedTileType(c.operandType.getContext(), {c.tileM, c.tileK},
                          c.operandType);
  }
  static MemRefType rhsBoxType(const GemmKernelConfig &c) {
    if (c.rhsKMajor)
      return sharedTileType(c.operandType.getContext(), {c.tileN, c.tileK},
                            c.operandType);
    return sharedTileType(c.operandType.getContext(),
                          {c.tileK, chunkElements(c)}, c.operandType);
  }
};

/// A WGMMA shared-memory matrix descriptor for 128-byte swizzled tiles:
/// start address >> 4 in bits [0,14), leading byte offset >> 4 in [16,30),
/// stride byte offset >> 4 in [32,46), swizzle mode (1 = 128B) in [62,64).
/// Descriptors of other addresses in the same tile differ only in the start
/// address field, so later ones are this plus (byte offset >> 4).
Value buildMatrixDescriptor(ImplicitLocOpBuilder &b, Value address,
                            int64_t leadingBytes, int64_t strideBytes) {
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, i64, v);
  };
  Value addr = arith::IndexCastUIOp::create(b, i64, address);
  Value start = arith::ShRUIOp::create(
      b, arith::AndIOp::create(b, addr, constant(0x3FFFF)), constant(4));
  uint64_t fields = (uint64_t(leadingBytes >> 4) << 16) |
                    (uint64_t(strideBytes >> 4) << 32) | (uint64_t(1) << 62);
  return arith::OrIOp::create(b, start, constant(int64_t(fields)));
}

void HopperTarget::emitMainloop(ImplicitLocOpBuilder &b,
                                const KernelFrame &frame,
                                const GemmKernelConfig &c) const {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  Type i64 = b.getI64Type();
  auto index = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, v);
  };
  auto i64Const = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, i64, v);
  };

  auto barrierType = nvgpu::MBarrierGroupType::get(ctx, workgroupSpace(ctx),
                                                   c.stages);
  Value barriers = nvgpu::MBarrierCreateOp::create(b, barrierType);
  Value isLeader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                         frame.tid, index(0));
  Value numK = arith::CeilDivUIOp::create(b, frame.sizeK, index(c.tileK));

  auto sharedView = [&](ImplicitLocOpBuilder &vb, Value byteOffset,
                        MemRefType type) -> Value {
    return memref::ViewOp::create(vb, type, frame.shared, byteOffset,
                                  ValueRange{});
  };
  MemRefType lhsBox = lhsBoxType(c), rhsBox = rhsBoxType(c);

  // Loads k-tile `kt` into ring slot `slot` (both index values).
  auto issueLoads = [&](OpBuilder &ob, Location loc, Value kt, Value slot) {
    ImplicitLocOpBuilder lb(loc, ob);
    auto idx = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(lb, v);
    };
    Value slotBase = arith::AddIOp::create(
        lb, frame.sharedBase,
        arith::MulIOp::create(lb, slot, idx(c.stageBytes())));
    nvgpu::MBarrierArriveExpectTxOp::create(lb, barriers, idx(c.stageBytes()),
                                            slot, Value());
    Value kOffset = arith::MulIOp::create(lb, kt, idx(c.tileK));
    nvgpu::TmaAsyncLoadOp::create(lb, sharedView(lb, slotBase, lhsBox), barriers,
                                  frame.lhsMap,
                                  ValueRange{kOffset, frame.blockM}, slot,
                                  Value(), Value());
    Value rhsBase = arith::AddIOp::create(lb, slotBase, idx(c.lhsTileBytes()));
    if (c.rhsKMajor) {
      nvgpu::TmaAsyncLoadOp::create(lb, sharedView(lb, rhsBase, rhsBox), barriers,
                                    frame.rhsMap,
                                    ValueRange{kOffset, frame.blockN}, slot,
                                    Value(), Value());
      return;
    }
    int64_t chunk = chunkElements(c);
    for (int64_t i = 0; i < c.tileN / chunk; ++i) {
      Value dst = sharedView(
          lb,
          arith::AddIOp::create(lb, rhsBase, idx(i * c.tileK * kChunkBytes)),
          rhsBox);
      Value n = arith::AddIOp::create(lb, frame.blockN, idx(i * chunk));
      nvgpu::TmaAsyncLoadOp::create(lb, dst, barriers, frame.rhsMap,
                                    ValueRange{n, kOffset}, slot, Value(),
                                    Value());
    }
  };

  // Barrier setup, visible to every thread and to the TMA unit.
  scf::IfOp::create(b, isLeader, [&](OpBuilder &ob, Location loc) {
    for (int64_t s = 0; s < c.stages; ++s)
      nvgpu::MBarrierInitOp::create(
          ob, loc, barriers, arith::ConstantIndexOp::create(ob, loc, 1),
          arith::ConstantIndexOp::create(ob, loc, s), Value());
    NVVM::FenceMbarrierInitOp::create(ob, loc);
    scf::YieldOp::create(ob, loc);
  });
  gpu::BarrierOp::create(b);

  // Prologue: fill every slot that has a k-tile.
  scf::IfOp::create(b, isLeader, [&](OpBuilder &ob, Location loc) {
    nvgpu::TmaPrefetchOp::create(ob, loc, frame.lhsMap, Value());
    nvgpu::TmaPrefetchOp::create(ob, loc, frame.rhsMap, Value());
    for (int64_t s = 0; s < c.stages; ++s) {
      Value slot = arith::ConstantIndexOp::create(ob, loc, s);
      Value has = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::ult,
                                        slot, numK);
      scf::IfOp::create(ob, loc, has, [&](OpBuilder &ib, Location iloc) {
        issueLoads(ib, iloc, slot, slot);
        scf::YieldOp::create(ib, iloc);
      });
    }
    scf::YieldOp::create(ob, loc);
  });

  // Descriptors of slot 0; a slot's are these plus its byte offset >> 4.
  Value sharedAddress = arith::AddIOp::create(
      b,
      memref::ExtractAlignedPointerAsIndexOp::create(b, frame.shared),
      frame.sharedBase);
  constexpr int64_t kRowGroupBytes = 8 * kSwizzleBytes;
  Value lhsDesc0 =
      buildMatrixDescriptor(b, sharedAddress, /*leadingBytes=*/16,
                            kRowGroupBytes);
  Value rhsAddress =
      arith::AddIOp::create(b, sharedAddress, index(c.lhsTileBytes()));
  Value rhsDesc0 = buildMatrixDescriptor(
      b, rhsAddress,
      c.rhsKMajor ? 16 : c.tileK * kChunkBytes, kRowGroupBytes);

  int64_t fragmentSize = c.tileN / 2;
  auto fragmentType = LLVM::LLVMStructType::getLiteral(
      ctx, SmallVector<Type>(fragmentSize, f32));
  int64_t numFragments = c.tileM / kWgmmaM;
  SmallVector<Value> zeros;
  for (int64_t i = 0; i < numFragments; ++i)
    zeros.push_back(LLVM::ZeroOp::create(b, fragmentType));

  auto wgmmaType = c.operandType.isBF16() ? NVVM::WGMMATypes::bf16
                                          : NVVM::WGMMATypes::f16;
  int64_t kStep = 32 / c.operandBytes;
  auto loop = scf::ForOp::create(
      b, index(0), numK, index(1), zeros,
      [&](OpBuilder &ob, Location loc, Value kt, ValueRange accs) {
        ImplicitLocOpBuilder lb(loc, ob);
        auto idx = [&](int64_t v) -> Value {
          return arith::ConstantIndexOp::create(lb, v);
        };
        Value slot = arith::RemUIOp::create(lb, kt, idx(c.stages));
        Value round = arith::DivUIOp::create(lb, kt, idx(c.stages));
        Value parity = arith::CmpIOp::create(
            lb, arith::CmpIPredicate::ne,
            arith::RemUIOp::create(lb, round, idx(2)), idx(0));
        nvgpu::MBarrierTryWaitParityOp::create(lb, barriers, parity,
                                               idx(10000000), slot);

        Value slotUnits = arith::IndexCastUIOp::create(
            lb, i64,
            arith::MulIOp::create(lb, slot, idx(c.stageBytes() >> 4)));
        Value lhsDesc = arith::AddIOp::create(lb, lhsDesc0, slotUnits);
        Value rhsDesc = arith::AddIOp::create(lb, rhsDesc0, slotUnits);
        NVVM::WgmmaFenceAlignedOp::create(lb);
        SmallVector<Value> next(accs);
        auto shape = NVVM::MMAShapeAttr::get(ctx, kWgmmaM, c.tileN, kStep);
        for (int64_t k = 0; k < c.tileK / kStep; ++k) {
          int64_t rhsStep = c.rhsKMajor ? k * 32 : k * kStep * kChunkBytes;
          Value rhsK = arith::AddIOp::create(lb, rhsDesc,
                                             i64Const(rhsStep >> 4));
          for (int64_t f = 0; f < numFragments; ++f) {
            int64_t lhsStep = f * kWgmmaM * kSwizzleBytes + k * 32;
            Value lhsK = arith::AddIOp::create(lb, lhsDesc,
                                               i64Const(lhsStep >> 4));
            next[f] = NVVM::WgmmaMmaAsyncOp::create(
                lb, fragmentType, next[f], lhsK, rhsK, shape, wgmmaType,
                wgmmaType, NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one,
                NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
                NVVM::MMALayout::row,
                c.rhsKMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row,
                NVVM::MMAIntOverflowAttr());
          }
        }
        NVVM::WgmmaGroupSyncAlignedOp::create(lb);
        // The previous step's group has retired once every thread gets here:
        // its slot can be refilled.
        NVVM::WgmmaWaitGroupSyncOp::create(lb, 1);
        gpu::BarrierOp::create(lb);
        Value previous = arith::SubIOp::create(lb, kt, idx(1));
        Value refill = arith::AddIOp::create(lb, previous, idx(c.stages));
        Value due = arith::AndIOp::create(
            lb,
            arith::AndIOp::create(
                lb, isLeader,
                arith::CmpIOp::create(lb, arith::CmpIPredicate::uge, kt,
                                      idx(1))),
            arith::CmpIOp::create(lb, arith::CmpIPredicate::ult, refill,
                                  numK));
        scf::IfOp::create(lb, due, [&](OpBuilder &ib, Location iloc) {
          Value prevSlot = arith::RemUIOp::create(
              ib, iloc, previous,
              arith::ConstantIndexOp::create(ib, iloc, c.stages));
          issueLoads(ib, iloc, refill, prevSlot);
          scf::YieldOp::create(ib, iloc);
        });
        scf::YieldOp::create(lb, next);
      });
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  // Every warp is done with the ring before it becomes the accumulator tile.
  gpu::BarrierOp::create(b);

  // WGMMA's m64nNk16 fragment: thread (warp w, lane l) holds, for each 8-column
  // group j, rows 16w + l/4 (+8) and columns 8j + 2(l mod 4) (+1).
  Value rowBase = arith::AddIOp::create(
      b, arith::MulIOp::create(b, frame.warp, index(16)),
      arith::DivUIOp::create(b, frame.lane, index(4)));
  Value colBase = arith::MulIOp::create(
      b, arith::RemUIOp::create(b, frame.lane, index(4)), index(2));
  for (int64_t f = 0; f < numFragments; ++f) {
    Value fragment = loop.getResult(f);
    for (int64_t j = 0; j < c.tileN / 8; ++j)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t e = 0; e < 2; ++e) {
          Value v = LLVM::ExtractValueOp::create(b, fragment,
                                                 j * 4 + h * 2 + e);
          Value row = arith::AddIOp::create(
              b, rowBase, index(f * kWgmmaM + 8 * h));
          Value col = arith::AddIOp::create(b, colBase, index(8 * j + e));
          memref::StoreOp::create(b, v, frame.accTile, ValueRange{row, col});
        }
  }
  gpu::BarrierOp::create(b);
}

} // namespace

std::unique_ptr<GemmTarget>
mlir::coda::gpu_lowering::getGemmTarget(StringRef chip) {
  if (chip == "sm_90a")
    return std::make_unique<HopperTarget>();
  return nullptr;
}
