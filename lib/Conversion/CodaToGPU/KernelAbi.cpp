//===- KernelAbi.cpp - the coda.kernel attribute of each kernel -----------===//
//
// The machine-readable ABI recorded on every kernel the lowering makes (its
// parameters, their sources in the host function, grid, block, tile, shared
// memory), which --coda-export-kernel-manifest writes out as JSON and the
// runtime reads (docs/KernelABI.md).
//
//===----------------------------------------------------------------------===//

#include "EpiloguePlan.h"

#include "coda/ABI/KernelAbi.h"
#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::gpu_lowering;

namespace abi = ::coda::abi;
namespace key = ::coda::abi::key;

namespace {

/// The manifest's name of an ABI value (coda/ABI/KernelAbi.h).
template <typename E> StringAttr abiName(OpBuilder &b, E value) {
  std::string_view text = abi::name(value);
  return b.getStringAttr(StringRef(text.data(), text.size()));
}

/// The manifest's role of an output of `role`.
abi::ParamRole abiRole(OutputRole role) {
  using abi::ParamRole;
  switch (role) {
  case OutputRole::tile:
    return ParamRole::tile;
  case OutputRole::pair:
    return ParamRole::pair;
  case OutputRole::interleaved:
    return ParamRole::interleaved;
  case OutputRole::rowPartials:
    return ParamRole::rowPartials;
  case OutputRole::colPartials:
    return ParamRole::colPartials;
  case OutputRole::rowSelect:
    return ParamRole::rowSelect;
  case OutputRole::grouped:
    return ParamRole::grouped;
  case OutputRole::colGrouped:
    return ParamRole::colGrouped;
  case OutputRole::transposed:
    return ParamRole::transposed;
  }
  llvm_unreachable("unknown role");
}

/// The manifest's role of an input read in `form`.
abi::ParamRole abiRole(AccessForm form) {
  using abi::ParamRole;
  switch (form) {
  case AccessForm::tile:
    return ParamRole::tile;
  case AccessForm::row:
    return ParamRole::row;
  case AccessForm::col:
    return ParamRole::col;
  case AccessForm::scalar:
    return ParamRole::scalar;
  case AccessForm::periodic:
    return ParamRole::periodic;
  case AccessForm::pair:
    return ParamRole::pair;
  }
  llvm_unreachable("unknown access form");
}

StringRef roleName(abi::ParamRole role) {
  std::string_view text = abi::name(role);
  return StringRef(text.data(), text.size());
}

std::string typeName(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

/// Which host function argument `v` is, or "temporary".
Attribute sourceAttr(OpBuilder &b, func::FuncOp host, Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    if (arg.getOwner()->getParentOp() == host.getOperation())
      return b.getI64IntegerAttr(arg.getArgNumber());
  return b.getStringAttr(StringRef(abi::kTemporarySource));
}

/// A shaped value's sizes; -1 marks a dynamic size.
ArrayAttr shapeAttr(OpBuilder &b, Value v) {
  SmallVector<int64_t> shape(cast<ShapedType>(v.getType()).getShape());
  for (int64_t &size : shape)
    if (ShapedType::isDynamic(size))
      size = -1;
  return b.getI64ArrayAttr(shape);
}

/// A memref parameter of the ABI.
DictionaryAttr memrefParam(OpBuilder &b, func::FuncOp host, StringRef name,
                           StringRef role, Value v) {
  auto type = cast<MemRefType>(v.getType());
  return b.getDictionaryAttr({
      b.getNamedAttr(key::name, b.getStringAttr(name)),
      b.getNamedAttr(key::role, b.getStringAttr(role)),
      b.getNamedAttr(key::source, sourceAttr(b, host, v)),
      b.getNamedAttr(key::kind, abiName(b, abi::ParamKind::memref)),
      b.getNamedAttr(key::dtype, b.getStringAttr(typeName(type.getElementType()))),
      b.getNamedAttr(key::rank, b.getI64IntegerAttr(type.getRank())),
      b.getNamedAttr(key::shape, shapeAttr(b, v)),
  });
}

/// A kernel's ABI: `entries`, and its `role` where the op that the kernel
/// lowers has one (kKernelRoleAttrName).
DictionaryAttr kernelAbi(OpBuilder &b, ArrayRef<NamedAttribute> entries,
                         Operation *op) {
  NamedAttrList abi(entries);
  if (auto role = op->getAttrOfType<StringAttr>(kKernelRoleAttrName))
    abi.set(key::role, role);
  return abi.getDictionary(b.getContext());
}

} // namespace

DictionaryAttr mlir::coda::gpu_lowering::buildGemmKernelAbi(
    OpBuilder &b, GemmOp op, func::FuncOp host, const GemmTarget &target,
    const GemmKernelConfig &config, ArrayRef<OutputRole> roles) {
  auto str = [&](StringRef s) { return b.getStringAttr(s); };
  auto i64s = [&](ArrayRef<int64_t> v) { return b.getI64ArrayAttr(v); };
  auto sourceArg = [&](Value v) { return sourceAttr(b, host, v); };
  auto shapeOf = [&](Value v) { return shapeAttr(b, v); };
  SmallVector<Attribute> params;
  // `access`: "load" (an operand, read by the mainloop) or "store" (an
  // output, written by the interior epilogue where its rows are 16-byte
  // aligned; the runtime passes a null descriptor where they are not).
  auto tensorMap = [&](StringRef operand, abi::Access access, Value v,
                       ArrayRef<int64_t> box) {
    params.push_back(b.getDictionaryAttr({
        b.getNamedAttr(key::name, str((operand + "_tensormap").str())),
        b.getNamedAttr(key::kind, abiName(b, abi::ParamKind::tensormap)),
        b.getNamedAttr(key::operand, str(operand)),
        b.getNamedAttr(key::access, abiName(b, access)),
        b.getNamedAttr(key::source, sourceArg(v)),
        b.getNamedAttr(
            key::dtype,
            str(typeName(cast<MemRefType>(v.getType()).getElementType()))),
        b.getNamedAttr(key::shape, shapeOf(v)),
        b.getNamedAttr(key::box, i64s(box)),
        b.getNamedAttr(key::swizzle, abiName(b, abi::Swizzle::bytes128)),
        b.getNamedAttr(key::l2_promotion, abiName(b, abi::L2Promotion::bytes256)),
        b.getNamedAttr(key::oob_fill, abiName(b, abi::OobFill::zero)),
        b.getNamedAttr(key::interleave, abiName(b, abi::Interleave::none)),
    }));
  };
  tensorMap(StringRef(abi::name(abi::Operand::lhs)), abi::Access::load,
            op.getLhs(), target.getLhsBox(config));
  tensorMap(StringRef(abi::name(abi::Operand::rhs)), abi::Access::load,
            op.getRhs(), target.getRhsBox(config));
  SmallVector<abi::Size> sizes = {abi::Size::m, abi::Size::n, abi::Size::k};
  if (config.batched)
    sizes.push_back(abi::Size::b);
  for (abi::Size size : sizes)
    params.push_back(b.getDictionaryAttr({
        b.getNamedAttr(key::name, abiName(b, size)),
        b.getNamedAttr(key::kind, abiName(b, abi::ParamKind::index)),
    }));
  auto shaped = [&](std::string name, StringRef role, Value v) {
    if (isa<MemRefType>(v.getType())) {
      params.push_back(memrefParam(b, host, name, role, v));
      return;
    }
    params.push_back(b.getDictionaryAttr({
        b.getNamedAttr(key::name, str(name)),
        b.getNamedAttr(key::role, str(role)),
        b.getNamedAttr(key::source, sourceArg(v)),
        b.getNamedAttr(key::kind, abiName(b, abi::ParamKind::scalar)),
        b.getNamedAttr(key::dtype, str(typeName(v.getType()))),
    }));
  };
  for (auto [i, input] : llvm::enumerate(op.getEpilogueInputs()))
    shaped("input" + std::to_string(i), roleName(abiRole(op.getInputForm(i))),
           input);
  for (auto [i, output] : llvm::enumerate(op.getOutputs())) {
    shaped("output" + std::to_string(i), roleName(abiRole(roles[i])), output);
    // The columns (rows) each partial covers: its reduction's tile; a
    // grouped output's group width.
    Operation *def = op.getYieldOp().getValues()[i].getDefiningOp();
    int64_t tile = 0;
    if (auto reduce = dyn_cast_or_null<RowReduceOp>(def))
      tile = reduce.getTile();
    else if (auto reduce = dyn_cast_or_null<ColReduceOp>(def))
      tile = reduce.getTile();
    else if (auto group = dyn_cast_or_null<GroupValueOp>(def))
      tile = group.getWidth();
    if (tile) {
      NamedAttrList entry(cast<DictionaryAttr>(params.back()));
      entry.set(key::partial_tile, b.getI64IntegerAttr(tile));
      params.back() = entry.getDictionary(b.getContext());
    }
  }
  for (unsigned i : tmaStoredOutputs(op, config))
    tensorMap("output" + std::to_string(i), abi::Access::store,
              op.getOutputs()[i],
              target.getOutputBox(
                  cast<MemRefType>(op.getOutputs()[i].getType())
                      .getElementType()));

  std::string gridX = "ceildiv(N, " + std::to_string(config.tileN) + ")";
  std::string gridY = "ceildiv(M, " + std::to_string(config.tileM) + ")";
  std::string batches = config.batched ? " * B" : "";
  gridY += batches;
  if (config.persistent() && config.clusterM > 1) {
    std::string cluster = std::to_string(config.clusterM);
    gridX = "min(" + gridX + " * ceildiv(M, " +
            std::to_string(config.tileM * config.clusterM) + ")" + batches +
            ", SMs / " + cluster + ") * " + cluster;
    gridY = "1";
  } else if (config.persistent()) {
    gridX = "min(" + gridX + " * " + gridY + ", SMs)";
    gridY = "1";
  }
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr(key::kind, abiName(b, abi::KernelKind::gemm)),
      b.getNamedAttr(key::function, str(host.getSymName())),
      b.getNamedAttr(key::tile, i64s({config.tileM, config.tileN, config.tileK})),
      b.getNamedAttr(key::stages, b.getI64IntegerAttr(config.stages)),
      b.getNamedAttr(key::schedule, str(stringifyGemmSchedule(config.schedule))),
      b.getNamedAttr(key::warp_specialized,
                     b.getBoolAttr(config.warpSpecialized())),
      b.getNamedAttr(key::persistent, b.getBoolAttr(config.persistent())),
      b.getNamedAttr(key::cluster, i64s({config.clusterM, 1, 1})),
      b.getNamedAttr(key::transpose_b, b.getBoolAttr(config.rhsKMajor)),
      b.getNamedAttr(key::transpose_a, b.getBoolAttr(!config.lhsKMajor)),
      b.getNamedAttr(key::grid,
                     b.getArrayAttr({str(gridX), str(gridY), str("1")})),
      b.getNamedAttr(key::block, i64s({config.numThreads, 1, 1})),
      b.getNamedAttr(key::shared_memory_bytes,
                     b.getI64IntegerAttr(config.sharedBytes())),
      b.getNamedAttr(key::params, b.getArrayAttr(params)),
  };
  // Only where batched, so that other kernels' ABI reads as before.
  if (config.batched)
    entries.push_back(b.getNamedAttr(key::batched, b.getBoolAttr(true)));
  // Only where a configuration sets it, likewise.
  if (config.epilogueUnroll != kDefaultEpilogueUnroll)
    entries.push_back(b.getNamedAttr(
        key::epilogue_unroll, b.getI64IntegerAttr(config.epilogueUnroll)));
  return kernelAbi(b, entries, op);
}

