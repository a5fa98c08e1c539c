//===- RegisterEpilogue.cpp - the register schedules' kernel --------------===//
//
// The kernel the register schedules share: persistent CTAs whose producer
// warpgroup streams the operands and whose consumer warpgroups run the
// epilogue from their accumulator registers; how the consumers share the
// tiles is the RegisterSchedule's (Cooperative.cpp, PingPong.cpp).
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

void hopper::emitRegisterEpilogueSchedule(ImplicitLocOpBuilder &b,
                                          KernelFrame &frame,
                                          const GemmKernelConfig &c,
                                          EpilogueEmitter epilogue,
                                          RegisterSchedule &schedule) {
  if (c.clusterM > 1)
    frame.clusterRank = gpu::ClusterBlockIdOp::create(b, gpu::Dimension::x);
  Mainloop m(b, frame, c);
  Value full = m.createBarriers(1);
  // Released by the consumer warpgroups of the slot's tile in every CTA of
  // the cluster.
  Value empty = m.createBarriers(c.consumersPerTile() * c.clusterM);
  schedule.createBarriers(m);
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
  // The threads of a tile's epilogue meet on a named barrier.
  Value barrierId = arith::IndexCastUIOp::create(
      cb, cb.getI32Type(), schedule.epilogueBarrier(cb, m, consumerIndex));
  int64_t epilogueThreads = c.epilogueThreads;
  consumer.syncEpilogue = [barrierId,
                           epilogueThreads](ImplicitLocOpBuilder &sb) {
    NVVM::BarrierOp::create(
        sb, Type(), barrierId,
        arith::ConstantIntOp::create(sb, sb.getI32Type(), epilogueThreads),
        NVVM::BarrierReductionAttr(), Value());
  };
  schedule.placeConsumer(cb, m, consumer, consumerIndex);
  Value isReleaser = arith::CmpIOp::create(
      cb, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(cb, consumer.tid, m.index(cb, 128)),
      m.index(cb, 0));
  Value rowUnits = schedule.rowUnits(cb, m, consumerIndex);
  auto computeTile = [&](ImplicitLocOpBuilder &tb, Value tile,
                         Value iteration) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
    assignTile(b, consumer, c, tile);
    // The epilogue's loads ahead of the K loop: at once, or a part after
    // each of the first kPrefetchParts k-tiles' WGMMAs are issued, so that
    // the tensor cores do not wait while the loads enter the memory
    // pipeline and the loads do not arrive all at once beside the operand
    // tiles.
    SmallVector<EpiloguePrefetch> parts(kPrefetchParts);
    auto prefetchPart = [&](ImplicitLocOpBuilder &pb, int64_t part) {
      parts[part] = epilogue.prefetch(pb, consumer, part, kPrefetchParts);
    };
    function_ref<void(ImplicitLocOpBuilder &, int64_t)> prefetchAfterStep;
    if (epilogue.prefetch && schedule.prefetchesBeforeKLoop())
      consumer.prefetched = epilogue.prefetch(b, consumer, 0, 1);
    else if (epilogue.prefetch)
      prefetchAfterStep = prefetchPart;
    schedule.beforeKLoop(b, m, iteration);
    std::function<void(ImplicitLocOpBuilder &)> issuedHook =
        schedule.issued(consumer, consumerIndex);
    function_ref<void(ImplicitLocOpBuilder &)> issued;
    if (issuedHook)
      issued = issuedHook;
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
                schedule.forOwnTiles(tb, m, iteration, consumerIndex,
                                     [&](ImplicitLocOpBuilder &lb) {
                                       computeTile(lb, tile, iteration);
                                     });
              });
  if (epilogue.finish)
    epilogue.finish(cb, consumer);
  if (c.clusterM > 1)
    Mainloop::syncCluster(cb);
  // The kernel's return closes the consumers' block.
  b.setInsertionPointToEnd(consumerBlock);
}
