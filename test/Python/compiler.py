# RUN: %python %s | FileCheck %s
# REQUIRES: python-bindings

import coda

GEMM = """
func.func @bias(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<6xf32>, %o: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xf32>, tensor<8x6xf32>
      epilogue(%acc, col %cv = %c : tensor<6xf32>) outs(%o : tensor<4x6xf32>) {
    %0 = arith.addf %acc, %cv : f32
    coda.yield %0 : f32
  }
  return %0 : tensor<4x6xf32>
}
"""

# verify() returns the canonical printed form.
# CHECK-LABEL: verified
# CHECK: coda.gemm %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x6xf32>
# CHECK-NEXT: epilogue(%{{.*}}, col %{{.*}} = %{{.*}} : tensor<6xf32>)
print("verified")
print(coda.verify(GEMM))

# run_pipeline() runs coda's passes.
# CHECK-LABEL: lowered
# CHECK-NOT: coda.gemm
# CHECK: linalg.generic
# CHECK: scf.for
print("lowered")
print(coda.run_pipeline(GEMM, "builtin.module(coda-lower-to-linalg)"))

# A verifier error surfaces as CompilerError carrying MLIR's diagnostic.
# CHECK-LABEL: rejected
# CHECK: the input does not parse or verify:
# CHECK: error: 'coda.gemm' op expects epilogue input #0 (col) of shape 6, got 5
print("rejected")
try:
    coda.verify(GEMM.replace("tensor<6xf32>", "tensor<5xf32>"))
    print("accepted a malformed gemm")
except coda.CompilerError as error:
    print(error)

# So does a pipeline that does not parse.
# CHECK-LABEL: bad pipeline
# CHECK: invalid pass pipeline 'builtin.module(coda-no-such-pass)'
print("bad pipeline")
try:
    coda.run_pipeline(GEMM, "builtin.module(coda-no-such-pass)")
    print("ran an unknown pass")
except coda.CompilerError as error:
    print(error)
