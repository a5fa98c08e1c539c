//===- CudaToolkit.cpp - where the CUDA toolkit's ptxas is ----------------===//
//
// The spill check runs ptxas itself and MLIR's NVPTX serializer finds it
// through CUDA_HOME: one lookup serves both, so that they never assemble
// with two different toolkits.
//
//===----------------------------------------------------------------------===//

#include "coda/Pipelines/Pipelines.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"

std::string mlir::coda::findPtxas() {
  for (const char *variable : {"CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"})
    if (std::optional<std::string> root =
            llvm::sys::Process::GetEnv(variable)) {
      llvm::SmallString<256> path(*root);
      llvm::sys::path::append(path, "bin", "ptxas");
      if (llvm::sys::fs::can_execute(path))
        return std::string(path);
    }
  if (llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName("ptxas"))
    return *path;
  return llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas")
             ? "/usr/local/cuda/bin/ptxas"
             : "";
}
