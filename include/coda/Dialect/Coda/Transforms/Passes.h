//===- Passes.h - coda fusion passes ----------------------------*- C++ -*-===//

#ifndef CODA_DIALECT_CODA_TRANSFORMS_PASSES_H
#define CODA_DIALECT_CODA_TRANSFORMS_PASSES_H

#include "coda/Dialect/Coda/IR/Coda.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace coda {

#define GEN_PASS_DECL
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"

/// linalg contractions -> coda.gemm (a batch sharing its rhs folded into M),
/// and reshapes of GEMM results moved past their elementwise consumers.
void populateConvertMatmulsPatterns(RewritePatternSet &patterns);
/// Transposes moved after the slices, concatenations and elementwise ops
/// that read them (heads transposed before RoPE), those ops computed in the
/// order of what they read.
void populateSinkTransposesPatterns(RewritePatternSet &patterns);
/// A moved transpose merged back into the elementwise op before it where
/// that op stayed outside every epilogue (run after the fusions).
void populateFoldTransposesIntoProducersPatterns(RewritePatternSet &patterns);
/// Two GEMMs sharing lhs + elementwise combination -> pairwise epilogue.
void populateFuseSwiGLUPatterns(RewritePatternSet &patterns);
/// lhs = x * R[m] * G[k] -> row scale in the epilogue, G folded into the weight.
void populateDeferRowScalePatterns(RewritePatternSet &patterns);
/// rotate_half RoPE on a GEMM output -> strided pair_map in its epilogue.
void populateFuseRoPEPatterns(RewritePatternSet &patterns);
/// Elementwise consumers of a GEMM -> its epilogue.
void populateFusePointwisePatterns(RewritePatternSet &patterns);
/// Statistics over groups of a GEMM's row ([M, N / w, w] views) and what
/// reads them -> group_reduce / group_value in its epilogue.
void populateFuseGroupsPatterns(RewritePatternSet &patterns, int64_t tile);
/// Per-row gathers of a function of a GEMM output -> coda.row_select.
void populateFuseGathersPatterns(RewritePatternSet &patterns);
/// Row and column reductions of a GEMM output -> per-tile partials + finish.
void populateFuseReductionsPatterns(RewritePatternSet &patterns,
                                       int64_t tile);

#define GEN_PASS_REGISTRATION
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"

} // namespace coda
} // namespace mlir

#endif // CODA_DIALECT_CODA_TRANSFORMS_PASSES_H
