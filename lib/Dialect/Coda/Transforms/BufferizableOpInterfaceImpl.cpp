//===- BufferizableOpInterfaceImpl.cpp - bufferization of coda ------------===//

#include "coda/Dialect/Coda/Transforms/BufferizableOpInterfaceImpl.h"

#include "coda/Dialect/Coda/IR/Coda.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::coda;

namespace {

/// The buffers of `operands` (tensors replaced by their buffers).
FailureOr<SmallVector<Value>> getBuffers(RewriterBase &rewriter,
                                         ValueRange operands,
                                         const BufferizationOptions &options,
                                         const BufferizationState &state) {
  SmallVector<Value> buffers;
  for (Value operand : operands) {
    if (!isa<TensorType>(operand.getType())) {
      buffers.push_back(operand);
      continue;
    }
    FailureOr<Value> buffer = getBuffer(rewriter, operand, options, state);
    if (failed(buffer))
      return failure();
    buffers.push_back(*buffer);
  }
  return buffers;
}

struct GemmOpInterface
    : DstBufferizableOpInterfaceExternalModel<GemmOpInterface, GemmOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &state) const {
    auto gemm = cast<GemmOp>(op);
    if (!gemm.isDpsInit(&operand))
      return true;
    // Tiles, pairs and partials are overwritten; a row selection keeps the
    // initial value of rows whose target is out of range.
    unsigned index = operand.getOperandNumber() -
                     gemm.getOutputs().getBeginOperandIndex();
    return isa<RowType>(gemm.getYieldOp().getValues()[index].getType());
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto gemm = cast<GemmOp>(op);
    FailureOr<SmallVector<Value>> buffers =
        getBuffers(rewriter, op->getOperands(), options, state);
    if (failed(buffers))
      return failure();
    ArrayRef<Value> all = *buffers;
    unsigned numInputs = gemm.getEpilogueInputs().size();
    ValueRange inputs = all.slice(2, numInputs);
    ValueRange outputs = all.drop_front(2 + numInputs);
    rewriter.setInsertionPoint(op);
    auto bufferized = GemmOp::create(
        rewriter, op->getLoc(), TypeRange(), all[0], all[1], inputs, outputs,
        gemm.getInputFormsAttr(), gemm.getTransposeBAttr(),
        gemm.getTransposeAAttr());
    // A pinned kernel configuration (coda.gemm_config) stays with the GEMM.
    bufferized->setDiscardableAttrs(gemm->getDiscardableAttrDictionary());
    rewriter.inlineRegionBefore(gemm.getEpilogue(), bufferized.getEpilogue(),
                                bufferized.getEpilogue().end());
    replaceOpWithBufferizedValues(rewriter, op, outputs);
    return success();
  }
};

struct ReducePartialsOpInterface
    : DstBufferizableOpInterfaceExternalModel<ReducePartialsOpInterface,
                                              ReducePartialsOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &state) const {
    // The destination is filled with the reduction's identity first.
    return !cast<ReducePartialsOp>(op).isDpsInit(&operand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto reduce = cast<ReducePartialsOp>(op);
    FailureOr<SmallVector<Value>> buffers =
        getBuffers(rewriter, op->getOperands(), options, state);
    if (failed(buffers))
      return failure();
    rewriter.setInsertionPoint(op);
    auto bufferized =
        ReducePartialsOp::create(rewriter, op->getLoc(), (*buffers)[0],
                                 (*buffers)[1], reduce.getKind(), reduce.getAxis());
    bufferized->setDiscardableAttrs(reduce->getDiscardableAttrDictionary());
    replaceOpWithBufferizedValues(rewriter, op, (*buffers)[1]);
    return success();
  }
};

} // namespace

void mlir::coda::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, CodaDialect *) {
    GemmOp::attachInterface<GemmOpInterface>(*ctx);
    ReducePartialsOp::attachInterface<ReducePartialsOpInterface>(*ctx);
  });
}
