// RUN: mlir-opt %s --load-dialect-plugin=%coda_plugin --load-pass-plugin=%coda_plugin | FileCheck %s --check-prefix=CHECK-PARSE
// RUN: mlir-opt %s --load-dialect-plugin=%coda_plugin --load-pass-plugin=%coda_plugin --pass-pipeline="builtin.module(coda-lower-to-linalg)" | FileCheck %s --check-prefix=CHECK-LOWER

// Debian's stock mlir-opt parses coda IR and runs coda passes through the
// CodaPlugin library.

// CHECK-PARSE-LABEL: func @bias
// CHECK-PARSE: coda.gemm %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x6xf32>
// CHECK-PARSE: coda.yield

// CHECK-LOWER-LABEL: func @bias
// CHECK-LOWER-NOT: coda.
// CHECK-LOWER: linalg.generic
// CHECK-LOWER: scf.for
// CHECK-LOWER: tensor.insert
func.func @bias(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<6xf32>, %o: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32> epilogue(%acc, col %cv = %c : tensor<6xf32>) outs(%o : tensor<4x6xf32>) {
    %0 = arith.addf %acc, %cv : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<4x6xf32>
}
