// RUN: cat %coda_src_root/python/coda_torch/kernels/linear_norm_qkv_rope.mlir %S/Inputs/norm-qkv-rope-bias-check.mlir | coda-opt --coda-derive-backward="function=linear_norm_qkv_rope_bias name=reference" | %differential="dynamic-size=256 norm-tol=1e-2" | %cpu-runner | FileCheck %s
// RUN: %coda_src_root/scripts/program-variant %coda_src_root/python/coda_torch/kernels/linear_norm_qkv_rope.mlir head64 > %t.mlir
// RUN: sed -e 's/x128xbf16/x64xbf16/g' %S/Inputs/norm-qkv-rope-bias-check.mlir >> %t.mlir
// RUN: coda-opt --coda-derive-backward="function=linear_norm_qkv_rope_bias name=reference" %t.mlir | %differential="dynamic-size=256 norm-tol=1e-2" | %cpu-runner | FileCheck %s

// The norm-deferred Q/K/V + RoPE with a bias added before the rotation
// (Qwen2's), its backward written by hand: the bias's gradient reduced as
// column partials of R^T dY in the adjoint, the row scale's from the input
// side as without a bias. Against the backward the derivation makes from
// the same forward (Inputs/norm-qkv-rope-bias-check.mlir), on the CPU at 256
// tokens and hidden 256 (dx, drs, dW, db), with heads of 128 and, in the
// head64 variant, of 64.

// CHECK: coda-check ok
