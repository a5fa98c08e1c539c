//===- WarpSpecialized.cpp - a producer and two consumers -----------------===//
//
// The `warp_specialized` schedule: 128 x 256 tiles, one per CTA; the
// consumers' accumulators end in a shared-memory tile for the epilogue.
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

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
OpBuilder::InsertPoint hopper::emitWarpSpecialized(ImplicitLocOpBuilder &b,
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
      b,
      arith::CmpIOp::create(b, arith::CmpIPredicate::ne, warpgroup,
                            m.index(b, 0)),
      [&](OpBuilder &ob, Location loc) { scf::YieldOp::create(ob, loc); });
  OpBuilder::InsertPoint after = b.saveInsertionPoint();
  b.setInsertionPoint(consumer.thenBlock()->getTerminator());

  // Renumber the consumers 0..255 for the epilogue.
  frame.tid = arith::SubIOp::create(b, frame.tid, m.index(b, 128));
  frame.warp = arith::DivUIOp::create(b, frame.tid, m.index(b, 32));
  frame.lane = arith::RemUIOp::create(b, frame.tid, m.index(b, 32));
  Value consumerIndex = arith::SubIOp::create(b, warpgroup, m.index(b, 1));
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
      1,
      [&](ImplicitLocOpBuilder &lb, Value kt, ValueRange accs,
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
              ib, nvgpu::MBarrierTokenType::get(ib.getContext()), empty,
              previous);
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
