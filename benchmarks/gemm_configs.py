"""Plain-GEMM throughput of kernel variants (tile shape, stages, ...) against
cuBLAS, side by side in one process: the data behind coda's per-shape
configuration choice.

  python3 benchmarks/gemm_configs.py --variant ws256=DIR --variant n128=DIR2 \
      --out results.json

`--shape M N K` (repeatable) times those shapes instead of the block shapes.
`--layout tn` times `plain_tn` (bf16, lhs stored K x M, rhs K x N: a weight
gradient), `--layout nn` `plain_nn` (f16 in, f32 out, rhs K x N: an input
gradient) in place of `plain_nt`.

Each DIR is a coda-compile output holding `plain_<layout>`
(test/GPU/cases/primitives.mlir; `plain_nt`: bf16, rhs N x K).
cuBLAS and the variants are timed in interleaved rounds; `vs_cublas` is the
median over rounds of cuBLAS time / variant time. `--steady SECONDS` also
runs each side back to back at the power limit (timing.steady_ms: time,
energy, power and clock per call, two passes), the regime of a training
step.
"""

import argparse
import json
import statistics

import coda_runtime
import torch

from bench import SIZES, TOKENS, VOCAB
from timing import interleaved_ms, median_ratio, steady_ms, steady_text


def block_shapes():
    shapes = {(4096, 4096, 4096), (8192, 8192, 8192)}
    for hidden, mlp in SIZES.items():
        shapes |= {(TOKENS, hidden, hidden), (TOKENS, 3 * hidden, hidden),
                   (TOKENS, 2 * mlp, hidden), (TOKENS, hidden, mlp),
                   (TOKENS, VOCAB, hidden)}
    return sorted(shapes)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", required=True,
                        help="NAME=DIR of a coda-compile output with plain_nt")
    parser.add_argument("--shape", nargs=3, type=int, action="append",
                        metavar=("M", "N", "K"),
                        help="time this shape (repeatable) instead of the block shapes")
    parser.add_argument("--layout", choices=["nt", "tn", "nn"], default="nt")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steady", type=float, default=0, metavar="SECONDS",
                        help="also run each side back to back for about SECONDS per pass")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    stream = torch.cuda.current_stream().cuda_stream
    variants = []
    for spec in args.variant:
        name, path = spec.split("=", 1)
        module = coda_runtime.Module(path)
        (kernel,) = module.kernels_of("plain_" + args.layout)
        variants.append((name, module, kernel))
    rows = []
    for m, n, k in args.shape or block_shapes():
        if args.layout == "nt":
            a = torch.randn(m, k, device="cuda").bfloat16()
            b = torch.randn(n, k, device="cuda").bfloat16()
            y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            want = (a @ b.T).float()
            fns = {"cublas": lambda: torch.matmul(a, b.T)}
        elif args.layout == "tn":
            a = torch.randn(k, m, device="cuda").bfloat16()
            b = torch.randn(k, n, device="cuda").bfloat16()
            y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            want = (a.T @ b).float()
            fns = {"cublas": lambda: torch.matmul(a.T, b)}
        else:
            a = torch.randn(m, k, device="cuda").half()
            b = torch.randn(k, n, device="cuda").half()
            y = torch.empty(m, n, device="cuda", dtype=torch.float32)
            want = (a @ b).float()
            fns = {"cublas": lambda: torch.matmul(a, b)}
        for name, module, kernel in variants:
            y.zero_()
            module.launch(kernel, [a, b, y], stream)
            torch.testing.assert_close(y.float(), want, rtol=2e-2, atol=2e-1)
            fns[name] = (lambda module=module, kernel=kernel:
                         module.launch(kernel, [a, b, y], stream))
        times = interleaved_ms(fns)
        row = {"shape": {"M": m, "N": n, "K": k},
               "cublas_ms": statistics.median(times["cublas"]),
               "coda_ms": {name: statistics.median(times[name]) for name, _, _ in variants},
               "vs_cublas": {name: median_ratio(times["cublas"], times[name])
                             for name, _, _ in variants}}
        if args.steady:
            row["steady"] = steady_ms(fns, seconds=args.steady)
        rows.append(row)
        print(f"{m}x{n}x{k}: cuBLAS {row['cublas_ms']:.3f} ms; " + ", ".join(
            f"{name} {t:.3f} ({row['vs_cublas'][name]:.3f}x)" for name, t in row["coda_ms"].items()),
            flush=True)
        if args.steady:
            print("  back to back: " + steady_text(row["steady"]), flush=True)
        del a, b, y, want
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "layout": args.layout,
                   "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
