//===- EpilogueAccess.cpp - the epilogue's accesses of global memory ------===//
//
// Runs of a row read and written in global memory: one vector access where
// a run is in bounds and aligned, else element by element with clamped or
// masked columns; periodic inputs' runs at column mod period; staged input
// rows read back from the warp's buffer.
//
//===----------------------------------------------------------------------===//

#include "EpilogueBuilder.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

Value mlir::coda::gpu_lowering::fromElements(ImplicitLocOpBuilder &b,
                                             Type element,
                                             ArrayRef<Value> values) {
  int64_t count = values.size();
  auto type = VectorType::get({count}, element);
  if (element.getIntOrFloatBitWidth() != 8 || count % 2)
    return vector::FromElementsOp::create(b, type, values);
  auto i16x1 = VectorType::get({1}, b.getI16Type());
  SmallVector<Value> halves;
  for (int64_t e = 0; e < count; e += 2) {
    Value pair = vector::FromElementsOp::create(
        b, VectorType::get({2}, element), values.slice(e, 2));
    halves.push_back(vector::ExtractOp::create(
        b, vector::BitCastOp::create(b, i16x1, pair), ArrayRef<int64_t>{0}));
  }
  return vector::BitCastOp::create(
      b, type,
      vector::FromElementsOp::create(
          b, VectorType::get({count / 2}, b.getI16Type()), halves));
}

std::optional<int64_t> EpilogueBuilder::vectorAlignment(Value memref,
                                                        int64_t count) const {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (count < 2 || failed(type.getStridesAndOffset(strides, offset)) ||
      strides.back() != 1 || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bytes = count * type.getElementTypeBitWidth() / 8;
  if (bytes < 2 || !llvm::isPowerOf2_64(bytes))
    return std::nullopt;
  return std::min<int64_t>(bytes, 16);
}

Value EpilogueBuilder::isAligned(ImplicitLocOpBuilder &b, Value memref,
                                 ValueRange indices, int64_t alignment) const {
  auto type = cast<MemRefType>(memref.getType());
  auto metadata = memref::ExtractStridedMetadataOp::create(b, memref);
  Value linear = metadata.getOffset();
  for (auto [i, idx] : llvm::enumerate(indices))
    linear = arith::AddIOp::create(
        b, linear, arith::MulIOp::create(b, idx, metadata.getStrides()[i]));
  Value address = arith::AddIOp::create(
      b, memref::ExtractAlignedPointerAsIndexOp::create(b, memref),
      arith::MulIOp::create(b, linear,
                            index(b, type.getElementTypeBitWidth() / 8)));
  return arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq,
      arith::RemUIOp::create(b, address, index(b, alignment)), index(b, 0));
}

Value EpilogueBuilder::rowsAligned(ImplicitLocOpBuilder &b, Value memref,
                                   int64_t alignment) const {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<Value> origin(type.getRank(), index(b, 0));
  Value aligned = isAligned(b, memref, origin, alignment);
  auto metadata = memref::ExtractStridedMetadataOp::create(b, memref);
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  for (Value stride : metadata.getStrides().drop_back())
    aligned = arith::AndIOp::create(
        b, aligned,
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq,
            arith::RemUIOp::create(
                b, arith::MulIOp::create(b, stride, index(b, bytes)),
                index(b, alignment)),
            index(b, 0)));
  return aligned;
}

EpilogueBuilder::RunBounds
EpilogueBuilder::limitBounds(ImplicitLocOpBuilder &b, Value inRow, Value first,
                             int64_t count, Value limit) const {
  Value end = arith::AddIOp::create(b, first, index(b, count));
  Value whole = arith::AndIOp::create(
      b, inRow,
      arith::CmpIOp::create(b, arith::CmpIPredicate::ule, end, limit));
  return {
      whole, [=](ImplicitLocOpBuilder &eb, int64_t e) -> Value {
        Value col = arith::AddIOp::create(eb, first, index(eb, e));
        return arith::AndIOp::create(
            eb, inRow,
            arith::CmpIOp::create(eb, arith::CmpIPredicate::ult, col, limit));
      }};
}

