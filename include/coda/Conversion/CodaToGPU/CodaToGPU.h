//===- CodaToGPU.h - coda.gemm to GPU kernels -------------------*- C++ -*-===//

#ifndef CODA_CONVERSION_CODATOGPU_CODATOGPU_H
#define CODA_CONVERSION_CODATOGPU_CODATOGPU_H

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace coda {

#define GEN_PASS_DECL_CODASELECTGEMMCONFIG
#define GEN_PASS_DECL_CODATOGPU
#define GEN_PASS_DECL_CODAEXPORTKERNELMANIFEST
#define GEN_PASS_DECL_CODACHECKGPUMAPPING
#include "coda/Conversion/Passes.h.inc"

} // namespace coda
} // namespace mlir

#endif // CODA_CONVERSION_CODATOGPU_CODATOGPU_H
