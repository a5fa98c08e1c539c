//===- HopperMainloop.cpp - sm_90a GEMM mainloop: TMA ring + WGMMA --------===//
//
// TMA loads of the lhs and rhs tiles (either operand K-major or stored
// MN-major) go into a ring of `stages` shared-memory slots, each guarded by
// an mbarrier that counts the bytes landing in it (arrive.expect_tx /
// try_wait.parity); wgmma.mma_async runs over a slot (128-byte swizzle,
// bf16/f16/fp8 in, f32 out) with one WGMMA group in flight, the first k-tile
// starting the accumulators with scale-d 0. Three kernel shapes:
//
//   one warpgroup     thread 0 refills a slot once its group has retired
//   warp-specialized  a producer warpgroup refills slots the two consumer
//                     warpgroups (64 rows each) release via `empty` barriers
//   persistent        the same roles, CTAs loop over tiles, and warps 2-3 of
//                     the producer warpgroup run each tile's epilogue from a
//                     staging tile while the consumers compute the next one
//   cooperative       persistent, registers moved from the producer to the
//                     consumers (setmaxnreg), which run the epilogue from
//                     their accumulator registers
//
// Except in the cooperative schedule, the accumulator fragments end in a
// shared-memory tile that the epilogue reads.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
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
/// The cooperative kernels issue their epilogue's prefetch loads in this
/// many parts, one after each of the first k-tiles' WGMMAs.
constexpr int64_t kPrefetchParts = 16;

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

/// The WGMMA operand type of a GEMM operand element type, and its name in
/// PTX; none for a type WGMMA does not multiply with f32 accumulation.
std::optional<std::pair<NVVM::WGMMATypes, StringRef>>
wgmmaOperandType(Type element) {
  if (element.isBF16())
    return std::make_pair(NVVM::WGMMATypes::bf16, StringRef("bf16"));
  if (element.isF16())
    return std::make_pair(NVVM::WGMMATypes::f16, StringRef("f16"));
  if (isa<Float8E4M3FNType>(element))
    return std::make_pair(NVVM::WGMMATypes::e4m3, StringRef("e4m3"));
  if (isa<Float8E5M2Type>(element))
    return std::make_pair(NVVM::WGMMATypes::e5m2, StringRef("e5m2"));
  return std::nullopt;
}

class HopperTarget : public GemmTarget {
public:
  LogicalResult checkOperands(GemmOp op,
                              const GemmKernelConfig &config) const override {
    Type element = config.operandType;
    if (!wgmmaOperandType(element))
      return op.emitOpError("sm_90a lowering supports bf16, f16, f8E4M3FN "
                            "and f8E5M2 operands (f32 accumulation), got ")
             << element;
    // WGMMA reads 8-bit operands only K-major (PTX ISA, wgmma.mma_async:
    // transposition is for .f16 and .bf16).
    if (config.operandBytes == 1 && (!config.lhsKMajor || !config.rhsKMajor))
      return op.emitOpError("sm_90a lowering reads ")
             << element
             << " operands only K-major: lhs M x K (no transpose_a) and rhs "
                "N x K (transpose_b)";
    if (config.tileK * config.operandBytes != kSwizzleBytes)
      return op.emitOpError("tile K must span the 128-byte swizzle (")
             << kSwizzleBytes / config.operandBytes << " elements)";
    if (config.tileM % kWgmmaM != 0)
      return op.emitOpError("tile M must be a multiple of ") << kWgmmaM;
    // Accumulator registers per thread: a warpgroup's rows (all of tile M,
    // or 64 per consumer when warp-specialized) x tile N / 128.
    int64_t rowsPerWarpgroup =
        config.warpSpecialized() ? kWgmmaM : config.tileM;
    // A cluster's CTAs each load an equal part of the rhs tile: whole
    // 128-byte chunks when it is stored MN-major.
    if (!config.rhsKMajor &&
        (config.tileN / chunkElements(config)) % config.clusterM != 0)
      return op.emitOpError("a rhs stored N-major needs tile N / ")
             << chunkElements(config) << " to be a multiple of the cluster ("
             << config.clusterM << ")";
    if (rowsPerWarpgroup * config.tileN > 128 * 128)
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
    return lhsBox(c);
  }
  SmallVector<int64_t> getRhsBox(const GemmKernelConfig &c) const override {
    return rhsBox(c);
  }
  Type getOutputMapType(Type element) const override {
    return tensorMapType(sharedTileType(
        element.getContext(),
        {GemmKernelConfig::stagingRows, GemmKernelConfig::storeBoxColumns},
        element));
  }
  SmallVector<int64_t> getOutputBox() const override {
    return {GemmKernelConfig::storeBoxColumns, GemmKernelConfig::stagingRows};
  }

  void emitKernelBody(ImplicitLocOpBuilder &b, KernelFrame &frame,
                      const GemmKernelConfig &config,
                      EpilogueEmitter epilogue) const override;

