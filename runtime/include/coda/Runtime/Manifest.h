//===- Manifest.h - the kernels a coda-compile directory holds --*- C++ -*-===//
//
// The runtime's view of manifest.json (docs/KernelABI.md). No MLIR, no CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNTIME_MANIFEST_H
#define CODA_RUNTIME_MANIFEST_H

#include "coda/ABI/KernelAbi.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace coda::runtime {

/// Every runtime failure: a message that says what is wrong and what was
/// expected.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Element types, named in the manifest as MLIR prints them ("f8E4M3FN" and
/// "f8E5M2" are the 8-bit floats that FP8 GEMMs read).
enum class DType { bf16, f16, f32, f64, i32, i64, i8, i1, f8e4m3fn, f8e5m2 };

/// Parses "bf16", "f32", "i64", "f8E4M3FN", ...; throws Error for anything
/// else.
DType parseDType(const std::string &name);
const char *dtypeName(DType dtype);
int64_t dtypeBytes(DType dtype);
/// "[2, ?, 4]": sizes as diagnostics print them (a negative size is a
/// dynamic one, "?").
std::string listString(const std::vector<int64_t> &values);

/// One kernel parameter before the memref expansion.
struct ParamSpec {
  using Kind = abi::ParamKind;
  Kind kind = Kind::scalar;
  std::string name;
  /// tensormap: "lhs"/"rhs"/"output<i>"; memref/scalar: its role, one of
  /// coda::abi::ParamRole's names (checked when the manifest is read).
  std::string operand, role;
  /// tensormap: an output's store descriptor ("access": "store"), which the
  /// runtime encodes only where the output's rows are 16-byte aligned (null
  /// otherwise: the kernel then writes that output without TMA).
  bool store = false;
  /// tensormap: how the descriptor is encoded, as the compiler chose it.
  abi::Swizzle swizzle = abi::Swizzle::bytes128;
  abi::L2Promotion l2Promotion = abi::L2Promotion::bytes256;
  abi::OobFill oobFill = abi::OobFill::zero;
  abi::Interleave interleave = abi::Interleave::none;
  DType dtype = DType::f32;
  int64_t rank = 0;
  std::vector<int64_t> shape; // -1: dynamic
  std::vector<int64_t> box;   // tensormap, innermost first
  /// row_partials / col_partials: the columns (rows) each partial covers.
  int64_t partialTile = 0;
  /// The host function argument it is, or -1 for a temporary.
  int64_t source = -1;
};