EpilogueBuilder::RunBounds
EpilogueBuilder::roomBounds(ImplicitLocOpBuilder &b, Value room, int64_t first,
                            int64_t count, int64_t perColumn) const {
  if (interior)
    return {trueValue(b), [this](ImplicitLocOpBuilder &eb, int64_t) {
              return trueValue(eb);
            }};
  Value whole = arith::CmpIOp::create(
      b, arith::CmpIPredicate::sle,
      index(b, first + (count + perColumn - 1) / perColumn), room);
  return {whole, [=](ImplicitLocOpBuilder &eb, int64_t e) -> Value {
            return arith::CmpIOp::create(eb, arith::CmpIPredicate::slt,
                                         index(eb, first + e / perColumn),
                                         room);
          }};
}

SmallVector<Value> EpilogueBuilder::loadRun(ImplicitLocOpBuilder &b,
                                            Value memref,
                                            SmallVector<Value> indices,
                                            int64_t count, Value inBounds,
                                            Value lastCol, bool vectors) const {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  Value first = indices.back();
  auto scalarLoads = [&](ImplicitLocOpBuilder &sb) {
    SmallVector<Value> values;
    for (int64_t e = 0; e < count; ++e) {
      SmallVector<Value> at(indices);
      at.back() = arith::MinUIOp::create(
          sb, arith::AddIOp::create(sb, first, index(sb, e)), lastCol);
      values.push_back(memref::LoadOp::create(sb, memref, at));
    }
    return values;
  };
  std::optional<int64_t> alignment = vectorAlignment(memref, count);
  if (!alignment || !vectors)
    return scalarLoads(b);
  auto vectorType = VectorType::get({count}, element);
  Value fast = interior ? Value()
                        : arith::AndIOp::create(
                              b, inBounds, rowsAligned(b, memref, *alignment))
                              .getResult();
  return readRun(
      b, vectorType, fast,
      [&](ImplicitLocOpBuilder &vb) -> Value {
        return vector::LoadOp::create(vb, vectorType, memref, indices,
                                      /*nontemporal=*/false,
                                      llvm::MaybeAlign(*alignment));
      },
      scalarLoads);
}

SmallVector<Value> EpilogueBuilder::readRun(
    ImplicitLocOpBuilder &b, VectorType type, Value fast,
    function_ref<Value(ImplicitLocOpBuilder &)> vectorLoad,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &)> scalarLoads)
    const {
  Value loaded;
  if (!fast) {
    loaded = vectorLoad(b);
  } else {
    auto branch = scf::IfOp::create(
        b, fast,
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder vb(loc, ob);
          scf::YieldOp::create(vb, vectorLoad(vb));
        },
        [&](OpBuilder &ob, Location loc) {
          ImplicitLocOpBuilder eb(loc, ob);
          scf::YieldOp::create(
              eb, vector::FromElementsOp::create(eb, type, scalarLoads(eb))
                      .getResult());
        });
    loaded = branch.getResult(0);
  }
  SmallVector<Value> values;
  for (int64_t e = 0, n = type.getNumElements(); e < n; ++e)
    values.push_back(
        vector::ExtractOp::create(b, loaded, ArrayRef<int64_t>{e}));
  return values;
}

