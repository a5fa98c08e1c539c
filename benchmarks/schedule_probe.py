"""Where a kernel schedule's time goes: two coda-compile outputs of the GPU
suite's primitives (e.g. the default and --schedule=cooperative) side by side with
cuBLAS on plain GEMMs with a bf16 output (plain_nt) and an f32 output
(plain_nn, f16 operands), at full K and at K = 64 (one k-tile: launch, tile
setup and epilogue only). Each result is checked against float32 first.

  python3 benchmarks/schedule_probe.py --variant ws=build/gpu-tests/primitives \
      --variant coop=build/gpu-tests-coop/primitives --out probe.json
"""

import argparse
import json

import coda_runtime
import torch

from timing import median_ms

SHAPES = [(16384, 4096, 4096), (16384, 6144, 2048), (16384, 4096, 64),
          (16384, 6144, 64)]
CASES = [("plain_nt", torch.bfloat16, torch.bfloat16),
         ("plain_nn", torch.float16, torch.float32)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", required=True,
                        help="NAME=DIR of a coda-compile output of primitives.mlir")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    stream = torch.cuda.current_stream().cuda_stream
    variants = [(name, coda_runtime.Module(path))
                for name, path in (spec.split("=", 1) for spec in args.variant)]
    rows = []
    for function, dtype, out_dtype in CASES:
        for m, n, k in SHAPES:
            a = torch.randn(m, k, device="cuda").to(dtype)
            b = torch.randn(n, k, device="cuda").to(dtype)
            rhs = b.T if function == "plain_nn" else b
            rhs = rhs.contiguous()
            y = torch.empty(m, n, device="cuda", dtype=out_dtype)
            want = a.float() @ (rhs.float() if function == "plain_nn" else rhs.float().T)
            row = {"function": function, "shape": {"M": m, "N": n, "K": k},
                   "cublas_ms": median_ms(lambda: torch.matmul(a, b.T)), "coda_ms": {}}
            for name, module in variants:
                (kernel,) = module.kernels_of(function)
                y.zero_()
                module.launch(kernel, [a, rhs, y], stream)
                torch.testing.assert_close(y.float(), want, rtol=2e-2, atol=2e-1)
                row["coda_ms"][name] = median_ms(lambda: module.launch(kernel, [a, rhs, y], stream))
            rows.append(row)
            print(f"{function} {m}x{n}x{k}: cuBLAS {row['cublas_ms']:.3f} ms; " + ", ".join(
                f"{name} {t:.3f}" for name, t in row["coda_ms"].items()), flush=True)
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
