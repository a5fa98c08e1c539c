//===- Validate.h - check launch arguments against a kernel -----*- C++ -*-===//
//
// Everything a launch can get wrong is checked here, before any CUDA call:
// argument count and kinds, dtypes, ranks, static and derived sizes (M, N, K
// agree across operands; outputs have the shapes their roles imply), TMA's
// layout rules, pointer alignment and devices. Needs no GPU.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNTIME_VALIDATE_H
#define CODA_RUNTIME_VALIDATE_H

#include "coda/Runtime/Manifest.h"

#include <functional>
#include <variant>

namespace coda::runtime {

/// A strided view of device memory: sizes and strides in elements.
struct TensorRef {
  uint64_t data = 0;
  DType dtype = DType::f32;
  std::vector<int64_t> sizes, strides;
  /// CUDA device ordinal, or -1 for host memory.
  int device = 0;
  /// Elements from the start of the buffer `data` lies in to `data`: the
  /// offset field of the memref descriptor a kernel gets (whose base is the
  /// buffer's start; a kernel compiled for a view of static offset adds that
  /// offset itself). Zero but for the views a function's program passes.
  int64_t offset = 0;
};

/// A host function argument: a tensor or a scalar value.
using Argument = std::variant<TensorRef, double>;

/// Checks `args` (the host function's arguments, indexed by each parameter's
/// `source`) for `kernel`; returns the sizes or throws Error listing every
/// problem found.
GemmSizes validate(const KernelSpec &kernel, const std::vector<Argument> &args);

/// Checks that `args` are no more than `kernel`'s function takes (what
/// `validate` cannot see: it reads only the arguments the kernel's
/// parameters name); throws Error naming the first argument too many.
void checkArgumentCount(const KernelSpec &kernel,
                        const std::vector<Argument> &args);

/// Whether TMA can address `t` as a matrix: 2-D, contiguous rows, base and
/// row stride 16-byte aligned, each dimension below 2^32.
bool tmaAddressable(const TensorRef &t);

/// Grid of a launch: (ceil(N / tile N), ceil(M / tile M), 1), or for a
/// persistent kernel (min(tiles, residentCtas), 1, 1), with clusters of c
/// CTAs (min(cluster tiles, residentCtas / c) * c, 1, 1). `residentCtas`:
/// the CTAs that can run at once (one per SM; fewer for clusters).
void gridFor(const KernelSpec &kernel, const GemmSizes &sizes,
             int64_t residentCtas, int64_t grid[3]);

/// `kernel` with its parameters' sources renumbered to the kernel's own
/// order: its tensor and scalar parameters (M, N, K excepted) in turn, an
/// output's store descriptor at its output's position. What
/// Module::launchKernel and a function's steps pass.
KernelSpec withOwnParameters(const KernelSpec &kernel);

/// Checks `args` against function `f`'s arguments: count, kinds, dtypes,
/// sizes, GPU memory, and a row-major layout (which the program's views of
/// them assume); throws Error listing every problem.
void validateFunctionArguments(const FunctionSpec &f,
                               const std::vector<Argument> &args);

/// What launch_function checks before it enqueues anything: the arguments
/// (as validateFunctionArguments), a callback for every host function the
/// steps call (`hasCallback` says which are registered) and, where the
/// function needs a workspace and `workspace` is given, that it holds
/// workspaceBytes bytes, contiguous, 256-byte aligned, on the arguments'
/// GPU (none given: the module's own). Throws Error listing every problem.
void validateFunctionLaunch(
    const FunctionSpec &f, const std::vector<Argument> &args,
    const TensorRef *workspace,
    const std::function<bool(const std::string &)> &hasCallback);

/// Checks each launch step of `f` with its operands (`operands[i]`, as
/// stepOperand makes them) against its kernel, which `kernelOf` gives with
/// its own parameters (withOwnParameters); returns each launch's sizes or
/// throws Error listing every step's problems, so that a refused call runs
/// nothing.
std::vector<GemmSizes> validateSteps(
    const FunctionSpec &f, const std::vector<std::vector<Argument>> &operands,
    const std::function<const KernelSpec &(const std::string &)> &kernelOf);

/// What a step of `f` passes for `operand`: a constant, an argument, or a
/// view of an argument or of a temporary in the workspace at `workspace`
/// (on GPU `device`).
Argument stepOperand(const StepOperand &operand, const FunctionSpec &f,
                     const std::vector<Argument> &args, uint64_t workspace,
                     int device);

} // namespace coda::runtime

#endif // CODA_RUNTIME_VALIDATE_H
