//===- KernelAbi.h - the names manifest.json uses, for both sides -*- C++
//-*-===//
//
// The vocabulary of the kernel manifest (docs/KernelABI.md), defined once:
// the compiler writes these names (lib/Conversion/CodaToGPU) and the runtime
// reads them back (runtime/lib), so that neither can use a value the other
// does not know. Plain C++17, no MLIR and no CUDA: the runtime builds on the
// GPU machine without either.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_ABI_KERNELABI_H
#define CODA_ABI_KERNELABI_H

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace coda::abi {

/// manifest.json's "format" and the "version" this vocabulary describes
/// (5: a GEMM's variants may be chosen at launch by waves, `wave_cost`,
/// which a reader of version 4 would not honour; 4: batched GEMM kernels,
/// which take the batch count B after K; 3: the
/// manifest also holds each host function's program and the loop
/// kernels it launches; 2: TMA descriptors are kernel parameters of 128
/// bytes, passed by value; 1 passed the address of a descriptor in device
/// memory).
inline constexpr std::string_view kFormat = "coda-kernels";
inline constexpr int kVersion = 5;

/// The manifest's member names (docs/KernelABI.md), one spelling for the
/// compiler that writes them and the runtime that reads them; each is named
/// as it is spelled in the JSON.
namespace key {
// The manifest.
inline constexpr const char *format = "format", *version = "version",
                            *chip = "chip", *kernels = "kernels",
                            *functions = "functions";
// A kernel.
inline constexpr const char *kind = "kind", *name = "name",
                            *symbol = "symbol", *module = "module",
                            *function = "function", *grid = "grid",
                            *block = "block", *cluster = "cluster",
                            *shared_memory_bytes = "shared_memory_bytes",
                            *params = "params", *tile = "tile",
                            *stages = "stages", *schedule = "schedule",
                            *warp_specialized = "warp_specialized",
                            *persistent = "persistent", *batched = "batched",
                            *transpose_a = "transpose_a",
                            *transpose_b = "transpose_b",
                            *variant_of = "variant_of", *max_k = "max_k",
                            *wave_cost = "wave_cost",
                            *epilogue_unroll = "epilogue_unroll",
                            *reduction = "reduction", *axis = "axis";
/// A kernel's optional flag: it waits for the grids before it in its stream
/// (griddepcontrol.wait) before it touches memory, so it may be launched
/// with programmatic stream serialization, to start while the kernel before
/// it finishes. A reader that ignores it launches the kernel as before.
inline constexpr const char *dependent_launch = "dependent_launch";
// A kernel's parameter.
inline constexpr const char *role = "role", *source = "source",
                            *dtype = "dtype", *rank = "rank",
                            *shape = "shape", *operand = "operand",
                            *access = "access", *box = "box",
                            *swizzle = "swizzle",
                            *l2_promotion = "l2_promotion",
                            *oob_fill = "oob_fill",
                            *interleave = "interleave",
                            *partial_tile = "partial_tile";
// A host function's program, its arguments, temporaries and steps, and a
// step's operands.
inline constexpr const char *unsupported = "unsupported",
                            *arguments = "arguments", *output = "output",
                            *workspace_bytes = "workspace_bytes",
                            *temporaries = "temporaries", *bytes = "bytes",
                            *steps = "steps", *launch = "launch",
                            *call = "call", *args = "args",
                            *argument = "argument", *temporary = "temporary",
                            *value = "value", *offset = "offset",
                            *sizes = "sizes", *strides = "strides";
} // namespace key

/// A kernel: a GEMM with its epilogue, the finish of block-reduction
/// partials, or a loop nest outlined from the rest of a function (launched
/// with the grid and block its function's program gives).
enum class KernelKind { gemm, reducePartials, loop };
/// A kernel parameter: a TMA descriptor, one of M / N / K, a memref, or a
/// scalar.
enum class ParamKind { tensormap, index, memref, scalar };
/// A TMA descriptor read by the mainloop (an operand) or written by the
/// epilogue (an output's store descriptor).
enum class Access { load, store };
/// The TMA descriptor's encoding (CUtensorMapSwizzle, ...L2promotion,
/// ...FloatOOBfill, ...Interleave).
enum class Swizzle { none, bytes32, bytes64, bytes128 };
enum class L2Promotion { none, bytes64, bytes128, bytes256 };
enum class OobFill { zero, nan };
enum class Interleave { none, bytes16, bytes32 };
/// The operand a load descriptor loads (its `operand`).
enum class Operand { lhs, rhs };
/// The problem sizes a launch passes as index parameters (their `name`):
/// M, N, K, and B for a batched GEMM.
enum class Size { m, n, k, b };
/// What a reduce_partials kernel folds its partials along (its `axis`).
enum class Axis { row, col };
/// A parameter's `source` where no host function argument holds it.
inline constexpr std::string_view kTemporarySource = "temporary";
/// What a kernel's memref or scalar parameter is (its `role`): a GEMM
/// epilogue input's access form (tile, row, col, scalar, periodic, pair) or
/// an output's kind (tile, pair, interleaved, row or column partials,
/// row_select, one value per 1 x w group), whose shape follows from it and M, N; or a reduce_partials
/// kernel's partials and reduced output (docs/KernelABI.md).
enum class ParamRole {
  tile,
  row,
  col,
  scalar,
  periodic,
  pair,
  interleaved,
  rowPartials,
  colPartials,
  rowSelect,
  grouped,
  colGrouped,
  transposed,
  partials,
  reduced
};

/// Each value with its name in the manifest, in declaration order.
template <typename E> struct Vocabulary;
template <> struct Vocabulary<KernelKind> {
  static constexpr std::string_view field = key::kind;
  static constexpr std::pair<KernelKind, std::string_view> names[] = {
      {KernelKind::gemm, "gemm"},
      {KernelKind::reducePartials, "reduce_partials"},
      {KernelKind::loop, "loop"}};
};
template <> struct Vocabulary<ParamKind> {
  static constexpr std::string_view field = key::kind;
  static constexpr std::pair<ParamKind, std::string_view> names[] = {
      {ParamKind::tensormap, "tensormap"},
      {ParamKind::index, "index"},
      {ParamKind::memref, "memref"},
      {ParamKind::scalar, "scalar"}};
};
template <> struct Vocabulary<Access> {
  static constexpr std::string_view field = key::access;
  static constexpr std::pair<Access, std::string_view> names[] = {
      {Access::load, "load"}, {Access::store, "store"}};
};
template <> struct Vocabulary<Swizzle> {
  static constexpr std::string_view field = key::swizzle;
  static constexpr std::pair<Swizzle, std::string_view> names[] = {
      {Swizzle::none, "none"},
      {Swizzle::bytes32, "32B"},
      {Swizzle::bytes64, "64B"},
      {Swizzle::bytes128, "128B"}};
};
template <> struct Vocabulary<L2Promotion> {
  static constexpr std::string_view field = key::l2_promotion;
  static constexpr std::pair<L2Promotion, std::string_view> names[] = {
      {L2Promotion::none, "none"},
      {L2Promotion::bytes64, "64B"},
      {L2Promotion::bytes128, "128B"},
      {L2Promotion::bytes256, "256B"}};
};
template <> struct Vocabulary<OobFill> {
  static constexpr std::string_view field = key::oob_fill;
  static constexpr std::pair<OobFill, std::string_view> names[] = {
      {OobFill::zero, "zero"}, {OobFill::nan, "nan"}};
};
template <> struct Vocabulary<Interleave> {
  static constexpr std::string_view field = key::interleave;
  static constexpr std::pair<Interleave, std::string_view> names[] = {
      {Interleave::none, "none"},
      {Interleave::bytes16, "16B"},
      {Interleave::bytes32, "32B"}};
};

template <> struct Vocabulary<Operand> {
  static constexpr std::string_view field = key::operand;
  static constexpr std::pair<Operand, std::string_view> names[] = {
      {Operand::lhs, "lhs"}, {Operand::rhs, "rhs"}};
};
template <> struct Vocabulary<Size> {
  static constexpr std::string_view field = key::name;
  static constexpr std::pair<Size, std::string_view> names[] = {
      {Size::m, "M"}, {Size::n, "N"}, {Size::k, "K"}, {Size::b, "B"}};
};
template <> struct Vocabulary<Axis> {
  static constexpr std::string_view field = key::axis;
  static constexpr std::pair<Axis, std::string_view> names[] = {
      {Axis::row, "row"}, {Axis::col, "col"}};
};
template <> struct Vocabulary<ParamRole> {
  static constexpr std::string_view field = key::role;
  static constexpr std::pair<ParamRole, std::string_view> names[] = {
      {ParamRole::tile, "tile"},
      {ParamRole::row, "row"},
      {ParamRole::col, "col"},
      {ParamRole::scalar, "scalar"},
      {ParamRole::periodic, "periodic"},
      {ParamRole::pair, "pair"},
      {ParamRole::interleaved, "interleaved"},
      {ParamRole::rowPartials, "row_partials"},
      {ParamRole::colPartials, "col_partials"},
      {ParamRole::rowSelect, "row_select"},
      {ParamRole::grouped, "grouped"},
      {ParamRole::colGrouped, "col_grouped"},
      {ParamRole::transposed, "transposed"},
      {ParamRole::partials, "partials"},
      {ParamRole::reduced, "reduced"}};
};

/// The manifest's name of `value`.
template <typename E> constexpr std::string_view name(E value) {
  for (const auto &[v, n] : Vocabulary<E>::names)
    if (v == value)
      return n;
  return {};
}

/// The value the manifest names `text`, or nothing.
template <typename E> std::optional<E> parse(std::string_view text) {
  for (const auto &[v, n] : Vocabulary<E>::names)
    if (n == text)
      return v;
  return std::nullopt;
}

/// "a, b or c": the names a field takes, for error messages.
template <typename E> std::string names() {
  std::string out;
  constexpr size_t count = std::size(Vocabulary<E>::names);
  for (size_t i = 0; i < count; ++i) {
    if (i)
      out += i + 1 == count ? " or " : ", ";
    out += Vocabulary<E>::names[i].second;
  }
  return out;
}

/// The waves of a GEMM kernel's output tiles that a variant dispatched by
/// waves weighs (`wave_cost`, docs/KernelABI.md): its clusters of
/// `clusterM` tile rows of one tile column, every batch's, over the
/// `multiprocessors / clusterM` clusters that run at once, rounded up.
inline int64_t gemmWaves(int64_t m, int64_t n, int64_t batches, int64_t tileM,
                         int64_t tileN, int64_t clusterM,
                         int64_t multiprocessors) {
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t clusterTiles =
      ceilDiv(n, tileN) * ceilDiv(m, tileM * clusterM) * batches;
  return ceilDiv(clusterTiles,
                 std::max<int64_t>(multiprocessors / clusterM, 1));
}

/// sm_90's launch limits: the compiler holds loop kernels' blocks to them
/// and the runtime every launch (with the device's own, where it reads
/// them).
struct LaunchLimits {
  int64_t block[3] = {1024, 1024, 64};
  int64_t threadsPerBlock = 1024;
  int64_t grid[3] = {2147483647, 65535, 65535};
};

} // namespace coda::abi

#endif // CODA_ABI_KERNELABI_H