  static int64_t chunkElements(const GemmKernelConfig &c) {
    return kChunkBytes / c.operandBytes;
  }
  /// An operand's TMA box, innermost dimension first: one box of a K-major
  /// tile, else one 128-byte chunk of it; depth 1 along a batch.
  static SmallVector<int64_t> lhsBox(const GemmKernelConfig &c) {
    SmallVector<int64_t> box = {c.lhsKMajor ? c.tileK : chunkElements(c),
                                c.lhsKMajor ? c.tileM : c.tileK};
    if (c.batched)
      box.push_back(1);
    return box;
  }
  static SmallVector<int64_t> rhsBox(const GemmKernelConfig &c) {
    SmallVector<int64_t> box = {c.rhsKMajor ? c.tileK : chunkElements(c),
                                c.rhsKMajor ? c.rhsRowsPerCta() : c.tileK};
    if (c.rhsBatched)
      box.push_back(1);
    return box;
  }
  /// The shared-memory box of a TMA load, outermost first (the reverse of
  /// lhsBox / rhsBox).
  static MemRefType lhsBoxType(const GemmKernelConfig &c) {
    return boxType(c, lhsBox(c));
  }
  static MemRefType rhsBoxType(const GemmKernelConfig &c) {
    return boxType(c, rhsBox(c));
  }
  static MemRefType boxType(const GemmKernelConfig &c,
                            ArrayRef<int64_t> innermostFirst) {
    return sharedTileType(c.operandType.getContext(),
                          llvm::to_vector(llvm::reverse(innermostFirst)),
                          c.operandType);
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

/// `scf.for` over the CTA's tiles (blockIdx.x, + gridDim.x, ... below
/// `numTiles`), or with clusters of `clusterM` CTAs the cluster's tiles
/// (cluster index, + number of clusters, ...); `body` gets the linear tile
/// index and the iteration number.
void forEachTile(
    ImplicitLocOpBuilder &b, Value numTiles, int64_t clusterM,
    function_ref<void(ImplicitLocOpBuilder &, Value tile, Value iteration)>
        body) {
  Value first = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value stride = gpu::GridDimOp::create(b, gpu::Dimension::x);
  if (clusterM > 1) {
    Value size = arith::ConstantIndexOp::create(b, clusterM);
    first = arith::DivUIOp::create(b, first, size);
    stride = arith::DivUIOp::create(b, stride, size);
  }
  scf::ForOp::create(
      b, first, numTiles, stride, ValueRange{},
      [&](OpBuilder &ob, Location loc, Value tile, ValueRange) {
        ImplicitLocOpBuilder lb(loc, ob);
        Value iteration = arith::DivUIOp::create(
            lb, arith::SubIOp::create(lb, tile, first), stride);
        body(lb, tile, iteration);
        scf::YieldOp::create(lb);
      });
}

/// The pieces both mainloop variants are made of: the TMA ring and its
/// barriers, WGMMA steps over a ring slot, and the fragment store.
class Mainloop {
public:
  Mainloop(ImplicitLocOpBuilder &b, const KernelFrame &frame,
           const GemmKernelConfig &c)
      : b(b), frame(frame), c(c), ctx(b.getContext()) {
    lhsBox = HopperTarget::lhsBoxType(c);
    rhsBox = HopperTarget::rhsBoxType(c);
    fragmentType = LLVM::LLVMStructType::getLiteral(
        ctx, SmallVector<Type>(c.tileN / 2, b.getF32Type()));
    numK = arith::CeilDivUIOp::create(b, frame.sizeK, index(b, c.tileK));
  }

  static Value index(OpBuilder &ob, Location loc, int64_t v) {
    return arith::ConstantIndexOp::create(ob, loc, v);
  }
  Value index(ImplicitLocOpBuilder &ib, int64_t v) const {
    return arith::ConstantIndexOp::create(ib, v);
  }
  int64_t chunkElements() const { return HopperTarget::chunkElements(c); }

  /// Brings both TMA descriptors into cache before the first load.
  void prefetchDescriptors(ImplicitLocOpBuilder &lb) {
    nvgpu::TmaPrefetchOp::create(lb, frame.lhsMap, Value());
    nvgpu::TmaPrefetchOp::create(lb, frame.rhsMap, Value());
  }

  /// A group of `slots` mbarriers (one per ring slot by default) in shared
  /// memory, initialized by thread 0 with `count` arrivals per phase.
  Value createBarriers(int64_t count, int64_t slots = 0) {
    if (!slots)
      slots = c.stages;
    auto type =
        nvgpu::MBarrierGroupType::get(ctx, workgroupSpace(ctx), slots);
    Value group = nvgpu::MBarrierCreateOp::create(b, type);
    initialized.push_back({group, count, slots});
    return group;
  }
  /// Initializes every barrier group, visible to all threads and to TMA.
  void initBarriers() {
    // The shared-memory fit check counts barrierCount() barriers
    // (staticSharedBytes): a schedule that creates others is a bug in this
    // file, which every kernel the lit suite compiles would hit.
    int64_t created = 0;
    for (const auto &group : initialized)
      created += std::get<2>(group);
    if (created != c.barrierCount())
      llvm::report_fatal_error("coda-to-gpu: the schedule creates " +
                               Twine(created) +
                               " mbarriers, barrierCount() "
                               "counts " +
                               Twine(c.barrierCount()));
    Value leader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                         frame.tid, index(b, 0));
    scf::IfOp::create(b, leader, [&](OpBuilder &ob, Location loc) {
      for (auto [group, count, slots] : initialized)
        for (int64_t s = 0; s < slots; ++s)
          nvgpu::MBarrierInitOp::create(ob, loc, group, index(ob, loc, count),
                                        index(ob, loc, s), Value());
      NVVM::FenceMbarrierInitOp::create(ob, loc);
      scf::YieldOp::create(ob, loc);
    });
    if (c.clusterM > 1)
      syncCluster(b);
    else
      gpu::BarrierOp::create(b);
  }

  /// Every thread of the cluster: the CTAs' barriers initialized before any
  /// CTA multicasts into another or arrives on its barriers, and at the end,
  /// no CTA gone while another may still arrive on its barriers.
  static void syncCluster(ImplicitLocOpBuilder &lb) {
    NVVM::ClusterArriveOp::create(lb, UnitAttr());
    NVVM::ClusterWaitOp::create(lb, UnitAttr());
  }

  /// Arrives on barrier `group[slot]` of every CTA of the cluster. The
  /// caller's reads of the slot (WGMMA) have retired before; release at CTA
  /// scope, as CUTLASS's cluster barrier does: at cluster scope the arrive
  /// carries a cluster-wide fence that waits for the thread's outstanding
  /// global stores (the previous tile's epilogue) on every k-tile.
  void arriveClusterWide(ImplicitLocOpBuilder &lb, Value group, Value slot) {
    Type i32 = lb.getI32Type();
    Value local = LLVM::IntToPtrOp::create(
        lb, LLVM::LLVMPointerType::get(ctx, 3),
        nvgpu::MBarrierGetOp::create(lb, i32, group, slot).getResult());
    for (int64_t rank = 0; rank < c.clusterM; ++rank) {
      Value remote = NVVM::MapaOp::create(
          lb, LLVM::LLVMPointerType::get(ctx, 7), local,
          arith::ConstantIntOp::create(lb, i32, rank));
      NVVM::MBarrierArriveOp::create(lb, Type(), remote, Value(),
                                     NVVM::MemScopeKind::CTA,
                                     /*relaxed=*/false);
    }
  }

  /// TMA loads of k-tile `kt` of the CTA's tile into slot `slot`,
  /// completing on full[slot].
  void issueLoads(ImplicitLocOpBuilder &lb, Value full, Value kt, Value slot) {
    issueLoads(lb, full, kt, slot, frame.blockM, frame.blockN, frame.batch);
  }
  /// The same for the tile at (blockM, blockN) of batch `batch` (null when
  /// unbatched).
  void issueLoads(ImplicitLocOpBuilder &lb, Value full, Value kt, Value slot,
                  Value blockM, Value blockN, Value batch) {
    Value slotBase = arith::AddIOp::create(
        lb, frame.sharedBase,
        arith::MulIOp::create(lb, slot, index(lb, c.stageBytes())));
    nvgpu::MBarrierArriveExpectTxOp::create(lb, full, index(lb, c.stageBytes()),
                                            slot, Value());
    Value kOffset = arith::MulIOp::create(lb, kt, index(lb, c.tileK));
    // An operand's tile: one box when K-major; when stored MN-major (lhs
    // K x M, rhs K x N), chunks 128 bytes wide along M (N), each tileK rows
    // deep, one after the other. `parts` > 1: the CTAs of a cluster each
    // load part `frame.clusterRank` of the tile (rows of a K-major box,
    // every parts-th chunk) and multicast it to every CTA of the cluster,
    // into the same offset of the same slot.
    // A batched operand's descriptor is 3-D: its batch is the outermost
    // coordinate.
    auto load = [&](Value base, Value map, MemRefType box, bool kMajor,
                    Value origin, int64_t extent, int64_t parts) {
      auto coordinates = [&](Value inner, Value outer) {
        SmallVector<Value> at = {inner, outer};
        if (box.getRank() == 3)
          at.push_back(batch);
        return at;
      };
      Value mask;
      if (parts > 1)
        mask = arith::ConstantIntOp::create(lb, lb.getI16Type(),
                                            (1 << parts) - 1);
      if (kMajor) {
        if (parts > 1) {
          int64_t rows = extent / parts;
          base = arith::AddIOp::create(
              lb, base,
              arith::MulIOp::create(lb, frame.clusterRank,
                                    index(lb, rows * kSwizzleBytes)));
          origin = arith::AddIOp::create(
              lb, origin,
              arith::MulIOp::create(lb, frame.clusterRank, index(lb, rows)));
        }
        Value dst = memref::ViewOp::create(lb, box, frame.shared, base,
                                           ValueRange{});
        nvgpu::TmaAsyncLoadOp::create(lb, dst, full, map,
                                      coordinates(kOffset, origin), slot, mask,
                                      Value());
        return;
      }
      for (int64_t j = 0; j < extent / chunkElements() / parts; ++j) {
        Value chunk = index(lb, j * parts);
        if (parts > 1)
          chunk = arith::AddIOp::create(lb, chunk, frame.clusterRank);
        Value dst = memref::ViewOp::create(
            lb, box, frame.shared,
            arith::AddIOp::create(
                lb, base,
                arith::MulIOp::create(lb, chunk,
                                      index(lb, c.tileK * kChunkBytes))),
            ValueRange{});
        Value at = arith::AddIOp::create(
            lb, origin,
            arith::MulIOp::create(lb, chunk, index(lb, chunkElements())));
        nvgpu::TmaAsyncLoadOp::create(
            lb, dst, full, map, coordinates(at, kOffset), slot, mask, Value());
      }
    };
    load(slotBase, frame.lhsMap, lhsBox, c.lhsKMajor, blockM, c.tileM,
         /*parts=*/1);
    load(arith::AddIOp::create(lb, slotBase, index(lb, c.lhsTileBytes())),
         frame.rhsMap, rhsBox, c.rhsKMajor, blockN, c.tileN, c.clusterM);
  }

  /// The producer's step for k-tile `kt` of the tile at (blockM, blockN),
  /// the `use`-th use of the ring: from the second round on, waits until the
  /// consumers released the slot's previous use, then loads into it.
  void produce(ImplicitLocOpBuilder &kb, Value full, Value empty, Value kt,
               Value use, Value blockM, Value blockN, Value batch) {
    Value slot = arith::RemUIOp::create(kb, use, index(kb, c.stages));
    Value reuse = arith::CmpIOp::create(kb, arith::CmpIPredicate::uge, use,
                                        index(kb, c.stages));
    scf::IfOp::create(kb, reuse, [&](OpBuilder &wb, Location wloc) {
      ImplicitLocOpBuilder ib(wloc, wb);
      waitRound(ib, empty, use, slot, /*roundsBack=*/1);
      scf::YieldOp::create(ib);
    });
    issueLoads(kb, full, kt, slot, blockM, blockN, batch);
  }

  /// Waits until barrier `group[slot]` completed the phase of round
  /// kt / stages - roundsBack (each use of a slot is one round).
  void waitRound(ImplicitLocOpBuilder &lb, Value group, Value kt, Value slot,
                 int64_t roundsBack = 0) {
    Value round = arith::DivUIOp::create(lb, kt, index(lb, c.stages));
    if (roundsBack)
      round = arith::SubIOp::create(lb, round, index(lb, roundsBack));
    waitPhase(lb, group, round, slot);
  }
  /// From the CTA's second tile on (`iteration` > 0), waits until barrier
  /// `group[slot]` completed phase `round`.
  void waitPhaseAfterFirstTile(ImplicitLocOpBuilder &lb, Value iteration,
                               Value group, Value round, Value slot) {
    Value later = arith::CmpIOp::create(lb, arith::CmpIPredicate::ugt,
                                        iteration, index(lb, 0));
    scf::IfOp::create(lb, later, [&](OpBuilder &ib, Location iloc) {
      ImplicitLocOpBuilder wb(iloc, ib);
      waitPhase(wb, group, round, slot);
      scf::YieldOp::create(wb);
    });
  }
  /// Waits until barrier `group[slot]` completed its phase number `round`.
  void waitPhase(ImplicitLocOpBuilder &lb, Value group, Value round,
                 Value slot) {
    Value parity = arith::CmpIOp::create(
        lb, arith::CmpIPredicate::ne,
        arith::RemUIOp::create(lb, round, index(lb, 2)), index(lb, 0));
    nvgpu::MBarrierTryWaitParityOp::create(lb, group, parity,
                                           index(lb, 10000000), slot);
  }

  /// Descriptors of slot 0 (computed once, outside the loop).
  void buildDescriptors() {
    constexpr int64_t kRowGroupBytes = 8 * kSwizzleBytes;
    Value address = arith::AddIOp::create(
        b, memref::ExtractAlignedPointerAsIndexOp::create(b, frame.shared),
        frame.sharedBase);
    lhsDesc0 = buildMatrixDescriptor(
        b, address, c.lhsKMajor ? 16 : c.tileK * kChunkBytes, kRowGroupBytes);
    rhsDesc0 = buildMatrixDescriptor(
        b, arith::AddIOp::create(b, address, index(b, c.lhsTileBytes())),
        c.rhsKMajor ? 16 : c.tileK * kChunkBytes, kRowGroupBytes);
  }

  /// One k-tile of WGMMA on slot `slot`: fragment f covers rows
  /// firstRow + 64 f of the tile, moved down by `rowUnits` (a descriptor
  /// offset, in 16-byte units) when given. Fenced and committed as one group.
  /// On the first k-tile the first WGMMA ignores the accumulators
  /// (scale-d 0), so they never need zeroing in registers; zeroing them there
  /// would make ptxas fence the WGMMAs (C7519).
  SmallVector<Value> mmaStep(ImplicitLocOpBuilder &lb, Value slot,
                             ValueRange accs, int64_t firstRow,
                             Value rowUnits, bool firstTile) {
    Type i64 = lb.getI64Type();
    auto i64Const = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(lb, i64, v);
    };
    Value slotUnits = arith::IndexCastUIOp::create(
        lb, i64, arith::MulIOp::create(lb, slot, index(lb, c.stageBytes() >> 4)));
    Value lhsDesc = arith::AddIOp::create(lb, lhsDesc0, slotUnits);
    if (rowUnits)
      lhsDesc = arith::AddIOp::create(lb, lhsDesc, rowUnits);
    Value rhsDesc = arith::AddIOp::create(lb, rhsDesc0, slotUnits);
    NVVM::WGMMATypes wgmmaType = wgmmaOperandType(c.operandType)->first;
    int64_t kStep = 32 / c.operandBytes;
    auto shape = NVVM::MMAShapeAttr::get(ctx, kWgmmaM, c.tileN, kStep);
    NVVM::WgmmaFenceAlignedOp::create(lb);
    SmallVector<Value> next(accs);
    for (int64_t k = 0; k < c.tileK / kStep; ++k) {
      int64_t rhsStep = c.rhsKMajor ? k * 32 : k * kStep * kChunkBytes;
      Value rhsK = arith::AddIOp::create(lb, rhsDesc, i64Const(rhsStep >> 4));
      for (size_t f = 0; f < next.size(); ++f) {
        // 64 rows of a K-major lhs are 64 x 128 bytes; a 64-row chunk of an
        // MN-major one is tileK x 128 bytes, the same when tileK is 64.
        int64_t lhsStep = (firstRow + f * kWgmmaM) * kSwizzleBytes +
                          (c.lhsKMajor ? k * 32 : k * kStep * kChunkBytes);
        Value lhsK = arith::AddIOp::create(lb, lhsDesc, i64Const(lhsStep >> 4));
        if (firstTile && k == 0) {
          next[f] = startAccumulators(lb, lhsK, rhsK);
          continue;
        }
        next[f] = NVVM::WgmmaMmaAsyncOp::create(
            lb, fragmentType, next[f], lhsK, rhsK, shape, wgmmaType, wgmmaType,
            NVVM::WGMMATypes::f32,
            firstTile && k == 0 ? NVVM::WGMMAScaleOut::zero
                                : NVVM::WGMMAScaleOut::one,
            NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
            c.lhsKMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col,
            c.rhsKMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row,
            NVVM::MMAIntOverflowAttr());
      }
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(lb);
    return next;
  }

  /// The first WGMMA of a tile, scale-d 0, with its accumulators as outputs
  /// only: nvvm.wgmma.mma_async always reads them (an in-out operand), and
  /// the undefined values it would read become register copies that ptxas
  /// counts as reads of accumulators in flight once a persistent kernel
  /// reuses the registers across tiles (C7514).
  Value startAccumulators(ImplicitLocOpBuilder &lb, Value lhsDesc,
                          Value rhsDesc) {
    int64_t count = c.tileN / 2;
    std::string outs;
    for (int64_t i = 0; i < count; ++i)
      outs += (i ? ", $" : "$") + std::to_string(i);
    std::string type = wgmmaOperandType(c.operandType)->second.str();
    std::string text =
        "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\nwgmma.mma_async.sync."
        "aligned.m64n" +
        std::to_string(c.tileN) + "k" + std::to_string(32 / c.operandBytes) +
        ".f32." + type + "." + type + " {" +
        outs + "}, $" + std::to_string(count) + ", $" +
        std::to_string(count + 1) + ", p, 1, 1" +
        // The transpose operands exist for 16-bit types only (8-bit ones
        // are K-major, checkOperands).
        (c.operandBytes == 2 ? std::string(", ") + (c.lhsKMajor ? "0" : "1") +
                                   ", " + (c.rhsKMajor ? "0" : "1")
                             : std::string()) +
        ";\n}\n";
    std::string constraints;
    for (int64_t i = 0; i < count; ++i)
      constraints += "=f,";
    constraints += "l,l";
    return LLVM::InlineAsmOp::create(
               lb, fragmentType, ValueRange{lhsDesc, rhsDesc}, text,
               constraints, /*has_side_effects=*/true,
               /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
               LLVM::AsmDialectAttr(), ArrayAttr())
        .getResult(0);
  }

  /// The K loop: k-tile 0 peeled (so that it can start the accumulators
  /// with scale-d 0), then `step` for k-tiles 1..numK-1. `afterStep`, when
  /// given, runs after each of the first `peeled` k-tiles p (its WGMMAs
  /// issued, and still running in the tensor cores), those k-tiles peeled
  /// out of the loop (each but the first guarded by p < numK; `peeled` >=
  /// 1). With no
  /// k-tile the
  /// accumulators are zero: the zeros join the WGMMA results before the
  /// loop, so that the epilogue reads the WGMMA registers themselves (a
  /// select after the loop made ptxas copy all of them out, and spill).
  SmallVector<Value>
  kLoop(int64_t numFragments,
        function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value,
                                        ValueRange, bool)>
            step,
        function_ref<void(ImplicitLocOpBuilder &, int64_t)> afterStep = {},
        int64_t peeled = 1) {
    SmallVector<Type> types(numFragments, fragmentType);
    Value any = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, numK,
                                      index(b, 0));
    auto first = scf::IfOp::create(b, types, any, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(first.thenBlock());
      // Unused: the first WGMMA of a tile writes without reading.
      SmallVector<Value> undefined;
      for (int64_t i = 0; i < numFragments; ++i)
        undefined.push_back(LLVM::PoisonOp::create(b, fragmentType));
      scf::YieldOp::create(b, step(b, index(b, 0), undefined, true));
      b.setInsertionPointToStart(first.elseBlock());
      scf::YieldOp::create(b, zeroFragments(numFragments));
    }
    SmallVector<Value> accs(first.getResults());
    if (afterStep)
      afterStep(b, 0);
    for (int64_t p = 1; afterStep && p < peeled; ++p) {
      Value inRange = arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, numK,
                                            index(b, p));
      auto next = scf::IfOp::create(b, types, inRange, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(next.thenBlock());
        scf::YieldOp::create(b, step(b, index(b, p), accs, false));
        b.setInsertionPointToStart(next.elseBlock());
        scf::YieldOp::create(b, accs);
      }
      accs.assign(next.getResults().begin(), next.getResults().end());
      afterStep(b, p);
    }
    auto loop = scf::ForOp::create(
        b, index(b, afterStep ? peeled : 1), numK, index(b, 1), accs,
        [&](OpBuilder &ob, Location loc, Value kt, ValueRange accs) {
          ImplicitLocOpBuilder lb(loc, ob);
          scf::YieldOp::create(lb, step(lb, kt, accs, false));
        });
    return SmallVector<Value>(loop.getResults());
  }

  SmallVector<Value> zeroFragments(int64_t count) {
    SmallVector<Value> zeros;
    for (int64_t i = 0; i < count; ++i)
      zeros.push_back(LLVM::ZeroOp::create(b, fragmentType));
    return zeros;
  }

  /// WGMMA's m64nNk16 fragment: thread (warp w, lane l) of a warpgroup holds,
  /// for each 8-column group j, rows 16w + l/4 (+8) and columns
  /// 8j + 2(l mod 4) (+1). `warp` numbers warps from the tile's first row.
  void storeFragments(ValueRange fragments, Value warp, Value lane) {
    Value rowBase = arith::AddIOp::create(
        b, arith::MulIOp::create(b, warp, index(b, 16)),
        arith::DivUIOp::create(b, lane, index(b, 4)));
    Value colBase = arith::MulIOp::create(
        b, arith::RemUIOp::create(b, lane, index(b, 4)), index(b, 2));
    for (auto [f, fragment] : llvm::enumerate(fragments))
      for (int64_t j = 0; j < c.tileN / 8; ++j)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t e = 0; e < 2; ++e) {
            Value v = LLVM::ExtractValueOp::create(b, fragment,
                                                   j * 4 + h * 2 + e);
            Value row = arith::AddIOp::create(
                b, rowBase, index(b, int64_t(f) * kWgmmaM + 8 * h));
            Value col = arith::AddIOp::create(b, colBase, index(b, 8 * j + e));
            memref::StoreOp::create(b, v, frame.accTile, ValueRange{row, col});
          }
  }

  /// Tiles of the output: ceil(M / tileM) * ceil(N / tileN).
  Value countTiles() {
    Value tiles = arith::MulIOp::create(
        b,
        arith::CeilDivUIOp::create(b, frame.sizeM,
                                   index(b, c.tileM * c.clusterM)),
        arith::CeilDivUIOp::create(b, frame.sizeN, index(b, c.tileN)));
    if (frame.batchCount)
      tiles = arith::MulIOp::create(b, tiles, frame.batchCount);
    return tiles;
  }

  /// Position of k-tile `kt` of the CTA's `iteration`-th tile in the ring's
  /// sequence of uses (a persistent CTA counts them across tiles).
  Value ringIndex(ImplicitLocOpBuilder &lb, Value iteration, Value kt) {
    return arith::AddIOp::create(lb, arith::MulIOp::create(lb, iteration, numK),
                                 kt);
  }

  /// A persistent producer's thread: streams the k-tiles of all of the
  /// CTA's tiles through the ring, running ahead across tile boundaries.
  void produceTiles(ImplicitLocOpBuilder &pb, Value full, Value empty,
                    Value numTiles) {
    prefetchDescriptors(pb);
    forEachTile(pb, numTiles, c.clusterM,
                [&](ImplicitLocOpBuilder &tb, Value tile, Value iteration) {
                  KernelFrame tileFrame = frame;
                  assignTile(tb, tileFrame, c, tile);
                  scf::ForOp::create(
                      tb, index(tb, 0), numK, index(tb, 1), ValueRange{},
                      [&](OpBuilder &fb, Location floc, Value kt, ValueRange) {
                        ImplicitLocOpBuilder kb(floc, fb);
                        produce(kb, full, empty, kt,
                                ringIndex(kb, iteration, kt), tileFrame.blockM,
                                tileFrame.blockN, tileFrame.batch);
                        scf::YieldOp::create(kb);
                      });
                });
  }

  /// A persistent consumer warpgroup's K loop over its `iteration`-th tile
  /// (its fragments `rowUnits` down, when given), at `b`: waits for each slot,
  /// releases the previous one once its group has retired (`isReleaser`: one
  /// arrival per warpgroup), and after the last wait the last slot. Returns
  /// the accumulators (see kLoop). `issued`, when
  /// given, runs once every WGMMA of the tile is issued, before the wait for
  /// the last ones: another warpgroup's K loop can then queue behind them.
  /// `afterStep`, `peeled`: see kLoop.
  SmallVector<Value> consumeTile(
      Value full, Value empty, Value iteration, Value rowUnits,
      Value isReleaser, function_ref<void(ImplicitLocOpBuilder &)> issued = {},
      function_ref<void(ImplicitLocOpBuilder &, int64_t)> afterStep = {},
      int64_t peeled = 1) {
    auto release = [&](ImplicitLocOpBuilder &lb, Value g) {
      scf::IfOp::create(lb, isReleaser, [&](OpBuilder &rb, Location rloc) {
        ImplicitLocOpBuilder ib(rloc, rb);
        Value slot = arith::RemUIOp::create(ib, g, index(ib, c.stages));
        // With clusters, every CTA's producer multicasts into this slot.
        if (c.clusterM > 1)
          arriveClusterWide(ib, empty, slot);
        else
          nvgpu::MBarrierArriveOp::create(
              ib, nvgpu::MBarrierTokenType::get(ib.getContext()), empty,
              slot);
        scf::YieldOp::create(ib);
      });
    };
    SmallVector<Value> accs = kLoop(
        c.fragmentsPerConsumer(),
        [&](ImplicitLocOpBuilder &lb, Value kt, ValueRange accs,
            bool firstTile) -> SmallVector<Value> {
          Value g = ringIndex(lb, iteration, kt);
          Value slot = arith::RemUIOp::create(lb, g, index(lb, c.stages));
          waitRound(lb, full, g, slot);
          SmallVector<Value> next =
              mmaStep(lb, slot, accs, /*firstRow=*/0, rowUnits, firstTile);
          NVVM::WgmmaWaitGroupSyncOp::create(lb, 1);
          if (!firstTile)
            release(lb, arith::SubIOp::create(lb, g, index(lb, 1)));
          return next;
        },
        afterStep, peeled);
    if (issued)
      issued(b);
    NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
    // The last k-tile's slot, once its group has retired: the producer
    // refills it with the next tile's while the epilogue runs.
    Value any =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, numK, index(b, 0));
    scf::IfOp::create(b, any, [&](OpBuilder &ib, Location iloc) {
      ImplicitLocOpBuilder lb(iloc, ib);
      release(lb, arith::SubIOp::create(lb, ringIndex(lb, iteration, numK),
                                        index(lb, 1)));
      scf::YieldOp::create(lb);
    });
    return accs;
  }

  ImplicitLocOpBuilder &b;
  const KernelFrame &frame;
  const GemmKernelConfig &c;
  MLIRContext *ctx;
  MemRefType lhsBox, rhsBox;
  Type fragmentType;
  Value numK, lhsDesc0, rhsDesc0;
  SmallVector<std::tuple<Value, int64_t, int64_t>> initialized;
};

