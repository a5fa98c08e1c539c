//===- HopperMainloop.cpp - sm_90a GEMM kernels: Hopper's GemmTarget ------===//
//
// TMA loads of the lhs and rhs tiles (either operand K-major or stored
// MN-major) go into a ring of `stages` shared-memory slots, each guarded by
// an mbarrier that counts the bytes landing in it (arrive.expect_tx /
// try_wait.parity); wgmma.mma_async runs over a slot (128-byte swizzle,
// bf16/f16/fp8 in, f32 out) with one WGMMA group in flight, the first k-tile
// starting the accumulators with scale-d 0 (Mainloop, HopperMainloop.h).
// This file holds the pieces of the tile loop and the dispatch of a kernel
// to its schedule, one file each in HopperSchedules/:
//
//   single            one warpgroup; thread 0 refills a slot once its group
//                     has retired
//   warp-specialized  a producer warpgroup refills slots the two consumer
//                     warpgroups (64 rows each) release via `empty` barriers
//   staged            the same roles, CTAs loop over tiles, and warps 2-3 of
//                     the producer warpgroup run each tile's epilogue from a
//                     staging tile while the consumers compute the next one
//   cooperative,      persistent, registers moved from the producer to the
//   ping-pong         consumers (setmaxnreg), which run the epilogue from
//                     their accumulator registers (RegisterEpilogue.cpp,
//                     with Cooperative.cpp or PingPong.cpp)
//   epilogue-only     no product: the register epilogue alone
//
// The other schedules end the accumulator fragments in a shared-memory tile
// that the epilogue reads.
//
//===----------------------------------------------------------------------===//

#include "HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