SmallVector<Value> EpilogueBuilder::narrowPairs(ImplicitLocOpBuilder &b,
                                                ArrayRef<Value> values) const {
  SmallVector<Value> result(values);
  auto narrowed = [](Value v) -> arith::TruncFOp {
    auto trunc = v.getDefiningOp<arith::TruncFOp>();
    if (!trunc || !trunc.getIn().getType().isF32() || trunc.getRoundingmode())
      return {};
    return trunc;
  };
  for (size_t e = 0; e + 1 < values.size(); e += 2) {
    arith::TruncFOp lo = narrowed(values[e]), hi = narrowed(values[e + 1]);
    if (!lo || !hi || lo.getType() != hi.getType())
      continue;
    if (isa<Float8E4M3FNType, Float8E5M2Type>(lo.getType())) {
      SmallVector<Value> bytes = truncToFp8(b, {lo.getIn(), hi.getIn()},
                                            cast<FloatType>(lo.getType()));
      result[e] = bytes[0];
      result[e + 1] = bytes[1];
      continue;
    }
    // LLVM scalarizes a vector fptrunc whose elements have other uses, so
    // the packed conversion is asked for by name (element 0 is `lo`).
    auto rn =
        NVVM::FPRoundingModeAttr::get(b.getContext(), NVVM::FPRoundingMode::RN);
    auto pairType = VectorType::get({2}, lo.getType());
    Value pair;
    if (lo.getType().isBF16())
      pair = NVVM::ConvertF32x2ToBF16x2Op::create(
          b, b.getLoc(), pairType, hi.getIn(), lo.getIn(), Value(), rn);
    else if (lo.getType().isF16())
      pair = NVVM::ConvertF32x2ToF16x2Op::create(
          b, b.getLoc(), pairType, hi.getIn(), lo.getIn(), Value(), rn);
    else
      continue;
    result[e] = vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{0});
    result[e + 1] = vector::ExtractOp::create(b, pair, ArrayRef<int64_t>{1});
  }
  return result;
}

void EpilogueBuilder::storeRun(ImplicitLocOpBuilder &b, Value memref,
                               SmallVector<Value> indices,
                               ArrayRef<Value> unpacked,
                               const RunBounds &bounds) const {
  SmallVector<Value> values = narrowPairs(b, unpacked);
  int64_t count = values.size();
  Value first = indices.back();
  auto scalarStores = [&](ImplicitLocOpBuilder &sb) {
    for (auto [e, value] : llvm::enumerate(values)) {
      SmallVector<Value> at(indices);
      at.back() = arith::AddIOp::create(sb, first, index(sb, e));
      storeIf(sb, bounds.element(sb, e), value, memref, at);
    }
  };
  std::optional<int64_t> alignment = vectorAlignment(memref, count);
  if (!alignment) {
    scalarStores(b);
    return;
  }
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  if (interior) {
    Value v = fromElements(b, element, values);
    vector::StoreOp::create(b, v, memref, indices, /*nontemporal=*/false,
                            llvm::MaybeAlign(*alignment));
    return;
  }
  Value fast = arith::AndIOp::create(b, bounds.whole,
                                     rowsAligned(b, memref, *alignment));
  scf::IfOp::create(
      b, fast,
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder tb(loc, ob);
        Value v = fromElements(tb, element, values);
        vector::StoreOp::create(tb, v, memref, indices, /*nontemporal=*/false,
                                llvm::MaybeAlign(*alignment));
        scf::YieldOp::create(tb);
      },
      [&](OpBuilder &ob, Location loc) {
        ImplicitLocOpBuilder eb(loc, ob);
        scalarStores(eb);
        scf::YieldOp::create(eb);
      });
}

