# RUN: rm -rf %t && %python %s %t %S/../Runtime/kernels.mlir | FileCheck %s
# REQUIRES: python-bindings

# coda.compile writes what coda-compile writes; errors come back as
# coda.CompilerError with the diagnostics.

import os
import sys

import coda

out, source = sys.argv[1], open(sys.argv[2]).read()
written = coda.compile(source, out, format="isa")
print(sorted(os.path.basename(p) for p in written))
# CHECK: ['coda_kernels.ptx', 'host.mlir', 'manifest.json']

F32_GEMM = """
func.func @f(%a: memref<?x64xf32>, %b: memref<64x64xf32>, %y: memref<?x64xf32>) {
  coda.gemm %a, %b : memref<?x64xf32>, memref<64x64xf32>
      epilogue(%acc) outs(%y : memref<?x64xf32>) {
    coda.yield %acc : f32
  }
  return
}
"""
try:
    coda.compile(F32_GEMM, out, format="isa")
except coda.CompilerError as e:
    print(e)
# CHECK: compilation failed
# CHECK: coda-compile: compiling for sm_90a (isa)
# CHECK: error: 'coda.gemm' op sm_90a lowering supports bf16 and f16 operands (f32 accumulation), got 'f32'
