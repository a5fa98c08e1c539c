"""One of a decoder layer's GEMMs (bf16, 16384 tokens, hidden 2048), coda's
selected kernel and cuBLAS's, each launched three times on the same
operands: the program to run under Nsight Compute, which then profiles
exactly these kernels (their DRAM and L2 traffic, say).

  ncu --metrics dram__bytes_read.sum,lts__t_bytes.sum,gpc__cycles_elapsed.max \\
      -k 'regex:plain_nt|swiglu_mlp|nvjet' \\
      python3 benchmarks/profile_layer_gemm.py --kernels build/torch-kernels \\
      --plain build/gpu-tests/primitives --gemm gate_up_dX

The forward (nt, x W^T) runs the GPU suite's plain_nt (--plain), the
backward layouts coda_torch's swiglu_mlp program's dX = dAcc W (nn) and
dW = dAcc^T x (tn), as benchmarks/layer_gemms.py does.
"""
import argparse

import torch

import coda_runtime
import coda_torch
from coda_torch import ops

# (layout, M, N, K) of the gate/up projection's three GEMMs at hidden 2048.
GEMMS = {"gate_up": ("nt", 16384, 11264, 2048), "gate_up_dW": ("tn", 11264, 2048, 16384),
         "gate_up_dX": ("nn", 16384, 2048, 11264)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--plain", required=True)
    parser.add_argument("--gemm", choices=sorted(GEMMS), required=True)
    args = parser.parse_args()
    coda_torch.load(args.kernels)
    plain = coda_runtime.Module(args.plain)
    program, (nn_kernel, tn_kernel) = ops._kernels(
        "swiglu_mlp", "swiglu_mlp_backward", "grad:gemm0.lhs", "grad:gemm0.rhs")
    module, kernel = {"nt": (plain, plain.kernels_of("plain_nt")[0]), "nn": (program, nn_kernel),
                      "tn": (program, tn_kernel)}[GEMMS[args.gemm][0]]
    layout, m, n, k = GEMMS[args.gemm]
    # Operands as each layout stores them: nt a M x K, b N x K; nn a M x K,
    # b K x N; tn a K x M, b K x N.
    a = torch.randn(*((k, m) if layout == "tn" else (m, k)), device="cuda").bfloat16()
    b = torch.randn(*((n, k) if layout == "nt" else (k, n)), device="cuda").bfloat16()
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    lhs, rhs = a.T if layout == "tn" else a, b.T if layout == "nt" else b
    ops._launch(module, kernel, a, b, y)
    reference = lhs @ rhs
    torch.testing.assert_close(y.float(), reference.float(), rtol=2e-2,
                               atol=2e-2 * reference.abs().max().item())
    print(f"{args.gemm} ({layout}, {m} x {n} x {k}): coda's {kernel} and cuBLAS", flush=True)
    for _ in range(3):
        ops._launch(module, kernel, a, b, y)
        torch.matmul(lhs, rhs)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
