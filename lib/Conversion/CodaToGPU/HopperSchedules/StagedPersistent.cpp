//===- StagedPersistent.cpp - persistent, epilogue from a staging tile ----===//
//
// The `staged` schedule: persistent 128 x 128 tiles whose epilogue runs on
// two producer warps from a staging tile while the consumers compute the
// next tile.
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

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
void hopper::emitPersistent(ImplicitLocOpBuilder &b, KernelFrame &frame,
                            const GemmKernelConfig &c,
                            EpilogueEmitter epilogue) {
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
  Value isConsumer =
      arith::AndIOp::create(b,
                            arith::CmpIOp::create(b, arith::CmpIPredicate::uge,
                                                  warpgroup, m.index(b, 1)),
                            arith::CmpIOp::create(b, arith::CmpIPredicate::ule,
                                                  warpgroup, m.index(b, 2)));
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
    forEachTile(
        cb, numTiles, /*clusterM=*/1,
        [&](ImplicitLocOpBuilder &tb, Value tile, Value iteration) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
          SmallVector<Value> accs =
              m.consumeTile(full, empty, iteration, rowUnits, isReleaser);
          // The staging tile is free once the epilogue has drained the previous
          // tile's hand-over.
          m.waitPhaseAfterFirstTile(
              b, iteration, drained,
              arith::SubIOp::create(b, iteration, m.index(b, 1)),
              m.index(b, 0));
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
                  // The previous tile's epilogue is done with any scratch it
                  // shares.
                  epilogueFrame.syncEpilogue(tb);
                  epilogue.emit(tb, epilogueFrame);
                  nvgpu::MBarrierArriveOp::create(
                      tb, nvgpu::MBarrierTokenType::get(tb.getContext()),
                      drained, m.index(tb, 0));
                });
    scf::YieldOp::create(eb);
  });
}
