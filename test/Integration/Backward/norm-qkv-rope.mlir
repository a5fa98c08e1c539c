// RUN: cat %coda_src_root/python/coda_torch/kernels/linear_norm_qkv_rope.mlir %S/Inputs/norm-qkv-rope-check.mlir | coda-opt --coda-derive-backward="function=linear_norm_qkv_rope name=reference" | %differential="dynamic-size=256 norm-tol=1e-2" | %cpu-runner | FileCheck %s
// The variant for heads of 64 (four heads at hidden 256), the check's
// tables made 64 wide the same way.
// RUN: %coda_src_root/scripts/program-variant %coda_src_root/python/coda_torch/kernels/linear_norm_qkv_rope.mlir head64 > %t.mlir
// RUN: sed -e 's/x128xbf16/x64xbf16/g' %S/Inputs/norm-qkv-rope-check.mlir >> %t.mlir
// RUN: coda-opt --coda-derive-backward="function=linear_norm_qkv_rope name=reference" %t.mlir | %differential="dynamic-size=256 norm-tol=1e-2" | %cpu-runner | FileCheck %s

// coda_torch's norm-deferred Q/K/V + RoPE has its backward written by hand:
// the row scale's gradient reduced from the input side (x * dx in the dX
// GEMM's epilogue, divided by rs), so that the forward saves no
// accumulator. Against the backward the derivation makes from the same
// forward (Inputs/norm-qkv-rope-check.mlir), on the CPU at 256 tokens,
// hidden 256 and two heads of 128 (dx, drs, dW), by relative L2 error (bf16
// roundings in different places).

// CHECK: coda-check ok
