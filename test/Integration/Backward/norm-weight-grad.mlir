// RUN: cat %coda_src_root/python/coda_torch/kernels/norm_weight_grad.mlir %S/Inputs/norm-weight-grad-check.mlir | %differential="norm-tol=1e-2" | %cpu-runner | FileCheck %s

// coda_torch's norm-deferred ops fold the RMSNorm's gamma into the next
// GEMM's weight (W diag(gamma)); their weight gradient is one GEMM whose
// epilogue scales dAcc^T x by gamma and reduces gamma's gradient as column
// partials (norm_weight_grad.mlir, written by hand). Against the fold's
// textbook derivative on the CPU (Inputs/norm-weight-grad-check.mlir), by
// relative L2 error (both outputs round or sum in different orders).

// CHECK: coda-check ok