/// A WGMMA shared-memory matrix descriptor for 128-byte swizzled tiles:
/// start address >> 4 in bits [0,14), leading byte offset >> 4 in [16,30),
/// stride byte offset >> 4 in [32,46), swizzle mode (1 = 128B) in [62,64).
/// Descriptors of other addresses in the same tile differ only in the start
/// address field, so later ones are this plus (byte offset >> 4).
Value hopper::buildMatrixDescriptor(ImplicitLocOpBuilder &b, Value address,
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
void hopper::forEachTile(
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
  scf::ForOp::create(b, first, numTiles, stride, ValueRange{},
                     [&](OpBuilder &ob, Location loc, Value tile, ValueRange) {
                       ImplicitLocOpBuilder lb(loc, ob);
                       Value iteration = arith::DivUIOp::create(
                           lb, arith::SubIOp::create(lb, tile, first), stride);
                       body(lb, tile, iteration);
                       scf::YieldOp::create(lb);
                     });
}

/// tid / `threads`, made warp-uniform for the compiler (a shuffle from lane
/// 0) so that ptxas sees role branches as uniform and does not serialize
/// WGMMA around them.
Value hopper::uniformGroupIndex(ImplicitLocOpBuilder &b, Value tid,
                                int64_t threads) {
  Value group = arith::DivUIOp::create(
      b, tid, arith::ConstantIndexOp::create(b, threads));
  Value i32 = arith::IndexCastUIOp::create(b, b.getI32Type(), group);
  return arith::IndexCastUIOp::create(
      b, b.getIndexType(),
      gpu::ShuffleOp::create(b, i32, 0, 32, gpu::ShuffleMode::IDX)
          .getShuffleResult());
}

/// The linear index of a non-persistent CTA's tile: blockIdx.y *
/// gridDim.x + blockIdx.x.
Value hopper::gridTile(ImplicitLocOpBuilder &b) {
  return arith::AddIOp::create(
      b,
      arith::MulIOp::create(b, gpu::BlockIdOp::create(b, gpu::Dimension::y),
                            gpu::GridDimOp::create(b, gpu::Dimension::x)),
      gpu::BlockIdOp::create(b, gpu::Dimension::x));
}

//===----------------------------------------------------------------------===//
// Mainloop
//===----------------------------------------------------------------------===//

void Mainloop::initBarriers() {
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
  Value leader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, frame.tid,
                                       index(b, 0));
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

void Mainloop::issueLoads(ImplicitLocOpBuilder &lb, Value full, Value kt,
                          Value slot, Value blockM, Value blockN, Value batch) {
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
      mask =
          arith::ConstantIntOp::create(lb, lb.getI16Type(), (1 << parts) - 1);
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
      Value dst =
          memref::ViewOp::create(lb, box, frame.shared, base, ValueRange{});
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

SmallVector<Value> Mainloop::mmaStep(ImplicitLocOpBuilder &lb, Value slot,
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

Value Mainloop::startAccumulators(ImplicitLocOpBuilder &lb, Value lhsDesc,
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
      ".f32." + type + "." + type + " {" + outs + "}, $" +
      std::to_string(count) + ", $" + std::to_string(count + 1) + ", p, 1, 1" +
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
             lb, fragmentType, ValueRange{lhsDesc, rhsDesc}, text, constraints,
             /*has_side_effects=*/true,
             /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

SmallVector<Value>
Mainloop::kLoop(int64_t numFragments,
                function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value,
                                                ValueRange, bool)>
                    step,
                function_ref<void(ImplicitLocOpBuilder &, int64_t)> afterStep,
                int64_t peeled) {
  SmallVector<Type> types(numFragments, fragmentType);
  Value any =
      arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, numK, index(b, 0));
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
    Value inRange =
        arith::CmpIOp::create(b, arith::CmpIPredicate::ugt, numK, index(b, p));
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

SmallVector<Value> Mainloop::consumeTile(
    Value full, Value empty, Value iteration, Value rowUnits, Value isReleaser,
    function_ref<void(ImplicitLocOpBuilder &)> issued,
    function_ref<void(ImplicitLocOpBuilder &, int64_t)> afterStep,
    int64_t peeled) {
  auto release = [&](ImplicitLocOpBuilder &lb, Value g) {
    scf::IfOp::create(lb, isReleaser, [&](OpBuilder &rb, Location rloc) {
      ImplicitLocOpBuilder ib(rloc, rb);
      Value slot = arith::RemUIOp::create(ib, g, index(ib, c.stages));
      // With clusters, every CTA's producer multicasts into this slot.
      if (c.clusterM > 1)
        arriveClusterWide(ib, empty, slot);
      else
        nvgpu::MBarrierArriveOp::create(
            ib, nvgpu::MBarrierTokenType::get(ib.getContext()), empty, slot);
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

//===----------------------------------------------------------------------===//
// HopperTarget
//===----------------------------------------------------------------------===//

void HopperTarget::emitKernelBody(ImplicitLocOpBuilder &b, KernelFrame &frame,
                                  const GemmKernelConfig &c,
                                  EpilogueEmitter epilogue) const {
  if (c.epilogueOnly) {
    emitEpilogueOnly(b, frame, c, epilogue);
    return;
  }
  switch (c.schedule) {
  case Schedule::cooperative:
    emitCooperative(b, frame, c, epilogue);
    return;
  case Schedule::pingPong:
    emitPingPong(b, frame, c, epilogue);
    return;
  case Schedule::staged:
    emitPersistent(b, frame, c, epilogue);
    return;
  case Schedule::single:
    // One tile per CTA.
    assignTile(b, frame, c, gridTile(b));
    emitSingleWarpgroup(b, frame, c);
    epilogue.emit(b, frame);
    return;
  case Schedule::warpSpecialized: {
    // One tile per CTA.
    assignTile(b, frame, c, gridTile(b));
    OpBuilder::InsertPoint after = emitWarpSpecialized(b, frame, c);
    epilogue.emit(b, frame);
    b.restoreInsertionPoint(after);
    return;
  }
  }
  llvm_unreachable("unknown GEMM schedule");
}

std::unique_ptr<GemmTarget>
mlir::coda::gpu_lowering::getGemmTarget(StringRef chip) {
  if (chip == "sm_90a")
    return std::make_unique<HopperTarget>();
  return nullptr;
}
