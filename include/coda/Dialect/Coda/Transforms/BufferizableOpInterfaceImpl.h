//===- BufferizableOpInterfaceImpl.h - bufferization of coda ----*- C++ -*-===//

#ifndef CODA_DIALECT_CODA_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define CODA_DIALECT_CODA_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
namespace coda {

/// Lets One-Shot Bufferize turn coda.gemm and coda.reduce_partials on tensors
/// into the same ops on memrefs (destination-passing style, in place).
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);

} // namespace coda
} // namespace mlir

#endif // CODA_DIALECT_CODA_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
