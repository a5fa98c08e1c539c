// RUN: mlir-opt %s --load-dialect-plugin=%coda_plugin --load-pass-plugin=%coda_plugin | FileCheck %s --check-prefix=PARSE
// RUN: mlir-opt %s --load-dialect-plugin=%coda_plugin --load-pass-plugin=%coda_plugin --pass-pipeline="builtin.module(coda-lower-to-linalg)" | FileCheck %s --check-prefix=LOWER

// Debian's stock mlir-opt parses coda IR and runs coda passes through the
// CodaPlugin library.

// PARSE-LABEL: func @bias
// PARSE: coda.gemm %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x6xf32>
// PARSE: coda.yield

// LOWER-LABEL: func @bias
// LOWER-NOT: coda.
// LOWER: linalg.generic
// LOWER: scf.for
// LOWER: tensor.insert
func.func @bias(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<6xf32>, %o: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32> epilogue(%acc, col %cv = %c : tensor<6xf32>) outs(%o : tensor<4x6xf32>) {
    %0 = arith.addf %acc, %cv : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<4x6xf32>
}
