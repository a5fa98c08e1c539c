//===- SingleWarpgroup.cpp - one warpgroup loads and computes -------------===//
//
// The `single` schedule: 128 threads per CTA, one tile each; the epilogue
// reads the accumulators from a shared-memory tile.
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

/// One warpgroup both loads and computes: thread 0 refills a slot once the
/// WGMMA group that read it has retired (wait_group 1, then a CTA barrier).
void hopper::emitSingleWarpgroup(ImplicitLocOpBuilder &b,
                                 const KernelFrame &frame,
                                 const GemmKernelConfig &c) {
  Mainloop m(b, frame, c);
  Value full = m.createBarriers(1);
  m.initBarriers();
  Value isLeader = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, frame.tid,
                                         m.index(b, 0));

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
