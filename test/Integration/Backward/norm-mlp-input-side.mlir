// RUN: cat %coda_src_root/python/coda_torch/kernels/norm_swiglu_mlp.mlir %S/Inputs/norm-mlp-input-side-check.mlir | coda-opt --coda-derive-backward="function=mlp_forward name=reference" | %differential="norm-tol=1e-2" | %cpu-runner | FileCheck %s

// coda_torch's norm-deferred MLP block has its backward written by hand:
// the row scale's gradient reduced from the input side (x * (dAcc W_gu) in
// the dX GEMM's epilogue, divided by rs), so that the GEMM producing dAcc
// reduces nothing. Its forward and backward against the backward the
// derivation makes from the same block (Inputs/norm-mlp-input-side-check.mlir),
// on the CPU: dx, drs, dW_gate_up, dW_down, by relative L2 error (bf16
// roundings in different places).

// CHECK: coda-check ok
