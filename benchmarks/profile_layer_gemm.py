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
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from backward import SIZES  # noqa: E402
import coda_runtime  # noqa: E402
import coda_torch  # noqa: E402
from coda_torch import ops  # noqa: E402
from layer_gemms import check_product, layer_gemms, layout_kernels, layout_operands  # noqa: E402

# (layout, M, N, K) of the gate/up projection's three GEMMs at hidden 2048
# ("gate_up", "gate_up_dX", "gate_up_dW").
GEMMS = {name.replace(" ", "_"): (layout, m, n, k)
         for name, layout, m, n, k in layer_gemms(2048, SIZES[2048])
         if name.startswith("gate_up")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--plain", required=True)
    parser.add_argument("--gemm", choices=sorted(GEMMS), required=True)
    args = parser.parse_args()
    coda_torch.load(args.kernels)
    layout, m, n, k = GEMMS[args.gemm]
    module, kernel = layout_kernels(coda_runtime.Module(args.plain))[layout]
    a, b, y, lhs, rhs = layout_operands(layout, m, n, k)
    ops._launch(module, kernel, a, b, y)
    check_product(y, lhs @ rhs)
    print(f"{args.gemm} ({layout}, {m} x {n} x {k}): coda's {kernel} and cuBLAS", flush=True)
    for _ in range(3):
        ops._launch(module, kernel, a, b, y)
        torch.matmul(lhs, rhs)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
