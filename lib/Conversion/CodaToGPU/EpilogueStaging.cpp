//===- EpilogueStaging.cpp - the warp's staging buffer --------------------===//
//
// What moves through a warp's part of shared memory: 16-bit tile outputs
// written by the lanes and copied out in 16-byte rows, or stored with
// stmatrix and TMA; tile inputs copied in (directly, or with cp.async into
// pipelined slots) and read back with ldmatrix; column and periodic input
// rows copied in with 16-byte loads.
//
//===----------------------------------------------------------------------===//

#include "EpilogueBuilder.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

void EpilogueBuilder::copyStaged(ImplicitLocOpBuilder &b, Value memref,
                                 SmallVector<Value> indices, Value stage,
                                 Value at, int64_t count, Value room,
                                 Value aligned, bool load) const {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  auto chunkType = VectorType::get({count}, element);
  auto vectorCopy = [&](ImplicitLocOpBuilder &vb) {
    auto align = llvm::MaybeAlign(16);
    if (load)
      vector::StoreOp::create(
          vb,
          vector::LoadOp::create(vb, chunkType, memref, indices,
                                 /*nontemporal=*/false, align),
          stage, ValueRange{at}, /*nontemporal=*/false, align);
    else
      vector::StoreOp::create(
          vb,
          vector::LoadOp::create(vb, chunkType, stage, ValueRange{at},
                                 /*nontemporal=*/false, align),
          memref, indices, /*nontemporal=*/false, align);
  };
  if (interior) {
    vectorCopy(b);
    return;
  }
  Value fast =
      arith::AndIOp::create(b,
                            arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                                  room, index(b, count)),
                            aligned);
  scf::IfOp::create(
      b, fast,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        vectorCopy(tb);
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        Value n = arith::MaxSIOp::create(
            eb, arith::MinSIOp::create(eb, room, index(eb, count)),
            index(eb, 0));
        scf::ForOp::create(
            eb, index(eb, 0), n, index(eb, 1), ValueRange{},
            [&](OpBuilder &fb, Location floc, Value e, ValueRange) {
              ImplicitLocOpBuilder lb(floc, fb);
              SmallVector<Value> position(indices);
              position.back() = arith::AddIOp::create(lb, indices.back(), e);
              Value slot = arith::AddIOp::create(lb, at, e);
              if (load)
                memref::StoreOp::create(
                    lb, memref::LoadOp::create(lb, memref, position), stage,
                    ValueRange{slot});
              else
                memref::StoreOp::create(
                    lb, memref::LoadOp::create(lb, stage, ValueRange{slot}),
                    memref, position);
              scf::YieldOp::create(lb);
            });
        scf::YieldOp::create(eb);
      });
}

