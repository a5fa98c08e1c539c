//===- CodaToLinalg.h - reference lowering of coda --------------*- C++ -*-===//

#ifndef CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H
#define CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace coda {

#define GEN_PASS_DECL_CODALOWERTOLINALG
#include "coda/Conversion/Passes.h.inc"

/// Adds the patterns that rewrite coda.gemm and coda.reduce_partials into
/// linalg, scf, arith and tensor/memref ops (the reference semantics).
void populateCodaToLinalgConversionPatterns(RewritePatternSet &patterns);

} // namespace coda
} // namespace mlir

#endif // CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H