DictionaryAttr mlir::coda::gpu_lowering::buildReducePartialsAbi(
    OpBuilder &b, ReducePartialsOp op, func::FuncOp host, int64_t threads) {
  return kernelAbi(b, {
      b.getNamedAttr(key::kind, abiName(b, abi::KernelKind::reducePartials)),
      b.getNamedAttr(key::function, b.getStringAttr(host.getSymName())),
      b.getNamedAttr(key::reduction,
                     b.getStringAttr(stringifyReductionKind(op.getKind()))),
      b.getNamedAttr(key::axis,
                     abiName(b, op.getAxis() == ReductionAxis::row
                                    ? abi::Axis::row
                                    : abi::Axis::col)),
      b.getNamedAttr(
          key::grid,
          b.getArrayAttr(
              {b.getStringAttr("ceildiv(R, " + std::to_string(threads) + ")"),
               b.getStringAttr("1"), b.getStringAttr("1")})),
      b.getNamedAttr(key::block, b.getI64ArrayAttr({threads, 1, 1})),
      b.getNamedAttr(key::shared_memory_bytes, b.getI64IntegerAttr(0)),
      b.getNamedAttr(
          key::params,
          b.getArrayAttr(
              {memrefParam(b, host, "partials",
                           roleName(abi::ParamRole::partials),
                           op.getPartials()),
               memrefParam(b, host, "output", roleName(abi::ParamRole::reduced),
                           op.getInit())})),
  }, op);
}

StringRef mlir::coda::gpu_lowering::stringifyRole(OutputRole role) {
  std::string_view name = abi::name(abiRole(role));
  return StringRef(name.data(), name.size());
}