Value EpilogueBuilder::stagingBuffer(ImplicitLocOpBuilder &b,
                                     int64_t rowElements, Type element) const {
  MLIRContext *ctx = b.getContext();
  auto stageType = MemRefType::get(
      {GemmKernelConfig::stagingRows *
       GemmKernelConfig::stagingRowStride(rowElements, chunkElements(element))},
      element, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  return memref::ViewOp::create(b, stageType, frame.shared, warpStagingBase(b),
                                ValueRange{});
}

EpilogueBuilder::StagingCopy
EpilogueBuilder::stagingCopy(ImplicitLocOpBuilder &b, Value firstRow,
                             Value firstCol, int64_t rowElements, int64_t chunk,
                             int64_t t, Value lane) const {
  if (!lane)
    lane = frame.lane;
  int64_t chunksPerRow = rowElements / chunk;
  int64_t rowsPerCopy = 32 / chunksPerRow;
  Value myChunk = arith::RemUIOp::create(b, lane, index(b, chunksPerRow));
  Value r = arith::AddIOp::create(
      b, arith::DivUIOp::create(b, lane, index(b, chunksPerRow)),
      index(b, t * rowsPerCopy));
  Value chunkStart = arith::MulIOp::create(b, myChunk, index(b, chunk));
  return {arith::AddIOp::create(b, firstRow, r),
          arith::AddIOp::create(b, firstCol, chunkStart),
          arith::AddIOp::create(
              b,
              arith::MulIOp::create(b, r,
                                    index(b, GemmKernelConfig::stagingRowStride(
                                                 rowElements, chunk))),
              chunkStart)};
}

Value EpilogueBuilder::opaque(ImplicitLocOpBuilder &b, Value value) const {
  Type type = value.getType();
  StringRef move = "mov.b32 $0, $1;", constraints = "=r,r";
  if (type.isF32()) {
    constraints = "=f,f";
  } else if (type.isBF16() || type.isF16()) {
    move = "mov.b16 $0, $1;";
    constraints = "=h,h";
  } else {
    assert(type.isInteger(32) && "an opaque move of 32 or 16 bits");
  }
  return LLVM::InlineAsmOp::create(b, type, ValueRange{value}, move,
                                   constraints, /*has_side_effects=*/true,
                                   /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None,
                                   LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

Value EpilogueBuilder::opaqueIndex(ImplicitLocOpBuilder &b, Value value) const {
  Value moved =
      opaque(b, arith::IndexCastUIOp::create(b, b.getI32Type(), value));
  return arith::IndexCastUIOp::create(b, b.getIndexType(), moved);
}

SmallVector<SmallVector<Value>>
EpilogueBuilder::loadStaged(ImplicitLocOpBuilder &b, Value input,
                            Value row) const {
  Type element = cast<MemRefType>(input.getType()).getElementType();
  Value stage = stagingBuffer(b, config.tileN, element);
  // The lane's buffer offsets are the same for every row; made from an
  // opaque copy of the lane index, they are computed where used instead of
  // held through the K loop.
  Value lane = opaqueIndex(b, frame.lane);
  Value firstRow = arith::SubIOp::create(
      b, row, arith::DivUIOp::create(b, lane, index(b, 4)));
  awaitStagingBuffer(b);
  copyToStage(b, input, stage, firstRow, lane, /*async=*/false);
  NVVM::SyncWarpOp::create(b,
                           arith::ConstantIntOp::create(b, b.getI32Type(), -1));
  return readStage(b, stage, lane);
}

void EpilogueBuilder::copyToStage(ImplicitLocOpBuilder &b, Value input,
                                  Value stage, Value firstRow, Value lane,
                                  bool async) const {
  int64_t rowElements = config.tileN;
  Type element = cast<MemRefType>(input.getType()).getElementType();
  int64_t chunk = chunkElements(element);
  int64_t copies = stagingCopies(rowElements, chunk);
  auto chunkType = VectorType::get({chunk}, element);
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  // cp.async of each of the lane's chunks, `srcElements` of it read (the
  // rest zero-filled) where given.
  auto asyncCopies = [&](ImplicitLocOpBuilder &cb,
                         function_ref<Value(const StagingCopy &)> srcElements) {
    for (int64_t t = 0; t < copies; ++t) {
      StagingCopy copy =
          stagingCopy(cb, firstRow, frame.blockN, rowElements, chunk, t, lane);
      Value n = srcElements ? srcElements(copy) : Value();
      SmallVector<Value> at{copy.row, copy.col};
      if (n) {
        // A chunk that reads nothing reads from the input's origin.
        Value none = arith::CmpIOp::create(cb, arith::CmpIPredicate::eq, n,
                                           index(cb, 0));
        for (Value &i : at)
          i = arith::SelectOp::create(cb, none, index(cb, 0), i);
      }
      nvgpu::DeviceAsyncCopyOp::create(
          cb, tokenType, stage, ValueRange{copy.at}, input, at,
          cb.getIndexAttr(chunk), n, cb.getUnitAttr());
    }
  };
  // The lane's 16-byte loads, all issued before their stores so that their
  // latencies overlap instead of adding up chunk after chunk.
  auto loadWhole = [&](ImplicitLocOpBuilder &wb) {
    SmallVector<std::pair<Value, Value>> chunks;
    for (int64_t t = 0; t < copies; ++t) {
      StagingCopy copy =
          stagingCopy(wb, firstRow, frame.blockN, rowElements, chunk, t, lane);
      chunks.push_back(
          {vector::LoadOp::create(wb, chunkType, input,
                                  ValueRange{copy.row, copy.col},
                                  /*nontemporal=*/false, llvm::MaybeAlign(16)),
           copy.at});
    }
    for (auto [value, at] : chunks)
      vector::StoreOp::create(wb, value, stage, ValueRange{at},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
  };
  if (interior) {
    if (async)
      asyncCopies(b, nullptr);
    else
      loadWhole(b);
    return;
  }
  Value room = columnsLeft(
      b,
      stagingCopy(b, firstRow, frame.blockN, rowElements, chunk, 0, lane).col,
      frame.sizeN);
  Value aligned = rowsAligned(b, input, 16);
  // Chunk by chunk with bounds, element by element where a chunk is not
  // whole or not aligned.
  auto checkedCopies = [&](ImplicitLocOpBuilder &eb) {
    for (int64_t t = 0; t < copies; ++t) {
      StagingCopy copy =
          stagingCopy(eb, firstRow, frame.blockN, rowElements, chunk, t, lane);
      copyStaged(eb, input, {copy.row, copy.col}, stage, copy.at, chunk,
                 rowRoom(eb, copy.row, room), aligned,
                 /*load=*/true);
    }
  };
  // One warp-uniform branch: aligned rows take cp.async, bounded by the
  // columns and rows left; others the checked copy.
  if (async) {
    scf::IfOp::create(
        b, aligned,
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder ab(loc, ob);
          asyncCopies(ab, [&](const StagingCopy &copy) -> Value {
            return arith::MinUIOp::create(ab, rowRoom(ab, copy.row, room),
                                          index(ab, chunk));
          });
          scf::YieldOp::create(ab);
        },
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder eb(loc, ob);
          checkedCopies(eb);
          scf::YieldOp::create(eb);
        });
    return;
  }
  // One warp-uniform branch: the batched copy where the warp's rows lie
  // whole inside the input and are aligned, else the checked copy.
  Value whole = arith::AndIOp::create(
      b, aligned,
      arith::AndIOp::create(
          b, within(b, frame.blockN, config.tileN, frame.sizeN),
          within(b, firstRow, GemmKernelConfig::stagingRows, frame.sizeM)));
  scf::IfOp::create(
      b, whole,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder wb(loc, ob);
        loadWhole(wb);
        scf::YieldOp::create(wb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        checkedCopies(eb);
        scf::YieldOp::create(eb);
      });
}

SmallVector<SmallVector<Value>>
EpilogueBuilder::readStage(ImplicitLocOpBuilder &b, Value stage,
                           Value lane) const {
  Type element = cast<MemRefType>(stage.getType()).getElementType();
  int64_t rowStride =
      GemmKernelConfig::stagingRowStride(config.tileN, chunkElements(element));
  Value allLanes = arith::ConstantIntOp::create(b, b.getI32Type(), -1);
  Value quadRow = arith::DivUIOp::create(b, lane, index(b, 4));
  // A run's columns: 8j + e + 2q on, from the head's fragment position.
  Value laneStart = arith::AddIOp::create(
      b, arith::MulIOp::create(b, quadRow, index(b, rowStride)), layout.twoQ);
  SmallVector<SmallVector<Value>> result;
  // Runs that are whole 8 x 8 matrices of the buffer (run r: the lane's two
  // columns 8r + 2q, + 1 of its row) are read four at a time with ldmatrix,
  // which hands each lane exactly those two elements of each matrix:
  // lanes 8m..8m+7 name the 8 rows of matrix r + m (16-byte aligned, 4
  // banks apart). One instruction replaces four 4-byte loads.
  bool wholeMatrices =
      element.getIntOrFloatBitWidth() == 16 && layout.runs.size() % 4 == 0;
  for (auto [r, run] : llvm::enumerate(layout.runs)) {
    int64_t j = r;
    wholeMatrices &= run.size() == 2 &&
                     layout.fragmentPos[run[0].group][run[0].lane] ==
                         std::pair{j, int64_t(0)} &&
                     layout.fragmentPos[run[1].group][run[1].lane] ==
                         std::pair{j, int64_t(1)};
  }
  if (wholeMatrices) {
    Value matrixRow = arith::RemUIOp::create(b, lane, index(b, 8));
    Value matrix = arith::DivUIOp::create(b, lane, index(b, 8));
    Value laneRowStart = arith::AddIOp::create(
        b, arith::MulIOp::create(b, matrixRow, index(b, rowStride)),
        arith::MulIOp::create(b, matrix, index(b, 8)));
    auto fourMatrices = VectorType::get({4, 2}, element);
    for (int64_t r = 0, e = layout.runs.size(); r < e; r += 4) {
      Value at = arith::AddIOp::create(b, laneRowStart, index(b, 8 * r));
      Value tiles =
          nvgpu::LdMatrixOp::create(b, fourMatrices, stage, ValueRange{at},
                                    /*transpose=*/false,
                                    /*numTiles=*/4);
      for (int64_t m = 0; m < 4; ++m) {
        result.emplace_back();
        for (int64_t i = 0; i < 2; ++i)
          result.back().push_back(
              vector::ExtractOp::create(b, tiles, ArrayRef<int64_t>{m, i}));
      }
    }
    NVVM::SyncWarpOp::create(b, allLanes);
    return result;
  }
  for (const Run &run : layout.runs) {
    auto [j, e] = layout.fragmentPos[run.front().group][run.front().lane];
    Value at = arith::AddIOp::create(b, laneStart, index(b, 8 * j + e));
    int64_t count = run.size();
    result.emplace_back();
    if (count == 1) {
      result.back().push_back(memref::LoadOp::create(b, stage, ValueRange{at}));
      continue;
    }
    Value loaded = vector::LoadOp::create(
        b, VectorType::get({count}, element), stage, ValueRange{at},
        /*nontemporal=*/false, llvm::MaybeAlign(2 * count));
    for (int64_t i = 0; i < count; ++i)
      result.back().push_back(
          vector::ExtractOp::create(b, loaded, ArrayRef<int64_t>{i}));
  }
  // Every lane has read its values before the buffer is written again.
  NVVM::SyncWarpOp::create(b, allLanes);
  return result;
}

Value EpilogueBuilder::pipelineSlot(ImplicitLocOpBuilder &b, unsigned position,
                                    int64_t slot) const {
  int64_t offset = config.pipelineSlotsOffset() +
                   (position * GemmKernelConfig::kPipelineSlots + slot) *
                       config.pipelineSlotBytes();
  Type element = cast<MemRefType>(inputs[plan.pipelined[position]].getType())
                     .getElementType();
  auto slotType = MemRefType::get(
      {GemmKernelConfig::stagingRows *
       GemmKernelConfig::stagingRowStride(config.tileN,
                                          chunkElements(element))},
      element, MemRefLayoutAttrInterface(),
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup));
  return memref::ViewOp::create(
      b, slotType, frame.shared,
      arith::AddIOp::create(b, warpStagingBase(b), index(b, offset)),
      ValueRange{});
}

void EpilogueBuilder::issuePipelinedRow(ImplicitLocOpBuilder &b,
                                        int64_t fragmentRow) const {
  Value lane = opaqueIndex(b, frame.lane);
  Value firstRow = arith::AddIOp::create(
      b, arith::AddIOp::create(b, frame.blockM, warpFragmentRow(b)),
      index(b, fragmentRowOffset(fragmentRow / 2, fragmentRow % 2)));
  for (auto [position, k] : llvm::enumerate(plan.pipelined))
    copyToStage(b, inputs[k],
                pipelineSlot(b, position,
                             fragmentRow % GemmKernelConfig::kPipelineSlots),
                firstRow, lane, /*async=*/true);
  NVVM::CpAsyncCommitGroupOp::create(b);
}

void EpilogueBuilder::storeStaged(ImplicitLocOpBuilder &b, Value out, Value row,
                                  int64_t rowElements, Value firstCol,
                                  Value limit,
                                  ArrayRef<StagedRun> staged) const {
  Type element = cast<MemRefType>(out.getType()).getElementType();
  int64_t chunk = chunkElements(element);
  Value stage = stagingBuffer(b, rowElements, element);
  int64_t rowStride = GemmKernelConfig::stagingRowStride(rowElements, chunk);
  Value quadRow = arith::DivUIOp::create(b, frame.lane, index(b, 4));
  Value rowStart = arith::MulIOp::create(b, quadRow, index(b, rowStride));
  awaitStagingBuffer(b);
  for (const StagedRun &run : staged) {
    Value at = arith::AddIOp::create(
        b, arith::AddIOp::create(b, rowStart, run.laneOffset),
        index(b, run.first));
    int64_t count = run.values.size();
    Value v =
        count == 1 ? run.values.front() : fromElements(b, element, run.values);
    if (count == 1)
      memref::StoreOp::create(b, v, stage, ValueRange{at});
    else
      vector::StoreOp::create(
          b, v, stage, ValueRange{at}, /*nontemporal=*/false,
          llvm::MaybeAlign(count * element.getIntOrFloatBitWidth() / 8));
  }
  Value allLanes = arith::ConstantIntOp::create(b, b.getI32Type(), -1);
  NVVM::SyncWarpOp::create(b, allLanes);
  Value firstRow = arith::SubIOp::create(b, row, quadRow);
  Value room, aligned;
  if (!interior) {
    room = columnsLeft(
        b, stagingCopy(b, firstRow, firstCol, rowElements, chunk, 0).col,
        limit);
    aligned = rowsAligned(b, out, 16);
  }
  for (int64_t t = 0, e = stagingCopies(rowElements, chunk); t < e; ++t) {
    StagingCopy copy =
        stagingCopy(b, firstRow, firstCol, rowElements, chunk, t);
    copyStaged(b, out, {copy.row, copy.col}, stage, copy.at, chunk,
               interior ? Value() : rowRoom(b, copy.row, room), aligned,
               /*load=*/false);
  }
  // Every lane has read its chunks before the next row overwrites them.
  NVVM::SyncWarpOp::create(b, allLanes);
}

void EpilogueBuilder::awaitStagingBuffer(ImplicitLocOpBuilder &b,
                                         bool syncWarp) const {
  if (!config.tmaStores || frame.accFragments.empty())
    return;
  // Every lane waits (those that issued nothing at once): no branch, so that
  // the row's math and its stores stay one straight-line block that ptxas
  // can interleave (a branch between them keeps the whole row live and
  // spills).
  NVVM::CpAsyncBulkWaitGroupOp::create(b, /*group=*/0, b.getUnitAttr());
  if (syncWarp)
    NVVM::SyncWarpOp::create(
        b, arith::ConstantIntOp::create(b, b.getI32Type(), -1));
}

Value EpilogueBuilder::stagingAddress32(ImplicitLocOpBuilder &b) const {
  // The buffer's address passes through an opaque move each row: the
  // addresses derived from it (loop-invariant, up to 12 of them) would
  // otherwise be hoisted out of the tile loop and held through it, which
  // spills.
  return opaque(
      b, arith::IndexCastUIOp::create(
             b, b.getI32Type(),
             arith::AddIOp::create(
                 b,
                 memref::ExtractAlignedPointerAsIndexOp::create(b,
                                                                frame.shared),
                 warpStagingBase(b))));
}

void EpilogueBuilder::storeStagedWithTma(ImplicitLocOpBuilder &b, unsigned i,
                                         Value row,
                                         ArrayRef<Value> packed) const {
  Type element =
      cast<MemRefType>(outputs[i].getType()).getElementType();
  Value address = element.getIntOrFloatBitWidth() == 8
                      ? writeBytePairBoxes(b, packed)
                      : writeMatrixBoxes(b, packed);
  issueTmaStores(b, i, row, address, element);
}

Value EpilogueBuilder::writeMatrixBoxes(ImplicitLocOpBuilder &b,
                                        ArrayRef<Value> packed) const {
  MLIRContext *ctx = b.getContext();
  int64_t boxBytes = GemmKernelConfig::storeBoxSize;
  // stmatrix is warp-synchronous (.sync.aligned): no lane writes before
  // lane 0 has waited.
  awaitStagingBuffer(b, /*syncWarp=*/false);
  // stmatrix .x4: lane l gives the address of row l mod 8 of matrix l / 8;
  // matrix m of call s is the 8-column chunk 4s + m of the warp's rows, in
  // box (4s + m) / 8 at chunk (4 (s mod 2) + m) xor phase(row), the phase
  // being the row's address bits 7-9. So every call's address is the
  // lane's first (bit 6 flipped for odd calls) plus a constant. Shared
  // addresses are 32-bit: one register each.
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, i32, v);
  };
  Value address = stagingAddress32(b);
  Value lane = arith::IndexCastUIOp::create(b, i32, frame.lane);
  Value rowInBox = arith::AndIOp::create(b, lane, c32(7));
  Value matrix = arith::ShRUIOp::create(b, lane, c32(3));
  Value rowAddress = arith::AddIOp::create(
      b, address, arith::ShLIOp::create(b, rowInBox, c32(7)));
  Value phase = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, rowAddress, c32(7)), c32(7));
  // The row's address is a multiple of 128: adding the chunk's offset is
  // an or, and flipping its bit 6 an xor of the sum.
  Value first = arith::OrIOp::create(
      b, rowAddress,
      arith::ShLIOp::create(b, arith::XOrIOp::create(b, matrix, phase),
                            c32(4)));
  auto sharedPtr = LLVM::LLVMPointerType::get(ctx, 3);
  Value firsts[2] = {
      LLVM::IntToPtrOp::create(b, sharedPtr, first),
      LLVM::IntToPtrOp::create(
          b, sharedPtr, arith::XOrIOp::create(b, first, c32(64)).getResult())};
  for (int64_t call = 0, e = int64_t(packed.size()) / 4; call < e; ++call) {
    // A constant offset from one of two bases: [base + imm] in PTX.
    Value ptr = LLVM::GEPOp::create(
        b, sharedPtr, b.getI8Type(), firsts[call % 2],
        ArrayRef<LLVM::GEPArg>{int32_t(call / 2 * boxBytes)});
    NVVM::StMatrixOp::create(b, ptr, packed.slice(4 * call, 4),
                             NVVM::MMALayout::row,
                             NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
                             NVVM::LdStMatrixEltType::B16);
  }
  return address;
}

