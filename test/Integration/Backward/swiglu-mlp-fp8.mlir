// RUN: cat %coda_src_root/python/coda_torch/kernels/swiglu_mlp_fp8.mlir %S/Inputs/swiglu-mlp-fp8-check.mlir | %differential="norm-tol=1e-2" | %cpu-runner | FileCheck %s

// coda_torch's FP8 MLP backward is written by hand (the derivation does not
// differentiate through FP8 operands): the GEMM dh = dz Wd from the
// quantized dz and Wd^T with their row-wise scales, the SwiGLU derivative in
// its epilogue, dgate / dup interleaved. Against the textbook derivative
// (Inputs/swiglu-mlp-fp8-check.mlir: silu'(g) = s + silu(g) (1 - s)) on the
// CPU, by relative L2 error (the two round to bf16 after different
// operation orders).

// CHECK: coda-check ok
