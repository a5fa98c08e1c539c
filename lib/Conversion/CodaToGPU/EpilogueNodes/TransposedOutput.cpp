//===- TransposedOutput.cpp - an N x M output at (n, m) -------------------===//
//
// `coda.transpose %v`: the value at (m, n) written at (n, m), FP8
// training's token-major copy. In a register epilogue the warp's lanes
// write each fragment row into the warp's transposed staging
// ([tileN x 16]: the warp's 16 rows of a fragment, column by column), and
// after the fragment's second row each lane copies 16-byte rows of the
// N x M output out of it (GemmKernelConfig::transposedStagingBytes); in the
// shared-tile epilogue each element is stored where it goes.
//
//===----------------------------------------------------------------------===//

#include "../EpilogueNodes.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace {

struct TransposedOutput : OutputNode {
  using OutputNode::OutputNode;

  Value source() const {
    return cast<TransposeOp>(yielded().getDefiningOp()).getValue();
  }
  Type element() const {
    return cast<MemRefType>(e.outputs[i].getType()).getElementType();
  }

  void endRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r,
              MutableArrayRef<Value>) override {
    if (!e.plan.fragments)
      return storeElements(b, r);
    stageRow(b, r);
    if (r.fragmentRow % 2 == 1)
      copyOut(b, r);
  }

  void storeElements(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {
    for (int64_t g = 0, end = e.layout.groups.size(); g < end; ++g)
      for (int64_t l = 0; l < e.lanesPerGroup; ++l)
        e.storeIf(b, e.slotInBounds(b, r, {g, l}),
                  e.mapping(r, {g, l}).lookup(source()), e.outputs[i],
                  {e.cols[g][l], r.row});
  }

  /// The warp's [tileN x 16] staging of this output, flat.
  Value stage(ImplicitLocOpBuilder &b) const {
    int64_t offset = e.config.transposedStagingOffset();
    for (unsigned j = 0; j < i; ++j)
      if (e.roles[j] == OutputRole::transposed)
        offset += e.config.transposedStagingBytesOf(e.outputs[j]);
    MLIRContext *ctx = b.getContext();
    auto type = MemRefType::get(
        {e.config.tileN * kTransposedStagingRows}, element(),
        MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
    return memref::ViewOp::create(
        b, type, e.frame.shared,
        arith::AddIOp::create(b, e.warpStagingBase(b), e.index(b, offset)),
        ValueRange{});
  }

  /// The lane's values of fragment row (f, h) at [column][l / 4 + 8 h]:
  /// column 2q + slotOffset, so each store is the lane's offset (an opaque
  /// value per row: hoisted out of the tile loop, the 32 addresses would
  /// stay live through it) plus a constant.
  void stageRow(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {
    Value buffer = stage(b);
    Value laneAt = e.opaqueIndex(
        b, arith::AddIOp::create(
               b,
               arith::MulIOp::create(b, e.layout.twoQ,
                                     e.index(b, kTransposedStagingRows)),
               arith::AddIOp::create(
                   b, arith::DivUIOp::create(b, e.frame.lane, e.index(b, 4)),
                   e.index(b, 8 * (r.fragmentRow % 2)))));
    for (const EpilogueBuilder::Run &run : e.layout.runs) {
      SmallVector<Value> values;
      for (Slot slot : run)
        values.push_back(e.mapping(r, slot).lookup(source()));
      // Narrowed in pairs, as tile outputs are (a scalar cvt of an
      // accumulator serializes the WGMMAs).
      for (auto [slot, value] : llvm::zip_equal(run, e.narrowPairs(b, values)))
        memref::StoreOp::create(
            b, value, buffer,
            arith::AddIOp::create(
                b, laneAt,
                e.index(b, e.slotOffset(slot) * kTransposedStagingRows))
                .getResult());
    }
  }

  /// Each lane copies 16-byte pieces of the tile's transposed rows (the
  /// warp's 16 rows of one output column each) to the N x M output.
  void copyOut(ImplicitLocOpBuilder &b, EpilogueBuilder::Row &r) {
    Value allLanes = arith::ConstantIntOp::create(b, b.getI32Type(), -1);
    NVVM::SyncWarpOp::create(b, allLanes);
    Value buffer = stage(b);
    int64_t chunk = chunkElements(element());
    int64_t chunksPerColumn = kTransposedStagingRows / chunk;
    // The warp's first row: this (second) fragment row's, 8 rows up.
    Value firstRow = arith::SubIOp::create(
        b, r.row,
        arith::AddIOp::create(
            b, arith::DivUIOp::create(b, e.frame.lane, e.index(b, 4)),
            e.index(b, 8)));
    Value aligned = e.interior ? Value() : e.rowsAligned(b, e.outputs[i], 16);
    for (int64_t t = 0, n = e.config.tileN * chunksPerColumn / 32; t < n; ++t) {
      Value c = arith::AddIOp::create(b, e.frame.lane, e.index(b, 32 * t));
      Value column = arith::AddIOp::create(
          b, e.frame.blockN,
          arith::DivUIOp::create(b, c, e.index(b, chunksPerColumn)));
      Value row = arith::AddIOp::create(
          b, firstRow,
          arith::MulIOp::create(
              b, arith::RemUIOp::create(b, c, e.index(b, chunksPerColumn)),
              e.index(b, chunk)));
      Value room;
      if (!e.interior)
        room = arith::SelectOp::create(
            b,
            arith::CmpIOp::create(b, arith::CmpIPredicate::ult, column,
                                  e.frame.sizeN),
            e.columnsLeft(b, row, e.frame.sizeM), e.index(b, 0));
      e.copyStaged(b, e.outputs[i], {column, row}, buffer,
                   arith::MulIOp::create(b, c, e.index(b, chunk)), chunk, room,
                   aligned, /*load=*/false);
    }
    // Every lane has read its pieces before the next fragment overwrites
    // them.
    NVVM::SyncWarpOp::create(b, allLanes);
  }
};

} // namespace

std::unique_ptr<OutputNode>
mlir::coda::gpu_lowering::makeTransposedOutput(EpilogueBuilder &e, unsigned i) {
  return std::make_unique<TransposedOutput>(e, i);
}