SmallVector<Value> EpilogueBuilder::readPeriodicRun(ImplicitLocOpBuilder &b,
                                                    unsigned k, const Run &run,
                                                    Value row) const {
  Value input = inputs[k];
  Type i32 = b.getI32Type();
  int64_t count = run.size();
  // Column c reads column c mod P, in bounds for every c.
  Value wrapped;
  std::optional<int64_t> period = staticPeriod(k);
  if (period) {
    wrapped = arith::AddIOp::create(
        b, arith::IndexCastUIOp::create(b, i32, layout.twoQ),
        arith::ConstantIntOp::create(b, i32, periodicColumn(*period, run)));
  } else {
    Value column = arith::IndexCastUIOp::create(
        b, i32, cols[run.front().group][run.front().lane]);
    wrapped = arith::RemUIOp::create(b, column, periods[k]);
  }
  // Element by element: the run's next columns wrap by compare.
  auto scalarLoads = [&](ImplicitLocOpBuilder &sb) {
    SmallVector<Value> values;
    Value at = wrapped;
    Value one = arith::ConstantIntOp::create(sb, i32, 1);
    Value zero = arith::ConstantIntOp::create(sb, i32, 0);
    for (int64_t e = 0; e < count; ++e) {
      if (e > 0 && period) {
        // The run lies within (8j mod P) + 0..7 < P.
        at = arith::AddIOp::create(sb, at, one);
      } else if (e > 0) {
        Value next = arith::AddIOp::create(sb, at, one);
        at = arith::SelectOp::create(
            sb,
            arith::CmpIOp::create(sb, arith::CmpIPredicate::eq, next,
                                  periods[k]),
            zero, next);
      }
      values.push_back(memref::LoadOp::create(
          sb, input,
          ValueRange{row,
                     arith::IndexCastUIOp::create(sb, sb.getIndexType(), at)}));
    }
    return values;
  };
  std::optional<int64_t> alignment = vectorAlignment(input, count);
  // A tile at the edge reads a static period's columns one by one: no
  // branch per run (the interior tiles take the vector reads).
  if (!periodicVectors[k] || !alignment || (period && !interior))
    return scalarLoads(b);
  auto vectorType = VectorType::get(
      {count}, cast<MemRefType>(input.getType()).getElementType());
  auto vectorLoad = [&](ImplicitLocOpBuilder &vb) -> Value {
    return vector::LoadOp::create(
        vb, vectorType, input,
        ValueRange{
            row, arith::IndexCastUIOp::create(vb, vb.getIndexType(), wrapped)},
        /*nontemporal=*/false, llvm::MaybeAlign(*alignment));
  };
  // Interior: the interior condition checked the period and the alignment,
  // and each run starts at a multiple of its length. Else one access where
  // the period is a multiple of the widest run and c mod P one of this
  // run's length, so that the run neither wraps nor straddles its
  // alignment.
  Value fast;
  if (!interior)
    fast = arith::AndIOp::create(
        b, periodicVectors[k],
        arith::CmpIOp::create(
            b, arith::CmpIPredicate::eq,
            arith::RemUIOp::create(b, wrapped,
                                   arith::ConstantIntOp::create(b, i32, count)),
            arith::ConstantIntOp::create(b, i32, 0)));
  return readRun(b, vectorType, fast, vectorLoad, scalarLoads);
}

SmallVector<Value> EpilogueBuilder::readInputRun(ImplicitLocOpBuilder &b,
                                                 unsigned k,
                                                 const Run &run) const {
  Value input = inputs[k];
  Type element = cast<MemRefType>(input.getType()).getElementType();
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  auto [j, e] = layout.fragmentPos[run.front().group][run.front().lane];
  Value at = arith::AddIOp::create(b, layout.twoQ, index(b, 8 * j + e));
  if (GemmOp(op).getInputForm(k) == AccessForm::periodic)
    at = arith::AddIOp::create(
        b, at,
        arith::MulIOp::create(
            b, arith::DivUIOp::create(b, frame.lane, index(b, 4)),
            index(b, GemmKernelConfig::stagingRowStride(config.tileN))));
  int64_t count = run.size();
  if (count == 1)
    return {memref::LoadOp::create(b, inputRowBuffers[k], ValueRange{at})};
  Value loaded = vector::LoadOp::create(
      b, VectorType::get({count}, element), inputRowBuffers[k], ValueRange{at},
      /*nontemporal=*/false, llvm::MaybeAlign(bytes * count));
  SmallVector<Value> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(
        vector::ExtractOp::create(b, loaded, ArrayRef<int64_t>{i}));
  return values;
}