Value EpilogueBuilder::writeBytePairBoxes(ImplicitLocOpBuilder &b,
                                          ArrayRef<Value> pairs) const {
  MLIRContext *ctx = b.getContext();
  int64_t boxBytes = GemmKernelConfig::storeBoxSize;
  // stmatrix moves 16-bit elements, whose pairs in a quad are not a byte
  // matrix's: each lane stores its pairs itself, after lane 0 has waited.
  awaitStagingBuffer(b);
  // Pair j (columns 8j + 2q, + 1 of the lane's row l / 4) lies in box
  // j / 16, at 16-byte chunk (j mod 16) / 2 xor phase(row), 8 (j mod 2)
  // + 2q bytes in: the lane's first address (chunk 0) with its chunk
  // bits flipped, plus a constant. 2-byte stores of a quad's 8 rows land
  // in 8 distinct chunks: no bank conflict.
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, i32, v);
  };
  Value address = stagingAddress32(b);
  Value lane = arith::IndexCastUIOp::create(b, i32, frame.lane);
  Value rowAddress = arith::AddIOp::create(
      b, address,
      arith::ShLIOp::create(b, arith::ShRUIOp::create(b, lane, c32(2)),
                            c32(7)));
  Value phase = arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, rowAddress, c32(7)), c32(7));
  Value first = arith::OrIOp::create(
      b,
      arith::OrIOp::create(b, rowAddress,
                           arith::ShLIOp::create(b, phase, c32(4))),
      arith::ShLIOp::create(b, arith::AndIOp::create(b, lane, c32(3)),
                            c32(1)));
  auto sharedPtr = LLVM::LLVMPointerType::get(ctx, 3);
  Value chunkBase;
  for (auto [j, pair] : llvm::enumerate(pairs)) {
    int64_t chunk = (j % 16) / 2;
    if (j % 2 == 0)
      chunkBase = LLVM::IntToPtrOp::create(
          b, sharedPtr,
          chunk ? arith::XOrIOp::create(b, first, c32(chunk << 4)).getResult()
                : first);
    Value ptr = LLVM::GEPOp::create(
        b, sharedPtr, b.getI8Type(), chunkBase,
        ArrayRef<LLVM::GEPArg>{int32_t(j / 16 * boxBytes + j % 2 * 8)});
    LLVM::StoreOp::create(b, pair, ptr, /*alignment=*/2);
  }
  return address;
}