/// tid / `threads`, made warp-uniform for the compiler (a shuffle from lane
/// 0) so that ptxas sees role branches as uniform and does not serialize
/// WGMMA around them.
Value uniformGroupIndex(ImplicitLocOpBuilder &b, Value tid, int64_t threads) {
  Value group = arith::DivUIOp::create(
      b, tid, arith::ConstantIndexOp::create(b, threads));
  Value i32 = arith::IndexCastUIOp::create(b, b.getI32Type(), group);
  return arith::IndexCastUIOp::create(
      b, b.getIndexType(),
      gpu::ShuffleOp::create(b, i32, 0, 32, gpu::ShuffleMode::IDX)
          .getShuffleResult());
}

/// One warpgroup both loads and computes: thread 0 refills a slot once the
/// WGMMA group that read it has retired (wait_group 1, then a CTA barrier).
void emitSingleWarpgroup(ImplicitLocOpBuilder &b, const KernelFrame &frame,
                         const GemmKernelConfig &c) {
  Mainloop m(b, frame, c);
  Value full = m.createBarriers(1);
  m.initBarriers();
  Value isLeader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                         frame.tid, m.index(b, 0));

  // Prologue: fill every slot that has a k-tile.
  scf::IfOp::create(b, isLeader, [&](OpBuilder &ob, Location loc) {
    ImplicitLocOpBuilder lb(loc, ob);
    m.prefetchDescriptors(lb);
    for (int64_t s = 0; s < c.stages; ++s) {
      Value slot = m.index(lb, s);
      Value has =
          arith::CmpIOp::create(lb, arith::CmpIPredicate::ult, slot, m.numK);
      scf::IfOp::create(lb, has, [&](OpBuilder &ib, Location iloc) {
        ImplicitLocOpBuilder bb(iloc, ib);
        m.issueLoads(bb, full, slot, slot);
        scf::YieldOp::create(bb);
      });
    }
    scf::YieldOp::create(lb);
  });

  m.buildDescriptors();
  SmallVector<Value> accs = m.kLoop(
      c.tileM / kWgmmaM,
      [&](ImplicitLocOpBuilder &lb, Value kt, ValueRange accs,
          bool firstTile) -> SmallVector<Value> {
        Value slot = arith::RemUIOp::create(lb, kt, m.index(lb, c.stages));
        m.waitRound(lb, full, kt, slot);
        SmallVector<Value> next =
            m.mmaStep(lb, slot, accs, /*firstRow=*/0, Value(), firstTile);
        // The previous step's group has retired once every thread gets here:
        // its slot can be refilled.
        NVVM::WgmmaWaitGroupSyncOp::create(lb, 1);
        gpu::BarrierOp::create(lb);
        if (firstTile)
          return next;
        Value previous = arith::SubIOp::create(lb, kt, m.index(lb, 1));
        Value refill =
            arith::AddIOp::create(lb, previous, m.index(lb, c.stages));
        Value due = arith::AndIOp::create(
            lb, isLeader,
            arith::CmpIOp::create(lb, arith::CmpIPredicate::ult, refill,
                                  m.numK));
        scf::IfOp::create(lb, due, [&](OpBuilder &ib, Location iloc) {
          ImplicitLocOpBuilder bb(iloc, ib);
          Value prevSlot =
              arith::RemUIOp::create(bb, previous, m.index(bb, c.stages));
          m.issueLoads(bb, full, refill, prevSlot);
          scf::YieldOp::create(bb);
        });
        return next;
      });
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);
  // Every warp is done with the ring before it becomes the accumulator tile.
  gpu::BarrierOp::create(b);
  m.storeFragments(accs, frame.warp, frame.lane);
  gpu::BarrierOp::create(b);
}

