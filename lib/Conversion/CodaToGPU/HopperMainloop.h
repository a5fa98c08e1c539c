//===- HopperMainloop.h - sm_90a target and mainloop ------------*- C++ -*-===//
//
// Hopper's GEMM target (GemmTarget) and what its schedules share: the TMA
// ring and its mbarriers, WGMMA over a ring slot and the fragments
// (Mainloop), the tile loop, and the schedules' entry points, one file each
// in HopperSchedules/. HopperMainloop.cpp dispatches a kernel to its
// schedule.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_CODATOGPU_HOPPERMAINLOOP_H
#define CODA_LIB_CONVERSION_CODATOGPU_HOPPERMAINLOOP_H

#include "GemmKernel.h"

#include <functional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::coda::gpu_lowering::hopper {

/// WGMMA's instruction shape: 64 rows; K is 32 bytes of operand.
inline constexpr int64_t kWgmmaM = 64;
/// The swizzle span: one shared-memory row of a 128B-swizzled tile.
inline constexpr int64_t kSwizzleBytes = 128;
/// MN-major rhs tiles are loaded as chunks this many bytes wide along N.
inline constexpr int64_t kChunkBytes = kSwizzleBytes;
/// The cooperative kernels issue their epilogue's prefetch loads in this
/// many parts, one after each of the first k-tiles' WGMMAs.
inline constexpr int64_t kPrefetchParts = 16;

inline Attribute workgroupSpace(MLIRContext *ctx) {
  return gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
}

inline MemRefType sharedTileType(MLIRContext *ctx, ArrayRef<int64_t> shape,
                                 Type element) {
  return MemRefType::get(shape, element, MemRefLayoutAttrInterface(),
                         workgroupSpace(ctx));
}

inline nvgpu::TensorMapDescriptorType tensorMapType(MemRefType box) {
  return nvgpu::TensorMapDescriptorType::get(
      box.getContext(), box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_256B,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
}

/// The WGMMA operand type of a GEMM operand element type, and its name in
/// PTX; none for a type WGMMA does not multiply with f32 accumulation.
inline std::optional<std::pair<NVVM::WGMMATypes, StringRef>>
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
        {GemmKernelConfig::stagingRows,
         GemmKernelConfig::storeBoxColumns(element)},
        element));
  }
  SmallVector<int64_t> getOutputBox(Type element) const override {
    return {GemmKernelConfig::storeBoxColumns(element),
            GemmKernelConfig::stagingRows};
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
                            int64_t leadingBytes, int64_t strideBytes);

/// `scf.for` over the CTA's tiles (blockIdx.x, + gridDim.x, ... below
/// `numTiles`), or with clusters of `clusterM` CTAs the cluster's tiles
/// (cluster index, + number of clusters, ...); `body` gets the linear tile
/// index and the iteration number.
void forEachTile(
    ImplicitLocOpBuilder &b, Value numTiles, int64_t clusterM,
    function_ref<void(ImplicitLocOpBuilder &, Value tile, Value iteration)>
        body);

/// tid / `threads`, made warp-uniform for the compiler (a shuffle from lane
/// 0) so that ptxas sees role branches as uniform and does not serialize
/// WGMMA around them.
Value uniformGroupIndex(ImplicitLocOpBuilder &b, Value tid, int64_t threads);

/// The linear index of a non-persistent CTA's tile: blockIdx.y *
/// gridDim.x + blockIdx.x.
Value gridTile(ImplicitLocOpBuilder &b);

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
    auto type = nvgpu::MBarrierGroupType::get(ctx, workgroupSpace(ctx), slots);
    Value group = nvgpu::MBarrierCreateOp::create(b, type);
    initialized.push_back({group, count, slots});
    return group;
  }
  /// Initializes every barrier group, visible to all threads and to TMA.
  void initBarriers();

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
      Value remote =
          NVVM::MapaOp::create(lb, LLVM::LLVMPointerType::get(ctx, 7), local,
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
                  Value blockM, Value blockN, Value batch);

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
                             ValueRange accs, int64_t firstRow, Value rowUnits,
                             bool firstTile);

  /// The first WGMMA of a tile, scale-d 0, with its accumulators as outputs
  /// only: nvvm.wgmma.mma_async always reads them (an in-out operand), and
  /// the undefined values it would read become register copies that ptxas
  /// counts as reads of accumulators in flight once a persistent kernel
  /// reuses the registers across tiles (C7514).
  Value startAccumulators(ImplicitLocOpBuilder &lb, Value lhsDesc,
                          Value rhsDesc);

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
        int64_t peeled = 1);

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
    Value rowBase =
        arith::AddIOp::create(b, arith::MulIOp::create(b, warp, index(b, 16)),
                              arith::DivUIOp::create(b, lane, index(b, 4)));
    Value colBase = arith::MulIOp::create(
        b, arith::RemUIOp::create(b, lane, index(b, 4)), index(b, 2));
    for (auto [f, fragment] : llvm::enumerate(fragments))
      for (int64_t j = 0; j < c.tileN / 8; ++j)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t e = 0; e < 2; ++e) {
            Value v =
                LLVM::ExtractValueOp::create(b, fragment, j * 4 + h * 2 + e);
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
      int64_t peeled = 1);

  ImplicitLocOpBuilder &b;
  const KernelFrame &frame;
  const GemmKernelConfig &c;
  MLIRContext *ctx;
  MemRefType lhsBox, rhsBox;
  Type fragmentType;
  Value numK, lhsDesc0, rhsDesc0;
  SmallVector<std::tuple<Value, int64_t, int64_t>> initialized;
};