struct KernelSpec {
  /// A GEMM with its epilogue, the finish of block-reduction partials, or a
  /// loop kernel outlined from the rest of a function.
  using Kind = abi::KernelKind;
  Kind kind = Kind::gemm;
  /// `symbol`: the kernel's name in its module's binary (the manifest name,
  /// but for loop kernels, which are named after their module).
  std::string name, symbol, module, function;
  /// What the kernel computes within its function, where the compiler named
  /// it ("forward:gemm0", "adjoint:gemm1", "grad:gemm0.rhs", ...; see
  /// KernelABI.md); empty otherwise.
  std::string role;
  /// reduce_partials: "row" (M x T -> M) or "col" (T x N -> N).
  std::string axis;
  std::vector<ParamSpec> params;
  int64_t tileM = 0, tileN = 0, tileK = 0, stages = 0;
  bool transposeB = false;
  /// lhs is K x M.
  bool transposeA = false;
  /// One CTA per SM looping over the tiles (grid: min(tiles, SMs)).
  bool persistent = false;
  /// A batched GEMM: lhs, outputs and every input but column and scalar
  /// ones have a leading batch dimension B (rhs where its descriptor is
  /// 3-D); the kernel takes B after K and runs the tiles of every batch.
  bool batched = false;
  /// CTAs per thread-block cluster along x (compiled into the kernel; the
  /// grid must be a multiple of it). Persistent kernels then run
  /// min(cluster tiles, SMs / cluster) clusters, a cluster tile being
  /// cluster[0] tile rows of one tile column.
  int64_t cluster[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  /// loop: the grid its launch was compiled with.
  int64_t grid[3] = {1, 1, 1};
  int64_t sharedMemoryBytes = 0;
  /// The kernel waits for the grids before it in its stream before it
  /// touches memory (`dependent_launch`): it is launched with programmatic
  /// stream serialization, its start overlapping the previous kernel's end.
  bool dependentLaunch = false;
  /// A GEMM compiled once per configuration and dispatched by K or by
  /// waves: every variant names the kernel launched for it (`variantOf`:
  /// the variant for the largest K, or the first weighed) and, dispatched
  /// by K, but that one, the largest K it runs for (`maxK`); dispatched by
  /// waves, the relative time of one wave of its tiles (`waveCost`).
  std::string variantOf;
  int64_t maxK = 0;
  int64_t waveCost = 0;
  /// The kernel launched for variantOf: its other variants, as indices in
  /// Manifest::kernels in ascending max_k, or in manifest order where
  /// weighed by waves (filled by Manifest::parse).
  std::vector<size_t> variants;
  /// How many arguments its function takes, from the function's entry
  /// (filled by Manifest::parse; -1 when the manifest has none).
  int64_t functionArguments = -1;

  /// A variant launched through its GEMM's own name (another kernel's),
  /// never on its own when a function runs.
  bool isDispatchedVariant() const {
    return !variantOf.empty() && variantOf != name;
  }
};

/// The largest launch a device takes: threads per block along x, y, z and
/// in all, blocks along x, y, z. The defaults are every sm_90 device's
/// (what a manifest is checked against before any device is known); a
/// Module reads its device's.
using LaunchLimits = abi::LaunchLimits;

/// Throws an Error naming `kernel` unless `block` (and `grid`, where given)
/// lie within `limits`.
void checkLaunchGeometry(const std::string &kernel, const int64_t block[3],
                         const int64_t *grid, const LaunchLimits &limits);

/// Problem size of a launch.
struct GemmSizes {
  /// b: the batch count of a batched GEMM (1 otherwise).
  int64_t m = 0, n = 0, k = 0, b = 1;
};

/// What a step of a function's program passes: an argument of the function
/// (whole, or a view), a view of a temporary in the workspace, or a
/// constant.
struct StepOperand {
  enum class Kind { argument, temporary, value };
  Kind kind = Kind::value;
  /// argument / temporary: its position.
  int64_t index = 0;
  /// Whether offset, sizes and strides (in elements, from the buffer's
  /// start) describe a view; an argument without them is passed whole.
  bool view = false;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
  double value = 0;
};

/// A step: a kernel launch or a call of a host callback.
struct Step {
  enum class Kind { launch, call };
  Kind kind = Kind::launch;
  /// launch: the kernel (launched through the GEMM's own name where K
  /// selects a variant); call: the external function's name.
  std::string target;
  std::vector<StepOperand> args;
};

/// A function argument: a tensor of a dtype and shape (-1: dynamic), or a
/// scalar; `output`: an out-parameter the function writes (a result).
struct ArgumentSpec {
  bool tensor = true;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  bool output = false;
};

/// Temporaries lie in a workspace at offsets that are multiples of this
/// many bytes, and a workspace starts at such an address (cuMemAlloc's
/// alignment; more than TMA's 16 bytes).
inline constexpr int64_t kWorkspaceAlignment = 256;

/// A buffer the function allocates: at `offset` bytes in the workspace.
struct TemporarySpec {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  int64_t bytes = 0, offset = 0;
};

/// A host function as the runtime runs it (launch_function), or why it
/// cannot (`unsupported`).
struct FunctionSpec {
  std::string name, unsupported;
  std::vector<ArgumentSpec> arguments;
  std::vector<TemporarySpec> temporaries;
  int64_t workspaceBytes = 0;
  std::vector<Step> steps;
};

struct Manifest {
  std::string chip;
  std::vector<KernelSpec> kernels;
  std::vector<FunctionSpec> functions;

  /// Parses manifest.json text; throws Error naming the offending field.
  static Manifest parse(const std::string &json);
  static Manifest load(const std::string &path);
  const KernelSpec &kernel(const std::string &name) const;
  /// The kernel of `function` with `role` (a GEMM dispatched by K: the one
  /// its variants are launched through); throws Error listing the
  /// function's roles when none has it.
  const KernelSpec &kernelFor(const std::string &function,
                              const std::string &role) const;
  /// The program of `name`; throws Error when there is none or the function
  /// cannot run whole (saying why).
  const FunctionSpec &function(const std::string &name) const;
  /// The kernel to launch for `kernel` at `sizes` on a device of
  /// `multiprocessors` SMs: dispatched by K, its variant with the smallest
  /// max_k not below K, else `kernel` itself; dispatched by waves, the one
  /// whose waves times wave_cost is least, the first of equals (a wave is
  /// a tile on each SM, or a cluster of cluster[0] tile rows on each
  /// multiprocessors / cluster[0]).
  const KernelSpec &variantFor(const KernelSpec &kernel,
                               const GemmSizes &sizes,
                               int64_t multiprocessors) const;
};

} // namespace coda::runtime

#endif // CODA_RUNTIME_MANIFEST_H