/// Warpgroup 0 produces: one thread keeps the ring full, waiting on each
/// slot's `empty` barrier before refilling it. Warpgroups 1 and 2 consume:
/// each computes 64 rows of the tile, and releases a slot (one arrival per
/// warpgroup on `empty`) once its WGMMA group on that slot has retired. No
/// CTA-wide barrier inside the loop. Only the consumers run the epilogue.
/// There is no register reallocation (setmaxnreg): the roles are scf.if
/// regions that rejoin before the kernel's return, which roles with
/// different register budgets must not do, and a 64 x 256 fragment per
/// consumer fits without spills at the even split. The cooperative schedule
/// reallocates, with roles as blocks of their own
/// (emitRegisterEpilogueSchedule).
OpBuilder::InsertPoint emitWarpSpecialized(ImplicitLocOpBuilder &b,
                                           KernelFrame &frame,
                                           const GemmKernelConfig &c) {
  Mainloop m(b, frame, c);
  Value full = m.createBarriers(1);
  Value empty = m.createBarriers(2);
  m.initBarriers();
  m.buildDescriptors();
  Value warpgroup = uniformGroupIndex(b, frame.tid, 128);
  Value isProducer = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                           warpgroup, m.index(b, 0));

  scf::IfOp::create(b, isProducer, [&](OpBuilder &ob, Location loc) {
    ImplicitLocOpBuilder lb(loc, ob);
    Value leader = arith::CmpIOp::create(lb, arith::CmpIPredicate::eq,
                                         frame.tid, m.index(lb, 0));
    scf::IfOp::create(lb, leader, [&](OpBuilder &pb, Location ploc) {
      ImplicitLocOpBuilder bb(ploc, pb);
      m.prefetchDescriptors(bb);
      scf::ForOp::create(
          bb, m.index(bb, 0), m.numK, m.index(bb, 1), ValueRange{},
          [&](OpBuilder &fb, Location floc, Value kt, ValueRange) {
            ImplicitLocOpBuilder kb(floc, fb);
            m.produce(kb, full, empty, kt, kt, frame.blockM, frame.blockN,
                      frame.batch);
            scf::YieldOp::create(kb);
          });
      scf::YieldOp::create(bb);
    });
    scf::YieldOp::create(lb);
  });

  // The consumers: everything from here to the end of the epilogue.
  auto consumer = scf::IfOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::ne, warpgroup,
                               m.index(b, 0)),
      [&](OpBuilder &ob, Location loc) { scf::YieldOp::create(ob, loc); });
  OpBuilder::InsertPoint after = b.saveInsertionPoint();
  b.setInsertionPoint(consumer.thenBlock()->getTerminator());

  // Renumber the consumers 0..255 for the epilogue.
  frame.tid = arith::SubIOp::create(b, frame.tid, m.index(b, 128));
  frame.warp = arith::DivUIOp::create(b, frame.tid, m.index(b, 32));
  frame.lane = arith::RemUIOp::create(b, frame.tid, m.index(b, 32));
  Value consumerIndex =
      arith::SubIOp::create(b, warpgroup, m.index(b, 1));
  Value isReleaser = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, frame.tid, m.index(b, 128)), m.index(b, 0));
  // Each consumer's 64 rows start at 64 * consumerIndex: its lhs
  // descriptors move down by that many rows.
  Value rowUnits = arith::IndexCastUIOp::create(
      b, b.getI64Type(),
      arith::MulIOp::create(b, consumerIndex,
                            m.index(b, kWgmmaM * kSwizzleBytes >> 4)));
  SmallVector<Value> accs = m.kLoop(
      1, [&](ImplicitLocOpBuilder &lb, Value kt, ValueRange accs,
             bool firstTile) -> SmallVector<Value> {
        Value slot = arith::RemUIOp::create(lb, kt, m.index(lb, c.stages));
        m.waitRound(lb, full, kt, slot);
        SmallVector<Value> next =
            m.mmaStep(lb, slot, accs, /*firstRow=*/0, rowUnits, firstTile);
        NVVM::WgmmaWaitGroupSyncOp::create(lb, 1);
        if (firstTile)
          return next;
        // The previous k-tile's group has retired: release its slot.
        scf::IfOp::create(lb, isReleaser, [&](OpBuilder &rb, Location rloc) {
          ImplicitLocOpBuilder ib(rloc, rb);
          Value previous = arith::RemUIOp::create(
              ib, arith::SubIOp::create(ib, kt, m.index(ib, 1)),
              m.index(ib, c.stages));
          nvgpu::MBarrierArriveOp::create(
              ib, nvgpu::MBarrierTokenType::get(ib.getContext()), empty, previous);
          scf::YieldOp::create(ib);
        });
        return next;
      });
  NVVM::WgmmaWaitGroupSyncOp::create(b, 0);

  // The ring becomes the accumulator tile once both consumers are done.
  frame.syncEpilogue = [](ImplicitLocOpBuilder &sb) {
    Type i32 = sb.getI32Type();
    NVVM::BarrierOp::create(sb, Type(),
                            arith::ConstantIntOp::create(sb, i32, 1),
                            arith::ConstantIntOp::create(sb, i32, 256),
                            NVVM::BarrierReductionAttr(), Value());
  };
  frame.syncEpilogue(b);
  m.storeFragments(accs, frame.warp, frame.lane);
  frame.syncEpilogue(b);
  return after;
}