//===----------------------------------------------------------------------===//
// The schedules (HopperSchedules/).
//===----------------------------------------------------------------------===//

/// One warpgroup both loads and computes: thread 0 refills a slot once the
/// WGMMA group that read it has retired (wait_group 1, then a CTA barrier).
void emitSingleWarpgroup(ImplicitLocOpBuilder &b, const KernelFrame &frame,
                         const GemmKernelConfig &c);

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
                                           const GemmKernelConfig &c);

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
                    const GemmKernelConfig &c, EpilogueEmitter epilogue);

/// What the two register schedules (RegisterEpilogue.cpp) do differently,
/// in the order the shared kernel asks: Cooperative.cpp and PingPong.cpp.
class RegisterSchedule {
public:
  virtual ~RegisterSchedule() = default;
  /// Barriers of its own, made after the ring's.
  virtual void createBarriers(Mainloop &m) {}
  /// The named barrier (an index) the threads of a tile's epilogue meet on.
  virtual Value epilogueBarrier(ImplicitLocOpBuilder &cb, Mainloop &m,
                                Value consumerIndex) const = 0;
  /// The consumer's frame once its threads are numbered (its scratch).
  virtual void placeConsumer(ImplicitLocOpBuilder &cb, Mainloop &m,
                             KernelFrame &consumer, Value consumerIndex) {}
  /// The consumer's first row in WGMMA row units (null: row 0).
  virtual Value rowUnits(ImplicitLocOpBuilder &cb, Mainloop &m,
                         Value consumerIndex) const {
    return Value();
  }
  /// Whether the epilogue's loads are issued at once before the K loop
  /// (else in kPrefetchParts parts after the first k-tiles' WGMMAs).
  virtual bool prefetchesBeforeKLoop() const = 0;
  /// Before a tile's K loop, after its prefetch.
  virtual void beforeKLoop(ImplicitLocOpBuilder &b, Mainloop &m,
                           Value iteration) {}
  /// Runs once every WGMMA of the tile is issued (null: nothing).
  virtual std::function<void(ImplicitLocOpBuilder &)>
  issued(const KernelFrame &consumer, Value consumerIndex) {
    return nullptr;
  }
  /// Emits `body` for the consumer's tiles of the CTA's tile loop.
  virtual void forOwnTiles(ImplicitLocOpBuilder &tb, Mainloop &m,
                           Value iteration, Value consumerIndex,
                           function_ref<void(ImplicitLocOpBuilder &)> body) {
    body(tb);
  }
};

/// Persistent, 384 threads, registers in the consumers' accumulators: each
/// CTA loops over tiles (blockIdx.x, + gridDim.x, ...). Warpgroup 0 gives
/// its registers up (setmaxnreg) and its first thread streams the k-tiles of
/// all of the CTA's tiles through the ring, running ahead across tile
/// boundaries. Warpgroups 1 and 2 take the registers and run the epilogue
/// from their accumulator registers, as `schedule` has them share the
/// tiles. Each role is a block of its own, reached by one warp-uniform
/// branch, that returns: the two never rejoin. Ring slots are counted
/// across tiles.
void emitRegisterEpilogueSchedule(ImplicitLocOpBuilder &b, KernelFrame &frame,
                                  const GemmKernelConfig &c,
                                  EpilogueEmitter epilogue,
                                  RegisterSchedule &schedule);

/// Cooperative: both consumers compute every tile, 64 rows each; meanwhile
/// the producer already fills the ring with the next tile's first k-tiles.
void emitCooperative(ImplicitLocOpBuilder &b, KernelFrame &frame,
                     const GemmKernelConfig &c, EpilogueEmitter epilogue);

/// Ping-pong: each consumer computes whole tiles, the even iterations one,
/// the odd the other, in turn: a consumer starts its K loop once the other
/// has issued all of its own (a `turn` barrier per warpgroup, one phase per
/// tile), so the two never compete for the tensor cores and one's epilogue
/// runs under the other's K loop. Every parity wait of a consumer is for a
/// phase at most one behind the barrier's (the other consumer has waited on
/// all the ring's earlier uses), as parity waits require.
void emitPingPong(ImplicitLocOpBuilder &b, KernelFrame &frame,
                  const GemmKernelConfig &c, EpilogueEmitter epilogue);

/// An epilogue that reads no product (GemmKernelConfig::epilogueOnly): the
/// register schedule's epilogue of one tile per CTA, over accumulator
/// fragments it never reads, its inputs loaded first.
void emitEpilogueOnly(ImplicitLocOpBuilder &b, KernelFrame &frame,
                      const GemmKernelConfig &c, EpilogueEmitter epilogue);

} // namespace mlir::coda::gpu_lowering::hopper

#endif // CODA_LIB_CONVERSION_CODATOGPU_HOPPERMAINLOOP_H
