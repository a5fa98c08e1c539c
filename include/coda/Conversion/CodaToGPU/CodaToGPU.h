//===- CodaToGPU.h - coda.gemm to GPU kernels -------------------*- C++ -*-===//

#ifndef CODA_CONVERSION_CODATOGPU_CODATOGPU_H
#define CODA_CONVERSION_CODATOGPU_CODATOGPU_H

#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace coda {

#define GEN_PASS_DECL_CODASELECTGEMMCONFIG
#define GEN_PASS_DECL_CODATOGPU
#define GEN_PASS_DECL_CODAEXPORTKERNELMANIFEST
#define GEN_PASS_DECL_CODACHECKGPUMAPPING
#define GEN_PASS_DECL_CODATILEPARALLELLOOPS
#define GEN_PASS_DECL_CODASPLITROWREDUCTIONS
#define GEN_PASS_DECL_CODAPREPAREHOSTPROGRAM
#define GEN_PASS_DECL_CODATENSORMAPPARAMS
#define GEN_PASS_DECL_CODAFP8TONVVM
#define GEN_PASS_DECL_CODAFASTMATHTONVVM
#define GEN_PASS_DECL_CODADEPENDENTLAUNCH
#include "coda/Conversion/Passes.h.inc"

/// A kernel that waits for the grids before it in its stream before it
/// touches memory (--coda-dependent-launch): the manifest's
/// `dependent_launch`, on which the runtime launches it with programmatic
/// stream serialization.
inline constexpr llvm::StringLiteral kDependentLaunchAttrName =
    "coda.dependent_launch";

/// The attribute of each kernel's gpu.func holding its ABI (the manifest's
/// entry for it).
inline constexpr llvm::StringLiteral kKernelAbiAttrName = "coda.kernel";

/// The attribute numbering the GEMMs of a module while a compile checks their
/// selected configurations for spills: --coda-to-gpu copies it from each
/// coda.gemm onto the kernels it makes.
inline constexpr llvm::StringLiteral kGemmIdAttrName = "coda.gemm_id";

/// Rows of the shared accumulator tile that each epilogue thread takes per
/// iteration of its row loop, unless a configuration says otherwise
/// (`epilogue_unroll`): a few rows' input loads in flight at once.
inline constexpr int64_t kDefaultEpilogueUnroll = 4;

/// The configurations a GEMM takes, in order, where the one selected for it
/// spills registers (ptxas): the shared-tile epilogue's warp-specialized
/// kernel, whose threads hold 8 columns of a row at a time, then one
/// warpgroup per 128 x 128 tile, whose accumulators are half as many; each
/// first as selected, then taking one row at a time (`epilogue_unroll = 1`),
/// where the math of four rows at once is what needs the registers.
SmallVector<GemmConfigAttr> getSpillFallbackConfigs(MLIRContext *ctx);

/// The patterns of --coda-to-gpu: every coda.gemm on memrefs inside a
/// function becomes a kernel in the `coda_kernels` gpu.module (configured by
/// its coda.gemm_config, else by `options`) and host code that launches it,
/// and every coda.reduce_partials of 2-D partials a kernel that folds them.
/// Apply them in program order (walkAndApplyPatterns) so that a function's
/// kernels are numbered in the order it launches them; a GEMM whose
/// configuration fails is reported on it and left in place, as is every
/// GEMM when coda has no GEMM lowering for `options.chip`.
void populateCodaToGPUConversionPatterns(RewritePatternSet &patterns,
                                         const CodaToGPUOptions &options);

/// The patterns of --coda-fp8-to-nvvm: scalar arith.truncf to and
/// arith.extf from f8E4M3FN / f8E5M2 as PTX cvt instructions.
void populateFp8ToNVVMConversionPatterns(RewritePatternSet &patterns);

/// The patterns of --coda-fast-math-to-nvvm: scalar f32 math.exp,
/// math.exp2, arith.divf and math.tanh marked `afn` as PTX's ex2.approx.ftz,
/// div.approx.ftz and tanh.approx.f32.
void populateFastMathToNVVMConversionPatterns(RewritePatternSet &patterns);

} // namespace coda
} // namespace mlir

#endif // CODA_CONVERSION_CODATOGPU_CODATOGPU_H
