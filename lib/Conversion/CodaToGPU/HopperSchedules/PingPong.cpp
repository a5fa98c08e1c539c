//===- PingPong.cpp - consumers take alternate tiles in turn --------------===//
//
// The `ping_pong` register schedule: 128 x 128 tiles, each computed and
// written by one consumer warpgroup, the two taking turns at the tensor
// cores so that one's epilogue runs under the other's K loop.
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

namespace {

struct PingPong : RegisterSchedule {
  explicit PingPong(const GemmKernelConfig &c) : c(c) {}

  /// turn[w] completes a phase when each warp of consumer w has issued the
  /// K loop of one of its tiles.
  void createBarriers(Mainloop &m) override {
    turn = m.createBarriers(/*count=*/4, /*slots=*/2);
  }
  /// Each consumer alone on named barrier 1 + its index.
  Value epilogueBarrier(ImplicitLocOpBuilder &cb, Mainloop &m,
                        Value consumerIndex) const override {
    return arith::AddIOp::create(cb, consumerIndex, m.index(cb, 1));
  }
  /// Each concurrent epilogue has its own scratch.
  void placeConsumer(ImplicitLocOpBuilder &cb, Mainloop &m,
                     KernelFrame &consumer, Value consumerIndex) override {
    consumer.sharedBase = arith::AddIOp::create(
        cb, consumer.sharedBase,
        arith::MulIOp::create(cb, consumerIndex,
                              m.index(cb, c.epilogueBytes())));
  }
  /// The loads go out before the consumer waits for its turn, under the
  /// other consumer's K loop.
  bool prefetchesBeforeKLoop() const override { return true; }
  /// The other consumer has issued the K loop of the previous tile.
  void beforeKLoop(ImplicitLocOpBuilder &b, Mainloop &m,
                   Value iteration) override {
    Value previous = arith::SubIOp::create(b, iteration, m.index(b, 1));
    m.waitPhaseAfterFirstTile(
        b, iteration, turn, arith::DivUIOp::create(b, previous, m.index(b, 2)),
        arith::RemUIOp::create(b, previous, m.index(b, 2)));
  }
  /// Lane 0 of each warp passes the turn once the warp has passed every
  /// wait of its K loop and issued every WGMMA (the other consumer's WGMMAs
  /// then queue behind them: the tensor cores do not drain between tiles).
  std::function<void(ImplicitLocOpBuilder &)>
  issued(const KernelFrame &consumer, Value consumerIndex) override {
    return [this, &consumer, consumerIndex](ImplicitLocOpBuilder &pb) {
      Value laneZero =
          arith::CmpIOp::create(pb, arith::CmpIPredicate::eq, consumer.lane,
                                arith::ConstantIndexOp::create(pb, 0));
      scf::IfOp::create(pb, laneZero, [&](OpBuilder &ib, Location iloc) {
        ImplicitLocOpBuilder lb(iloc, ib);
        nvgpu::MBarrierArriveOp::create(
            lb, nvgpu::MBarrierTokenType::get(lb.getContext()), turn,
            consumerIndex);
        scf::YieldOp::create(lb);
      });
    };
  }
  /// This consumer's tiles only: the even iterations consumer 0's.
  void forOwnTiles(ImplicitLocOpBuilder &tb, Mainloop &m, Value iteration,
                   Value consumerIndex,
                   function_ref<void(ImplicitLocOpBuilder &)> body) override {
    Value mine = arith::CmpIOp::create(
        tb, arith::CmpIPredicate::eq,
        arith::RemUIOp::create(tb, iteration, m.index(tb, 2)), consumerIndex);
    scf::IfOp::create(tb, mine, [&](OpBuilder &ib, Location iloc) {
      ImplicitLocOpBuilder lb(iloc, ib);
      body(lb);
      scf::YieldOp::create(lb);
    });
  }

  const GemmKernelConfig &c;
  Value turn;
};

} // namespace

void hopper::emitPingPong(ImplicitLocOpBuilder &b, KernelFrame &frame,
                          const GemmKernelConfig &c, EpilogueEmitter epilogue) {
  PingPong schedule(c);
  emitRegisterEpilogueSchedule(b, frame, c, epilogue, schedule);
}
