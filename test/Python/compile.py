# RUN: rm -rf %t && %python %s %t %S/../Runtime/kernels.mlir | FileCheck %s
# REQUIRES: python-bindings

# coda.compile writes what coda-compile writes, with its options; errors
# come back as coda.CompilerError with the diagnostics.

import os
import sys

import coda

out, source = sys.argv[1], open(sys.argv[2]).read()
written = coda.compile(source, out, format="isa")
print(sorted(os.path.basename(p) for p in written))
# CHECK: ['coda_kernels.ptx', 'fusion-report.txt', 'host.mlir', 'manifest.json']

# The backward program, saving for it, and persistent kernels, as
# coda-compile --derive-backward --save-for-backward --schedule=staged.
import json  # noqa: E402

mlp = open(os.path.join(os.path.dirname(sys.argv[2]), "..", "..", "python", "coda_torch",
                        "kernels", "swiglu_mlp.mlir")).read()
coda.compile(mlp, out + "/mlp", format="isa", derive_backward=True, save_for_backward=True,
             schedule="staged")
manifest = json.load(open(out + "/mlp/manifest.json"))
for kernel in manifest["kernels"]:
    roles = [p.get("role") for p in kernel["params"] if p.get("role")]
    print(kernel["name"], kernel["persistent"], roles)
# CHECK: swiglu_mlp_gemm0 True ['pair', 'pair', 'pair']
# CHECK: swiglu_mlp_gemm1 True ['tile']
# CHECK: swiglu_mlp_backward_gemm0 True ['tile', 'tile', 'interleaved']
# CHECK: swiglu_mlp_backward_gemm1 True ['tile']
# CHECK: swiglu_mlp_backward_gemm2 True ['tile']
# CHECK: swiglu_mlp_backward_gemm3 True ['tile']
try:
    coda.compile(mlp, out + "/nosave", format="isa", save_for_backward=True)
except coda.CompilerError as e:
    print(e)
# CHECK: saving for the backward needs the backward (--derive-backward)

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
# CHECK: error: 'coda.gemm' op sm_90a lowering supports bf16, f16, f8E4M3FN and f8E5M2 operands (f32 accumulation), got 'f32'

# The raster order by coda-compile's names; anything else is refused.
coda.compile(source, out + "/along-m", format="isa", raster="along-m", swizzle=4)
print("along-m compiled")
# CHECK: along-m compiled
try:
    coda.compile(source, out + "/bad-raster", format="isa", raster="diagonal")
except coda.CompilerError as e:
    print(e)
# CHECK: raster must be 'along-n' or 'along-m', got 'diagonal'