void EpilogueBuilder::issueTmaStores(ImplicitLocOpBuilder &b, unsigned i,
                                     Value row, Value address,
                                     Type element) const {
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, i32, v);
  };
  int64_t boxColumns = GemmKernelConfig::storeBoxColumns(element);
  int64_t boxBytes = GemmKernelConfig::storeBoxSize;
  // The async proxy (TMA) reads what the generic proxy wrote.
  NVVM::FenceProxyOp::create(
      b, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  NVVM::SyncWarpOp::create(b, c32(-1));
  // Lane 0 stores the boxes (predicated, not branched: see
  // awaitStagingBuffer); every lane commits (an empty group elsewhere).
  Value lane = arith::IndexCastUIOp::create(b, i32, frame.lane);
  Value laneZero =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane, c32(0));
  Value firstRow = arith::IndexCastUIOp::create(
      b, i32,
      arith::SubIOp::create(
          b, row, arith::DivUIOp::create(b, frame.lane, index(b, 4))));
  Value firstCol = arith::IndexCastUIOp::create(b, i32, frame.blockN);
  auto sharedPtr = LLVM::LLVMPointerType::get(ctx, 3);
  for (int64_t box = 0, e = config.tileN / boxColumns; box < e; ++box) {
    Value source = LLVM::IntToPtrOp::create(
        b, sharedPtr,
        arith::AddIOp::create(b, address, c32(box * boxBytes)).getResult());
    Value col = arith::AddIOp::create(b, firstCol, c32(box * boxColumns));
    NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
        b, frame.outputMaps[i], source, ValueRange{col, firstRow},
        /*l2CacheHint=*/Value(), NVVM::TMAStoreMode::TILE, laneZero);
  }
  NVVM::CpAsyncBulkCommitGroupOp::create(b);
}

