//===- Runtime.h - load and launch coda kernels -----------------*- C++ -*-===//
//
// Loads a coda-compile output directory and launches its kernels with the
// CUDA driver API only. libcuda is opened at run time, so the library builds
// and validates arguments on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNTIME_RUNTIME_H
#define CODA_RUNTIME_RUNTIME_H

#include "coda/Runtime/Manifest.h"
#include "coda/Runtime/Validate.h"

#include <functional>
#include <map>
#include <memory>

namespace coda::runtime {

class Module {
public:
  /// Reads manifest.json and loads every cubin it names into the current
  /// CUDA context (creating the device's primary context if there is none).
  static std::unique_ptr<Module> load(const std::string &directory,
                                      int device = 0);
  ~Module();

  const Manifest &manifest() const { return manifest_; }

  /// Validates `args` and launches `kernel` on `stream` (a CUstream; 0 is the
  /// default stream). TMA descriptors are encoded on the host and passed by
  /// value with the launch: nothing is allocated, copied to the device or
  /// synchronized, so launches can be captured into CUDA graphs (a replay
  /// runs on the tensors given at capture).
  void launch(const std::string &kernel, const std::vector<Argument> &args,
              uint64_t stream = 0);

  /// A host function called by a program's `call` step (an external
  /// function of the compiled module, such as attention): it gets the
  /// step's operands (tensors and scalars; its results are the trailing
  /// out-parameters, to write) and the stream, on which it must enqueue its
  /// work.
  using Callback =
      std::function<void(const std::vector<Argument> &, uint64_t stream)>;
  void setCallback(const std::string &name, Callback callback);

  /// On, kernels marked `dependent_launch` (they wait for the grids before
  /// them before touching memory) are launched with programmatic stream
  /// serialization: each may be scheduled as the kernel before it in the
  /// stream exits (the default). Off, they are launched as any other.
  void setDependentLaunch(bool enabled);
  bool dependentLaunch() const;

  /// Runs `function` whole as its program in the manifest says: checks
  /// `args` (its arguments, outputs last), the callbacks its calls need,
  /// `workspace` and every step's launch (validateFunctionLaunch,
  /// validateSteps), refusing the call before anything is enqueued, then
  /// enqueues every step in order on `stream`: kernel launches, and
  /// callbacks run on the calling thread at their turn. Temporaries live in
  /// `workspace` (a GPU buffer of at least workspaceBytes(function) bytes,
  /// 256-byte aligned) or, without one, in a workspace the module allocates
  /// once, at its first such call, for all its functions: calls that share
  /// it must then be ordered (one stream). Nothing else is allocated or
  /// synchronized, so a call can be captured into a CUDA graph.
  void launchFunction(const std::string &function,
                      const std::vector<Argument> &args, uint64_t stream = 0,
                      const TensorRef *workspace = nullptr);
  /// The workspace `function` needs, in bytes.
  int64_t workspaceBytes(const std::string &function) const;

  /// Like `launch`, but `args` are the kernel's own tensor and scalar
  /// parameters in their order (M, N, K excepted), whatever the host function
  /// passes there: so that a caller can run a kernel whose buffers the
  /// compiled function allocates (a backward program's dAcc) on its own.
  void launchKernel(const std::string &kernel,
                    const std::vector<Argument> &args, uint64_t stream = 0);

private:
  /// Launches `kernel` with `args`, which `validate` accepted for it (or for
  /// the GEMM it is a variant of) with `sizes`.
  void launchSpec(const KernelSpec &kernel, const GemmSizes &sizes,
                  const std::vector<Argument> &args, uint64_t stream);
  Module() = default;
  struct Impl;
  Manifest manifest_;
  std::unique_ptr<Impl> impl_;
};

} // namespace coda::runtime

#endif // CODA_RUNTIME_RUNTIME_H
