//===- Pipelines.h - coda's named pass pipelines ----------------*- C++ -*-===//

#ifndef CODA_PIPELINES_PIPELINES_H
#define CODA_PIPELINES_PIPELINES_H

#include "coda/Conversion/CodaToGPU/KernelOptions.h"
#include "coda/Conversion/Passes.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
namespace coda {

/// Reference lowering, bufferization and lowering to the LLVM dialect for
/// running coda programs on the CPU (mlir-runner, ExecutionEngine).
void buildCodaToLLVMCPUPipeline(OpPassManager &pm);

/// Options of `--coda-to-gpu-binary`.
struct CodaToGPUBinaryOptions
    : public PassPipelineOptions<CodaToGPUBinaryOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU architecture (sm_90a)"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("isa (PTX text), bin (cubin, through ptxas) or fatbin"),
      llvm::cl::init("bin")};
  Option<int64_t> tileM{*this, "tile-m",
                        llvm::cl::desc("GEMM tile rows per CTA"),
                        llvm::cl::init(128)};
  Option<int64_t> tileN{*this, "tile-n",
                        llvm::cl::desc("GEMM tile columns per CTA"),
                        llvm::cl::init(256)};
  Option<int64_t> stages{*this, "stages", llvm::cl::desc("TMA ring slots"),
                         llvm::cl::init(4)};
  Option<GemmSchedule> schedule{
      *this, "schedule",
      llvm::cl::desc("how the warps of a kernel share its tiles (GEMMs the "
                     "selector does not cover, and every GEMM with "
                     "select-config=0)"),
      scheduleOptionValues(), llvm::cl::init(GemmSchedule::warpSpecialized)};
  Option<bool> selectConfig{
      *this, "select-config",
      llvm::cl::desc("choose each GEMM's kernel configuration by the measured "
                     "rules of --coda-select-gemm-config (default; GEMMs they "
                     "do not cover, and every GEMM with select-config=0, take "
                     "the options above)"),
      llvm::cl::init(true)};
  Option<int64_t> clusterM{
      *this, "cluster-m",
      llvm::cl::desc("CTAs per cluster along M (1 or 2; the cooperative and "
                     "ping-pong schedules) sharing the rhs tile through TMA "
                     "multicast"),
      llvm::cl::init(1)};
  Option<std::string> manifest{
      *this, "manifest",
      llvm::cl::desc("write the kernels' JSON manifest to this file"),
      llvm::cl::init("")};
  Option<std::string> ptxasOptions{
      *this, "ptxas-options",
      llvm::cl::desc("extra options for ptxas (format=bin)"),
      llvm::cl::init("")};
};

/// Bufferizes, lowers every coda.gemm to a TMA + WGMMA kernel, maps the
/// remaining linalg ops to simple GPU kernels, and serializes the GPU module
/// to PTX or a cubin (gpu.binary); the host code launches them.
void buildCodaToGPUBinaryPipeline(OpPassManager &pm,
                                  const CodaToGPUBinaryOptions &options);
/// The same with the GEMM kernels' options as --coda-to-gpu takes them.
void buildCodaToGPUBinaryPipeline(OpPassManager &pm,
                                  const CodaToGPUOptions &kernels,
                                  bool selectConfig, StringRef format,
                                  StringRef manifest, StringRef ptxasOptions);
/// Its first part: bufferization, each GEMM's configuration (selected where
/// `selectConfig`) and its kernel; the host code launches them.
void buildCodaToGemmKernelsPipeline(OpPassManager &pm,
                                    const CodaToGPUOptions &kernels,
                                    bool selectConfig);
/// Its second part: the remaining linalg ops as loop kernels, then every
/// kernel to NVVM and PTX or a cubin (`manifest`: where to write the kernel
/// manifest, none where empty).
void buildCodaKernelsToBinaryPipeline(OpPassManager &pm,
                                      const CodaToGPUOptions &kernels,
                                      StringRef format, StringRef manifest,
                                      StringRef ptxasOptions);

/// Spill stores a selected kernel may keep: two registers' worth, which L1
/// serves; SwiGLU's derivative under ping-pong keeps one value there and is
/// faster than under the warp-specialized kernel (docs/performance.md,
/// "SwiGLU's derivative under ping-pong beside the row scale's partials").
/// The Python module exports it (tools/coda-fuzz checks against it).
constexpr int64_t kSpillAllowanceBytes = 8;

/// ptxas: in the CUDA toolkit CUDA_HOME, CUDA_ROOT or CUDA_PATH names, else
/// on PATH, else where the toolkit installs by default; empty if none.
std::string findPtxas();

/// Registers the named pipelines (`--coda-to-llvm-cpu`,
/// `--coda-to-gpu-binary`).
void registerCodaPipelines();

} // namespace coda
} // namespace mlir

#endif // CODA_PIPELINES_PIPELINES_H
