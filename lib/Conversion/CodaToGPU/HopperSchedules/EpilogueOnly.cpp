//===- EpilogueOnly.cpp - the register epilogue alone ---------------------===//
//
// An epilogue that reads no product: one tile per CTA, every thread an
// epilogue thread, no ring, producer or barrier.
//
//===----------------------------------------------------------------------===//

#include "../HopperMainloop.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;
using namespace mlir::coda::gpu_lowering::hopper;

/// An epilogue that reads no product (GemmKernelConfig::epilogueOnly): the
/// register schedule's epilogue of one tile per CTA, over accumulator
/// fragments it never reads, its inputs loaded first.
void hopper::emitEpilogueOnly(ImplicitLocOpBuilder &b, KernelFrame &frame,
                              const GemmKernelConfig &c,
                              EpilogueEmitter epilogue) {
  Mainloop m(b, frame, c);
  assignTile(b, frame, c, gridTile(b));
  if (epilogue.prefetch)
    frame.prefetched = epilogue.prefetch(b, frame, 0, 1);
  frame.accFragments = m.zeroFragments(c.fragmentsPerConsumer());
  epilogue.emit(b, frame);
  if (epilogue.finish)
    epilogue.finish(b, frame);
}
