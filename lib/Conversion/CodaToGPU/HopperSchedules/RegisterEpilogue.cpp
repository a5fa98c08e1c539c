//===- RegisterEpilogue.cpp - cooperative and ping-pong -------------------===//
//
// The register schedules: persistent CTAs whose consumer warpgroups run the
// epilogue from their accumulator registers, both on every tile
// (`cooperative`) or on alternate tiles (`ping_pong`).
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

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
void hopper::emitRegisterEpilogueSchedule(ImplicitLocOpBuilder &b,
                                          KernelFrame &frame,
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
      pingPong
          ? arith::AddIOp::create(cb, consumerIndex, m.index(cb, 1)).getResult()
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
  Value isReleaser = arith::CmpIOp::create(
      cb, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(cb, consumer.tid, m.index(cb, 128)),
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