/// Persistent and warp-specialized, 384 threads: each CTA loops over tiles
/// (blockIdx.x, + gridDim.x, ...). The first thread of warp 0 streams the
/// k-tiles of all of the CTA's tiles through the ring, running ahead across
/// tile boundaries. Warpgroups 1 and 2 compute 64 rows each, then hand the
/// accumulators over in a staging tile after the ring (`staged`, once the
/// previous hand-over has been `drained` by the epilogue) and go on with the
/// next tile. Warps 2-3 run the epilogue from the staging tile meanwhile (a
/// fourth warpgroup would leave the consumers too few registers). Ring slots
/// and hand-overs are counted across tiles; each barrier is waited on for
/// consecutive phases only, as parity waits require.
void emitPersistent(ImplicitLocOpBuilder &b, KernelFrame &frame,
                    const GemmKernelConfig &c, EpilogueEmitter epilogue) {
  // Two consumer warpgroups; the epilogue warps are the configuration's.
  const int64_t consumerThreads = c.numThreads - 128,
                epilogueThreads = c.epilogueThreads;
  Mainloop m(b, frame, c);
  Value full = m.createBarriers(1);
  Value empty = m.createBarriers(2);
  Value staged = m.createBarriers(consumerThreads, /*slots=*/1);
  Value drained = m.createBarriers(epilogueThreads, /*slots=*/1);
  m.initBarriers();
  m.buildDescriptors();
  Value warpgroup = uniformGroupIndex(b, frame.tid, 128);
  Value zero = m.index(b, 0);
  Value numTiles = m.countTiles();
  auto isWarpgroup = [&](int64_t i) -> Value {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, warpgroup,
                                 m.index(b, i));
  };
  // Warp 0 of warpgroup 0 produces, its last epilogueThreads / 32 warps
  // run the epilogue; the warp index is made warp-uniform like the
  // warpgroup's.
  const int64_t firstEpilogueThread = 128 - epilogueThreads;
  assert(firstEpilogueThread >= 32 && "warp 0 produces");
  Value warpOfProducerGroup = uniformGroupIndex(b, frame.tid, 32);
  Value isEpilogue = arith::AndIOp::create(
      b, isWarpgroup(0),
      arith::CmpIOp::create(b, arith::CmpIPredicate::uge, warpOfProducerGroup,
                            m.index(b, firstEpilogueThread / 32)));

  // Producer.
  Value isProducerLeader = arith::AndIOp::create(
      b, isWarpgroup(0),
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, frame.tid, zero));
  scf::IfOp::create(b, isProducerLeader, [&](OpBuilder &ob, Location loc) {
    ImplicitLocOpBuilder pb(loc, ob);
    m.produceTiles(pb, full, empty, numTiles);
    scf::YieldOp::create(pb);
  });

  // Consumers.
  Value isConsumer = arith::AndIOp::create(
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::uge, warpgroup,
                            m.index(b, 1)),
      arith::CmpIOp::create(b, arith::CmpIPredicate::ule, warpgroup,
                            m.index(b, 2)));
  scf::IfOp::create(b, isConsumer, [&](OpBuilder &ob, Location loc) {
    ImplicitLocOpBuilder cb(loc, ob);
    Value consumerTid = arith::SubIOp::create(cb, frame.tid, m.index(cb, 128));
    Value warp = arith::DivUIOp::create(cb, consumerTid, m.index(cb, 32));
    Value lane = arith::RemUIOp::create(cb, consumerTid, m.index(cb, 32));
    Value isReleaser = arith::CmpIOp::create(
        cb, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(cb, consumerTid, m.index(cb, 128)),
        m.index(cb, 0));
    Value rowUnits = arith::IndexCastUIOp::create(
        cb, cb.getI64Type(),
        arith::MulIOp::create(
            cb, arith::SubIOp::create(cb, warpgroup, m.index(cb, 1)),
            m.index(cb, kWgmmaM * kSwizzleBytes >> 4)));
    forEachTile(cb, numTiles, /*clusterM=*/1,
                [&](ImplicitLocOpBuilder &tb, Value tile, Value iteration) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
      SmallVector<Value> accs =
          m.consumeTile(full, empty, iteration, rowUnits, isReleaser);
      // The staging tile is free once the epilogue has drained the previous
      // tile's hand-over.
      m.waitPhaseAfterFirstTile(
          b, iteration, drained,
          arith::SubIOp::create(b, iteration, m.index(b, 1)), m.index(b, 0));
      m.storeFragments(accs, warp, lane);
      nvgpu::MBarrierArriveOp::create(
          b, nvgpu::MBarrierTokenType::get(b.getContext()), staged,
          m.index(b, 0));
    });
    scf::YieldOp::create(cb);
  });

  // Epilogue warps, with their own numbering and named barrier.
  scf::IfOp::create(b, isEpilogue, [&](OpBuilder &ob, Location loc) {
    ImplicitLocOpBuilder eb(loc, ob);
    KernelFrame epilogueFrame = frame;
    epilogueFrame.tid =
        arith::SubIOp::create(eb, frame.tid, m.index(eb, firstEpilogueThread));
    epilogueFrame.warp =
        arith::DivUIOp::create(eb, epilogueFrame.tid, m.index(eb, 32));
    epilogueFrame.lane =
        arith::RemUIOp::create(eb, epilogueFrame.tid, m.index(eb, 32));
    epilogueFrame.syncEpilogue = [epilogueThreads](ImplicitLocOpBuilder &sb) {
      Type i32 = sb.getI32Type();
      NVVM::BarrierOp::create(
          sb, Type(), arith::ConstantIntOp::create(sb, i32, 1),
          arith::ConstantIntOp::create(sb, i32, epilogueThreads),
          NVVM::BarrierReductionAttr(), Value());
    };
    forEachTile(eb, numTiles, /*clusterM=*/1,
                [&](ImplicitLocOpBuilder &tb, Value tile, Value iteration) {
      assignTile(tb, epilogueFrame, c, tile);
      m.waitPhase(tb, staged, iteration, m.index(tb, 0));
      // The previous tile's epilogue is done with any scratch it shares.
      epilogueFrame.syncEpilogue(tb);
      epilogue.emit(tb, epilogueFrame);
      nvgpu::MBarrierArriveOp::create(
          tb, nvgpu::MBarrierTokenType::get(tb.getContext()), drained,
          m.index(tb, 0));
    });
    scf::YieldOp::create(eb);
  });
}

