//===- Cooperative.cpp - both consumers compute every tile ----------------===//
//
// The `cooperative` register schedule: 128 x 256 tiles whose two consumer
// warpgroups compute 64 rows each and run the tile's epilogue together.
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

namespace {

struct Cooperative : RegisterSchedule {
  /// Both consumers on named barrier 1.
  Value epilogueBarrier(ImplicitLocOpBuilder &cb, Mainloop &m,
                        Value consumerIndex) const override {
    return m.index(cb, 1);
  }
  /// Each consumer's 64 rows start at 64 * its index, its lhs descriptors
  /// that many rows down.
  Value rowUnits(ImplicitLocOpBuilder &cb, Mainloop &m,
                 Value consumerIndex) const override {
    return arith::IndexCastUIOp::create(
        cb, cb.getI64Type(),
        arith::MulIOp::create(cb, consumerIndex,
                              m.index(cb, kWgmmaM * kSwizzleBytes >> 4)));
  }
  /// The loads go out after the first k-tiles' WGMMAs, beside the ring's
  /// next loads rather than before them.
  bool prefetchesBeforeKLoop() const override { return false; }
};

} // namespace

void hopper::emitCooperative(ImplicitLocOpBuilder &b, KernelFrame &frame,
                             const GemmKernelConfig &c,
                             EpilogueEmitter epilogue) {
  Cooperative schedule;
  emitRegisterEpilogueSchedule(b, frame, c, epilogue, schedule);
}