void EpilogueBuilder::layOutInputRows(ImplicitLocOpBuilder &b) {
  periods.assign(inputs.size(), Value());
  periodicVectors.assign(inputs.size(), Value());
  inputRowBuffers.assign(inputs.size(), Value());
  int64_t widestRun = 0;
  for (const Run &run : layout.runs)
    widestRun = std::max<int64_t>(widestRun, run.size());
  for (auto [k, input] : llvm::enumerate(inputs)) {
    if (op.getInputForm(k) != AccessForm::periodic)
      continue;
    periods[k] = arith::IndexCastUIOp::create(
        b, b.getI32Type(), memref::DimOp::create(b, input, 1));
    if (std::optional<int64_t> alignment = vectorAlignment(input, widestRun))
      periodicVectors[k] = arith::AndIOp::create(
          b, rowsAligned(b, input, *alignment),
          arith::CmpIOp::create(
              b, arith::CmpIPredicate::eq,
              arith::RemUIOp::create(
                  b, periods[k],
                  arith::ConstantIntOp::create(b, b.getI32Type(), widestRun)),
              arith::ConstantIntOp::create(b, b.getI32Type(), 0)));
  }
  if (!config.stagedInputRowBytes || frame.accFragments.empty())
    return;
  MLIRContext *ctx = b.getContext();
  Value warpBase = warpStagingBase(b);
  for (auto [k, input] : llvm::enumerate(inputs)) {
    std::optional<int64_t> offset = plan.inputs[k].rowBufferOffset;
    if (!offset)
      continue;
    auto type = cast<MemRefType>(input.getType());
    int64_t elements =
        op.getInputForm(k) == AccessForm::col
            ? config.tileN
            : GemmKernelConfig::stagingRows *
                  GemmKernelConfig::stagingRowStride(config.tileN);
    auto bufferType = MemRefType::get(
        {elements}, type.getElementType(), MemRefLayoutAttrInterface(),
        gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
    inputRowBuffers[k] = memref::ViewOp::create(
        b, bufferType, frame.shared,
        arith::AddIOp::create(b, warpBase, index(b, *offset)), ValueRange{});
  }
}

EpilogueBuilder::InputRowCopy::Chunk
EpilogueBuilder::inputRowChunk(ImplicitLocOpBuilder &cb, const InputRowCopy &c,
                               int64_t first) const {
  InputRowCopy::Chunk ch;
  ch.index = arith::AddIOp::create(cb, frame.lane, index(cb, first));
  // Past the last chunk (a partial last pass): read the last one again.
  Value clamped =
      first + 32 <= c.chunks
          ? ch.index
          : arith::MinUIOp::create(cb, ch.index, index(cb, c.chunks - 1))
                .getResult();
  Value r = arith::DivUIOp::create(cb, clamped, index(cb, c.chunksPerRow));
  Value col = arith::RemUIOp::create(cb, clamped, index(cb, c.chunksPerRow));
  int64_t stride = GemmKernelConfig::stagingRowStride(config.tileN);
  ch.col = arith::AddIOp::create(
      cb, frame.blockN, arith::MulIOp::create(cb, col, index(cb, c.chunk)));
  ch.at =
      arith::AddIOp::create(cb, arith::MulIOp::create(cb, r, index(cb, stride)),
                            arith::MulIOp::create(cb, col, index(cb, c.chunk)));
  if (c.periodic)
    ch.row = arith::MinUIOp::create(
        cb, arith::AddIOp::create(cb, c.firstRow, r), c.lastRow);
  return ch;
}

SmallVector<Value>
EpilogueBuilder::inputRowSource(ImplicitLocOpBuilder &sb, const InputRowCopy &c,
                                const InputRowCopy::Chunk &ch, Value e) const {
  Value column = arith::AddIOp::create(sb, ch.col, e);
  if (!c.periodic)
    return {column};
  Value wrapped = arith::RemUIOp::create(
      sb, arith::IndexCastUIOp::create(sb, sb.getI32Type(), column),
      periods[c.k]);
  return {ch.row, arith::IndexCastUIOp::create(sb, sb.getIndexType(), wrapped)};
}

Value EpilogueBuilder::inputRowChunkExists(ImplicitLocOpBuilder &cb,
                                           const InputRowCopy &c,
                                           const InputRowCopy::Chunk &ch,
                                           int64_t first) const {
  if (first + 32 <= c.chunks)
    return trueValue(cb);
  return arith::CmpIOp::create(cb, arith::CmpIPredicate::ult, ch.index,
                               index(cb, c.chunks));
}

void EpilogueBuilder::copyInputRowChunks(ImplicitLocOpBuilder &tb,
                                         const InputRowCopy &c) const {
  // 16-byte copies, kStagingLoadsInFlight chunks' loads issued before their
  // stores: one branch for the whole copy, so that the loads' latencies
  // overlap instead of adding up chunk after chunk.
  Value stage = inputRowBuffers[c.k];
  auto type = cast<MemRefType>(inputs[c.k].getType());
  auto chunkType = VectorType::get({c.chunk}, type.getElementType());
  for (int64_t batch = 0; batch < c.chunks;
       batch += 32 * kStagingLoadsInFlight) {
    SmallVector<std::pair<int64_t, InputRowCopy::Chunk>> batchChunks;
    SmallVector<Value> loaded;
    for (int64_t first = batch;
         first < std::min(c.chunks, batch + 32 * kStagingLoadsInFlight);
         first += 32) {
      InputRowCopy::Chunk ch = inputRowChunk(tb, c, first);
      loaded.push_back(vector::LoadOp::create(
          tb, chunkType, inputs[c.k], inputRowSource(tb, c, ch, index(tb, 0)),
          /*nontemporal=*/false, llvm::MaybeAlign(16)));
      batchChunks.push_back({first, ch});
    }
    for (auto [entry, value] : llvm::zip_equal(batchChunks, loaded)) {
      auto [first, ch] = entry;
      auto store = [&, ch = ch, value = value](ImplicitLocOpBuilder &sb) {
        vector::StoreOp::create(sb, value, stage, ValueRange{ch.at},
                                /*nontemporal=*/false, llvm::MaybeAlign(16));
      };
      if (first + 32 <= c.chunks) {
        store(tb);
        continue;
      }
      scf::IfOp::create(tb, inputRowChunkExists(tb, c, ch, first),
                        [&](OpBuilder &sb, Location sloc) {
                          ImplicitLocOpBuilder stb(sloc, sb);
                          store(stb);
                          scf::YieldOp::create(stb);
                        });
    }
  }
}

void EpilogueBuilder::copyInputRowElements(ImplicitLocOpBuilder &tb,
                                           const InputRowCopy &c) const {
  // Element by element; a column input's elements beyond N are left as
  // they are (what the epilogue computes from them is masked).
  Value stage = inputRowBuffers[c.k];
  for (int64_t first = 0; first < c.chunks; first += 32) {
    InputRowCopy::Chunk ch = inputRowChunk(tb, c, first);
    Value n =
        c.periodic
            ? index(tb, c.chunk)
            : arith::MinUIOp::create(tb, columnsLeft(tb, ch.col, frame.sizeN),
                                     index(tb, c.chunk))
                  .getResult();
    scf::IfOp::create(
        tb, inputRowChunkExists(tb, c, ch, first),
        [&](OpBuilder &cb, Location cloc) {
          ImplicitLocOpBuilder eb(cloc, cb);
          scf::ForOp::create(
              eb, index(eb, 0), n, index(eb, 1), ValueRange{},
              [&](OpBuilder &fb, Location floc, Value e, ValueRange) {
                ImplicitLocOpBuilder lb(floc, fb);
                memref::StoreOp::create(
                    lb,
                    memref::LoadOp::create(lb, inputs[c.k],
                                           inputRowSource(lb, c, ch, e)),
                    stage, ValueRange{arith::AddIOp::create(lb, ch.at, e)});
                scf::YieldOp::create(lb);
              });
          scf::YieldOp::create(eb);
        });
  }
}

void EpilogueBuilder::stageInputRows(ImplicitLocOpBuilder &b, unsigned k,
                                     Value firstRow) const {
  Value input = inputs[k];
  auto type = cast<MemRefType>(input.getType());
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  InputRowCopy c;
  c.k = k;
  c.chunk = 16 / bytes;
  c.chunksPerRow = config.tileN / c.chunk;
  c.periodic = GemmOp(op).getInputForm(k) == AccessForm::periodic;
  c.chunks = (c.periodic ? GemmKernelConfig::stagingRows : 1) * c.chunksPerRow;
  c.firstRow = firstRow;
  Value stage = inputRowBuffers[k];
  Type i32 = b.getI32Type();
  Value allLanes = arith::ConstantIntOp::create(b, i32, -1);
  // A column input's chunks loaded before the K loop (chunk lane + 32 i of
  // the row, whole passes): stored, once the warp's lanes are done reading
  // what the buffer held.
  if (ArrayRef<Value> prefetched = prefetchedValues(k); !prefetched.empty()) {
    NVVM::SyncWarpOp::create(b, allLanes);
    for (auto [i, value] : llvm::enumerate(prefetched))
      vector::StoreOp::create(b, value, stage,
                              ValueRange{columnChunkStart(b, i, c.chunk)},
                              /*nontemporal=*/false, llvm::MaybeAlign(16));
    NVVM::SyncWarpOp::create(b, allLanes);
    return;
  }
  // 16-byte accesses need each chunk's source aligned: the rows, and (a
  // periodic input) the period a multiple of the chunk, so that a chunk
  // never wraps.
  Value fast = rowsAligned(b, input, 16);
  if (c.periodic)
    fast = arith::AndIOp::create(
        b, fast,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq,
            arith::RemUIOp::create(
                b, periods[k], arith::ConstantIntOp::create(b, i32, c.chunk)),
            arith::ConstantIntOp::create(b, i32, 0)));
  c.lastRow = arith::SubIOp::create(b, frame.sizeM, index(b, 1));
  // Every chunk whole: a column input's tile inside N (a periodic input's
  // columns all exist).
  Value whole = c.periodic
                    ? fast
                    : arith::AndIOp::create(
                          b, fast,
                          arith::CmpIOp::create(
                              b, arith::CmpIPredicate::ule,
                              arith::AddIOp::create(b, frame.blockN,
                                                    index(b, config.tileN)),
                              frame.sizeN));
  // The warp's lanes are done reading what the buffer held.
  NVVM::SyncWarpOp::create(b, allLanes);
  scf::IfOp::create(
      b, whole,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        copyInputRowChunks(tb, c);
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        copyInputRowElements(tb, c);
        scf::YieldOp::create(tb);
      });
  NVVM::SyncWarpOp::create(b, allLanes);
}
