"""One launch of cuBLAS and of each variant's `plain_nt` (bf16, rhs N x K) at
one shape, each checked against float32, and optionally of epilogue kernels
of test/GPU/cases/epilogues.mlir on the same operands (with cuBLAS's own
epilogue where it has one): the program to run under Nsight Compute, which
then profiles exactly these kernels.

  ncu --set full -k 'regex:plain_nt|nvjet|sm90' -o gemm \\
      python3 benchmarks/profile_gemm.py --shape 16384 4096 4096 \\
      --variant ws=build/gpu-tests/primitives

  ncu --set full -k 'regex:plain_nt|residual|nvjet|sm90' -o residual \\
      python3 benchmarks/profile_gemm.py --shape 16384 6144 2048 \\
      --variant ws=build/gpu-tests/primitives \\
      --epilogues build/gpu-tests/epilogues --case residual
"""

import argparse

import coda_runtime
import torch

from epilogues import NAMES, case, checked_launcher, vendor


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", nargs=3, type=int, default=[16384, 4096, 4096],
                        metavar=("M", "N", "K"))
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=DIR of a coda-compile output with plain_nt")
    parser.add_argument("--epilogues", metavar="DIR",
                        help="a coda-compile output of test/GPU/cases/epilogues.mlir")
    parser.add_argument("--case", action="append", default=[], choices=NAMES,
                        help="epilogue kernel of --epilogues to launch (repeatable)")
    args = parser.parse_args()
    if args.case and not args.epilogues:
        parser.error("--case needs --epilogues")
    m, n, k = args.shape
    torch.backends.cuda.matmul.allow_tf32 = False
    stream = torch.cuda.current_stream().cuda_stream
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = (torch.randn(n, k, device="cuda") * k ** -0.5).bfloat16()
    want = a.float() @ b.float().T
    tol = dict(rtol=2e-2, atol=2e-2 * want.abs().max().item())
    got = torch.matmul(a, b.T)
    torch.testing.assert_close(got.float(), want, **tol)
    for spec in args.variant:
        name, path = spec.split("=", 1)
        module = coda_runtime.Module(path)
        (kernel,) = module.kernels_of("plain_nt")
        y = torch.zeros(m, n, device="cuda", dtype=torch.bfloat16)
        module.launch(kernel, [a, b, y], stream)
        torch.cuda.synchronize()
        torch.testing.assert_close(y.float(), want, **tol)
        print(f"{name}: checked", flush=True)
    if args.case:
        module = coda_runtime.Module(args.epilogues)
        for name in args.case:
            coda_args, checks = case(name, m, n, k, a, b, want)
            checked_launcher(module, name, coda_args, checks, stream)
            fused = vendor(name, a, b, coda_args)
            if fused:
                fused()
                torch.cuda.synchronize()
            print(f"{name}: checked", flush=True)


if __name__ == "__main__":
    main()
