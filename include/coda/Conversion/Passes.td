//===- Passes.td - coda conversion passes ------------------*- tablegen -*-===//

#ifndef CODA_CONVERSION_PASSES_TD
#define CODA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def CodaLowerToLinalg : Pass<"coda-lower-to-linalg"> {
  let summary = "reference lowering of coda ops to linalg, scf, arith and tensor";
  let description = [{
    The executable meaning of the dialect. `coda.gemm` becomes a
    `linalg.generic` contraction into an f32 accumulator followed by a loop
    nest over the output that evaluates the epilogue region per element (per
    column pair when the epilogue has pairwise ops), writes tile and pair
    outputs, folds block reductions into their partials and applies row
    selections. `coda.reduce_partials` becomes a `linalg.reduce`. Works on
    tensors (loop-carried `tensor.insert`) and on memrefs (`memref.store`).

    Before:
    ```mlir
    %y = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32>
        epilogue(%acc, col %bias = %c : tensor<6xf32>)
        outs(%init : tensor<4x6xf32>) {
      %0 = arith.addf %acc, %bias : f32
      coda.yield %0 : f32
    }
    ```
    After (abridged):
    ```mlir
    %acc = linalg.generic {iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%a, %b : ...) outs(%zero : tensor<4x6xf32>) { ... }
    %y = scf.for %m = %c0 to %c4 step %c1 iter_args(%o0 = %init) -> tensor<4x6xf32> {
      %r = scf.for %n = %c0 to %c6 step %c1 iter_args(%o1 = %o0) -> tensor<4x6xf32> {
        %e = tensor.extract %acc[%m, %n] : tensor<4x6xf32>
        %b = tensor.extract %c[%n] : tensor<6xf32>
        %v = arith.addf %e, %b : f32
        %i = tensor.insert %v into %o1[%m, %n] : tensor<4x6xf32>
        scf.yield %i : tensor<4x6xf32>
      }
      scf.yield %r : tensor<4x6xf32>
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // CODA_CONVERSION_PASSES_TD