/// Persistent, 384 threads, registers in the consumers' accumulators: each
/// CTA loops over tiles (blockIdx.x, + gridDim.x, ...). Warpgroup 0 gives
/// its registers up (setmaxnreg) and its first thread streams the k-tiles of
/// all of the CTA's tiles through the ring, running ahead across tile
/// boundaries. Warpgroups 1 and 2 take the registers and run the epilogue
/// from their accumulator registers:
///
///   cooperative  both compute every tile, 64 rows each; meanwhile the
///                producer already fills the ring with the next tile's
///                first k-tiles
///   ping-pong    each computes whole tiles, the even iterations one, the
///                odd the other, in turn: a consumer starts its K loop once
///                the other has issued all of its own (a `turn` barrier per
///                warpgroup, one phase per tile), so the two never compete
///                for the tensor cores and one's epilogue runs under the
///                other's K loop
///
/// Each role is a block of its own, reached by one warp-uniform branch,
/// that returns: the two never rejoin. Ring slots are counted across tiles.
/// In turn, every parity wait of a consumer is for a phase at most one
/// behind the barrier's (the other consumer has waited on all the ring's
/// earlier uses), as parity waits require.
void emitRegisterEpilogueSchedule(ImplicitLocOpBuilder &b, KernelFrame &frame,
                                  const GemmKernelConfig &c,
                                  EpilogueEmitter epilogue) {
  bool pingPong = c.schedule == Schedule::pingPong;
  if (c.clusterM > 1)
    frame.clusterRank = gpu::ClusterBlockIdOp::create(b, gpu::Dimension::x);
  Mainloop m(b, frame, c);
  Value full = m.createBarriers(1);
  // Released by the consumer warpgroups of the slot's tile in every CTA of
  // the cluster.
  Value empty = m.createBarriers(c.consumersPerTile() * c.clusterM);
  // Ping-pong: turn[w] completes a phase when each warp of consumer w has
  // issued the K loop of one of its tiles.
  Value turn = pingPong ? m.createBarriers(/*count=*/4, /*slots=*/2) : Value();
  m.initBarriers();
  m.buildDescriptors();
  Value warpgroup = uniformGroupIndex(b, frame.tid, 128);
  Value numTiles = m.countTiles();
  Value isProducer = arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                           warpgroup, m.index(b, 0));
  // Each role is a block of its own that returns: the register budgets
  // differ, so the roles never rejoin.
  Region *region = b.getInsertionBlock()->getParent();
  Block *producerBlock = new Block(), *consumerBlock = new Block();
  region->push_back(producerBlock);
  region->push_back(consumerBlock);
  cf::CondBranchOp::create(b, isProducer, producerBlock, ValueRange{},
                           consumerBlock, ValueRange{});
  {
    ImplicitLocOpBuilder pb(b.getLoc(), b.getContext());
    pb.setInsertionPointToEnd(producerBlock);
    if (c.producerRegisters)
      NVVM::SetMaxRegisterOp::create(pb, c.producerRegisters,
                                     NVVM::SetMaxRegisterAction::decrease);
    Value leader = arith::CmpIOp::create(pb, arith::CmpIPredicate::eq,
                                         frame.tid, m.index(pb, 0));
    scf::IfOp::create(pb, leader, [&](OpBuilder &lob, Location lloc) {
      ImplicitLocOpBuilder lb(lloc, lob);
      m.produceTiles(lb, full, empty, numTiles);
      scf::YieldOp::create(lb);
    });
    if (c.clusterM > 1)
      Mainloop::syncCluster(pb);
    gpu::ReturnOp::create(pb);
  }
  ImplicitLocOpBuilder cb(b.getLoc(), b.getContext());
  cb.setInsertionPointToEnd(consumerBlock);
  if (c.consumerRegisters)
    NVVM::SetMaxRegisterOp::create(cb, c.consumerRegisters,
                                   NVVM::SetMaxRegisterAction::increase);
  // Consumer warpgroup 0 or 1 (warp-uniform).
  Value consumerIndex = arith::SubIOp::create(cb, warpgroup, m.index(cb, 1));
  Value consumerThreads = m.index(cb, 128 * c.consumersPerTile());
  KernelFrame consumer = frame;
  consumer.tid = arith::RemUIOp::create(
      cb, arith::SubIOp::create(cb, frame.tid, m.index(cb, 128)),
      consumerThreads);
  consumer.warp = arith::DivUIOp::create(cb, consumer.tid, m.index(cb, 32));
  consumer.lane = arith::RemUIOp::create(cb, consumer.tid, m.index(cb, 32));
  // The threads of a tile's epilogue: both consumers on named barrier 1,
  // or in ping-pong each consumer alone on barrier 1 + its index.
  Value barrierId = arith::IndexCastUIOp::create(
      cb, cb.getI32Type(),
      pingPong ? arith::AddIOp::create(cb, consumerIndex, m.index(cb, 1))
                     .getResult()
               : m.index(cb, 1));
  int64_t epilogueThreads = c.epilogueThreads;
  consumer.syncEpilogue = [barrierId,
                           epilogueThreads](ImplicitLocOpBuilder &sb) {
    NVVM::BarrierOp::create(
        sb, Type(), barrierId,
        arith::ConstantIntOp::create(sb, sb.getI32Type(), epilogueThreads),
        NVVM::BarrierReductionAttr(), Value());
  };
  // Each concurrent epilogue has its own scratch.
  if (pingPong)
    consumer.sharedBase = arith::AddIOp::create(
        cb, frame.sharedBase,
        arith::MulIOp::create(cb, consumerIndex,
                              m.index(cb, c.epilogueBytes())));
  Value isReleaser = arith::CmpIOp::create(cb, arith::CmpIPredicate::eq,
                                           arith::RemUIOp::create(
                                               cb, consumer.tid,
                                               m.index(cb, 128)),
                                           m.index(cb, 0));
  // Cooperative: each consumer's 64 rows start at 64 * its index, its lhs
  // descriptors that many rows down.
  Value rowUnits;
  if (!pingPong)
    rowUnits = arith::IndexCastUIOp::create(
        cb, cb.getI64Type(),
        arith::MulIOp::create(cb, consumerIndex,
                              m.index(cb, kWgmmaM * kSwizzleBytes >> 4)));
  auto computeTile = [&](ImplicitLocOpBuilder &tb, Value tile,
                         Value iteration) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
    assignTile(b, consumer, c, tile);
    // The epilogue's loads ahead of the K loop. A ping-pong consumer issues
    // them before it waits for its turn, under the other consumer's K loop;
    // a cooperative one a part after each of the first kPrefetchParts
    // k-tiles' WGMMAs are issued, so that the tensor cores do not wait while
    // the loads enter the memory pipeline and the loads do not arrive all
    // at once beside the operand tiles.
    SmallVector<EpiloguePrefetch> parts(kPrefetchParts);
    auto prefetchPart = [&](ImplicitLocOpBuilder &pb, int64_t part) {
      parts[part] = epilogue.prefetch(pb, consumer, part, kPrefetchParts);
    };
    function_ref<void(ImplicitLocOpBuilder &, int64_t)> prefetchAfterStep;
    if (epilogue.prefetch && pingPong)
      consumer.prefetched = epilogue.prefetch(b, consumer, 0, 1);
    else if (epilogue.prefetch)
      prefetchAfterStep = prefetchPart;
    if (pingPong) {
      // The other consumer has issued the K loop of the previous tile.
      Value previous = arith::SubIOp::create(b, iteration, m.index(b, 1));
      m.waitPhaseAfterFirstTile(
          b, iteration, turn,
          arith::DivUIOp::create(b, previous, m.index(b, 2)),
          arith::RemUIOp::create(b, previous, m.index(b, 2)));
    }
    // Ping-pong: lane 0 of each warp, once the warp has passed every wait
    // of its K loop and issued every WGMMA (the other consumer's WGMMAs then
    // queue behind them: the tensor cores do not drain between two tiles).
    auto passTurn = [&](ImplicitLocOpBuilder &pb) {
      Value laneZero = arith::CmpIOp::create(pb, arith::CmpIPredicate::eq,
                                             consumer.lane, m.index(pb, 0));
      scf::IfOp::create(pb, laneZero, [&](OpBuilder &ib, Location iloc) {
        ImplicitLocOpBuilder lb(iloc, ib);
        nvgpu::MBarrierArriveOp::create(
            lb, nvgpu::MBarrierTokenType::get(lb.getContext()), turn,
            consumerIndex);
        scf::YieldOp::create(lb);
      });
    };
    function_ref<void(ImplicitLocOpBuilder &)> issued;
    if (pingPong)
      issued = passTurn;
    SmallVector<Value> accs = m.consumeTile(
        full, empty, iteration, rowUnits, isReleaser, issued, prefetchAfterStep,
        prefetchAfterStep ? kPrefetchParts : 1);
    if (prefetchAfterStep)
      consumer.prefetched = mergePrefetches(parts);
    consumer.accFragments = accs;
    if (c.clusterM == 1) {
      epilogue.emit(b, consumer);
      return;
    }
    // A cluster's last tile row may lie below M: its CTA loads (zeros) and
    // computes in step with the others but writes nothing, partials
    // included.
    Value inside = arith::CmpIOp::create(b, arith::CmpIPredicate::ult,
                                         consumer.blockM, frame.sizeM);
    scf::IfOp::create(b, inside, [&](OpBuilder &ib, Location iloc) {
      ImplicitLocOpBuilder eb(iloc, ib);
      epilogue.emit(eb, consumer);
      scf::YieldOp::create(eb);
    });
  };
  forEachTile(cb, numTiles, c.clusterM,
              [&](ImplicitLocOpBuilder &tb, Value tile, Value iteration) {
                if (!pingPong) {
                  computeTile(tb, tile, iteration);
                  return;
                }
                // Ping-pong: this consumer's tiles only.
                Value mine = arith::CmpIOp::create(
                    tb, arith::CmpIPredicate::eq,
                    arith::RemUIOp::create(tb, iteration, m.index(tb, 2)),
                    consumerIndex);
                scf::IfOp::create(tb, mine, [&](OpBuilder &ib, Location iloc) {
                  ImplicitLocOpBuilder lb(iloc, ib);
                  computeTile(lb, tile, iteration);
                  scf::YieldOp::create(lb);
                });
              });
  if (epilogue.finish)
    epilogue.finish(cb, consumer);
  if (c.clusterM > 1)
    Mainloop::syncCluster(cb);
  // The kernel's return closes the consumers' block.
  b.setInsertionPointToEnd(consumerBlock);
}

