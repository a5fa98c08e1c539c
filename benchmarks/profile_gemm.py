"""One launch of cuBLAS and of each variant's `plain_nt` (bf16, rhs N x K) at
one shape, each checked against float32: the program to run under Nsight
Compute, which then profiles exactly these kernels.

  ncu --set full -k 'regex:plain_nt|nvjet|sm90' -o gemm \\
      python3 benchmarks/profile_gemm.py --shape 16384 4096 4096 \\
      --variant ws=build/gpu-tests/primitives
"""

import argparse

import coda_runtime
import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", nargs=3, type=int, default=[16384, 4096, 4096],
                        metavar=("M", "N", "K"))
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=DIR of a coda-compile output with plain_nt")
    args = parser.parse_args()
    m, n, k = args.shape
    torch.backends.cuda.matmul.allow_tf32 = False
    stream = torch.cuda.current_stream().cuda_stream
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(n, k, device="cuda").bfloat16()
    want = a.float() @ b.float().T
    got = torch.matmul(a, b.T)
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-1)
    for spec in args.variant:
        name, path = spec.split("=", 1)
        module = coda_runtime.Module(path)
        (kernel,) = module.kernels_of("plain_nt")
        y = torch.zeros(m, n, device="cuda", dtype=torch.bfloat16)
        module.launch(kernel, [a, b, y], stream)
        torch.cuda.synchronize()
        torch.testing.assert_close(y.float(), want, rtol=2e-2, atol=2e-1)
        print(f"{name}: checked", flush=True)


if __name__ == "__main__":
    main()