/// The linear index of a non-persistent CTA's tile: blockIdx.y *
/// gridDim.x + blockIdx.x.
Value gridTile(ImplicitLocOpBuilder &b) {
  return arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::y),
                            gpu::GridDimOp::create(b, gpu::Dimension::x)),
      gpu::BlockIdOp::create(b, gpu::Dimension::x));
}

/// An epilogue that reads no product (GemmKernelConfig::epilogueOnly): the
/// register schedule's epilogue of one tile per CTA, over accumulator
/// fragments it never reads, its inputs loaded first.
void emitEpilogueOnly(ImplicitLocOpBuilder &b, KernelFrame &frame,
                      const GemmKernelConfig &c, EpilogueEmitter epilogue) {
  Mainloop m(b, frame, c);
  assignTile(b, frame, c, gridTile(b));
  if (epilogue.prefetch)
    frame.prefetched = epilogue.prefetch(b, frame, 0, 1);
  frame.accFragments = m.zeroFragments(c.fragmentsPerConsumer());
  epilogue.emit(b, frame);
  if (epilogue.finish)
    epilogue.finish(b, frame);
}

} // namespace

void HopperTarget::emitKernelBody(ImplicitLocOpBuilder &b, KernelFrame &frame,
                                  const GemmKernelConfig &c,
                                  EpilogueEmitter epilogue) const {
  if (c.epilogueOnly) {
    emitEpilogueOnly(b, frame, c, epilogue);
    return;
  }
  if (c.registerEpilogue()) {
    emitRegisterEpilogueSchedule(b, frame, c, epilogue);
    return;
  }
  if (c.schedule == Schedule::staged) {
    emitPersistent(b, frame, c, epilogue);
    return;
  }
  // One tile per CTA.
  assignTile(b, frame, c, gridTile(b));
  if (c.schedule == Schedule::single) {
    emitSingleWarpgroup(b, frame, c);
    epilogue.emit(b, frame);
    return;
  }
  OpBuilder::InsertPoint after = emitWarpSpecialized(b, frame, c);
  epilogue.emit(b, frame);
  b.restoreInsertionPoint(after);
}

std::unique_ptr<GemmTarget>
mlir::coda::gpu_lowering::getGemmTarget(StringRef chip) {
  if (chip == "sm_90a")
    return std::make_unique<HopperTarget>();
  return nullptr;
}
