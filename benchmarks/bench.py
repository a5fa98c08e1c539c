"""coda vs cuBLAS, torch eager and torch.compile, side by side in one process.

  python3 benchmarks/bench.py --hidden 4096 --out benchmarks/results/h4096.json

Cases: the plain GEMM (coda's kernel vs torch.matmul) at 4096^3, 8192^3 and
every GEMM shape of the block, and each fused pattern of
benchmarks/patterns.py (coda's kernels run by the runtime vs the same
computation in torch eager, torch.compile default and
mode="max-autotune-no-cudagraphs"), M = 16384 tokens, bf16.
Each coda result is checked against eager before timing. Times are medians of
CUDA-event timings after warm-up, with L2 flushed before every repetition;
coda and each baseline run in interleaved rounds (timing.interleaved_ms), and
`ratios` holds the median per-round speedup of coda over each baseline.
Kernels come from scripts/build-gpu-tests; the runtime from
scripts/build-runtime (PYTHONPATH). `--variant NAME=DIR` times each pattern
with the kernels of another build as well, in the same rounds (its ratio:
the variant's time / coda's). With --torch-kernels (the output of
scripts/build-torch-kernels), the forward + backward cases of backward.py
(coda_torch's ops and a Llama decoder layer) join the same results.
"""

import argparse
import datetime
import json
import os

import coda_runtime
import torch

from patterns import PATTERNS
import statistics

from timing import interleaved_ms, median_ratio

BUILD = os.environ.get("CODA_GPU_TESTS", os.path.join(
    os.path.dirname(__file__), "..", "build", "gpu-tests"))
SIZES = {2048: 5632, 4096: 11008, 8192: 22016}
TOKENS, VOCAB = 16384, 32768
SQUARE = (4096, 8192)

def runner(pats, p, t, stream):
    """Runs pattern `p`'s coda program on the inputs `t` (and its host-side
    finish, where it has one)."""
    coda_args = p.coda_args(t)

    def run():
        pats.launch_function(p.function, coda_args, stream)
        if hasattr(p, "finish"):
            return p.finish(t)

    return run


def first(x):
    return x[0] if isinstance(x, tuple) else x


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, nargs="+", default=sorted(SIZES))
    parser.add_argument("--modes", nargs="*", default=["default", "max-autotune-no-cudagraphs"],
                        help="torch.compile modes to compare (none: eager only)")
    parser.add_argument("--cases", nargs="*",
                        help="run only these cases: 'gemm' and pattern names (default: all)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default=os.environ.get("CODA_COMMIT", "unknown"))
    parser.add_argument("--torch-kernels",
                        help="also run backward.py's cases with these coda_torch kernels")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                        help="time each pattern with the kernels of another "
                             "scripts/build-gpu-tests output too, in the same rounds")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.empty(1, device="cuda")
    prims = coda_runtime.Module(os.path.join(BUILD, "primitives"))
    pats = coda_runtime.Module(os.path.join(BUILD, "patterns"))
    variants = {name: coda_runtime.Module(os.path.join(path, "patterns"))
                for name, path in (spec.split("=", 1) for spec in args.variant)}
    stream = torch.cuda.current_stream().cuda_stream
    (gemm_kernel,) = prims.kernels_of("plain_nt")
    results = []

    def save():
        # Written after every case, so that a cut-off run keeps what it measured.
        doc = {"device": torch.cuda.get_device_name(),
               "date": datetime.date.today().isoformat(),
               "commit": args.commit,
               "torch": torch.__version__,
               "results": results}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)

    def gemm_case(m, n, k):
        a = torch.randn(m, k, device="cuda").bfloat16()
        b = torch.randn(n, k, device="cuda").bfloat16()
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        prims.launch(gemm_kernel, [a, b, y], stream)
        torch.testing.assert_close(y.float(), (a @ b.T).float(), rtol=2e-2, atol=2e-1)
        return interleaved_ms({
            "coda": lambda: prims.launch(gemm_kernel, [a, b, y], stream),
            "cublas": lambda: torch.matmul(a, b.T)})

    def gemm_row(m, n, k):
        times = gemm_case(m, n, k)
        coda, cublas = (statistics.median(times[key]) for key in ("coda", "cublas"))
        ratio = median_ratio(times["cublas"], times["coda"])
        results.append({"case": "gemm", "shape": {"M": m, "N": n, "K": k},
                        "coda_ms": coda, "baselines": {"cublas": cublas},
                        "ratios": {"cublas": ratio}})
        print(f"gemm {m}x{n}x{k}: coda {coda:.3f} ms, cuBLAS {cublas:.3f} ms "
              f"({ratio:.2f}x)", flush=True)
        save()

    # The square GEMMs GEMM libraries are compared at.
    if args.cases is None or "gemm" in args.cases:
        for size in SQUARE:
            gemm_row(size, size, size)
    for hidden in args.hidden:
        mlp = SIZES[hidden]
        gemm_shapes = sorted({(TOKENS, hidden, hidden), (TOKENS, 3 * hidden, hidden),
                              (TOKENS, 2 * mlp, hidden), (TOKENS, hidden, mlp),
                              (TOKENS, VOCAB, hidden)})
        if args.cases is not None and "gemm" not in args.cases:
            gemm_shapes = []
        for m, n, k in gemm_shapes:
            gemm_row(m, n, k)
        for p in PATTERNS:
            if args.cases is not None and p.name not in args.cases:
                continue
            torch.manual_seed(0)
            t = p.make(TOKENS, hidden, mlp, VOCAB)
            coda_run = runner(pats, p, t, stream)
            coda_run()
            torch.cuda.synchronize()
            want = first(p.eager(t)).float()
            # Where the pattern's last output is what eager returns first.
            got = list(p.outputs(t).values())[-1].float()
            if got.shape == want.shape:
                torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-2 * want.abs().max().item())
            fns = {"coda": coda_run, "torch_eager": lambda: p.eager(t)}
            for name, module in variants.items():
                fns[f"variant_{name}"] = runner(module, p, t, stream)
            times = interleaved_ms(fns)
            row = {"case": p.name, "shape": p.shape(TOKENS, hidden, mlp, VOCAB),
                   "coda_ms": statistics.median(times["coda"]),
                   "baselines": {key: statistics.median(times[key])
                                 for key in fns if key != "coda"},
                   "ratios": {key: median_ratio(times[key], times["coda"])
                              for key in fns if key != "coda"}}
            for mode in args.modes:
                compiled = torch.compile(p.eager, mode=None if mode == "default" else mode)
                compiled(t)
                key = "torch_compile" if mode == "default" else "torch_compile_max_autotune"
                times = interleaved_ms({"coda": coda_run, key: lambda: compiled(t)})
                row["baselines"][key] = statistics.median(times[key])
                row["ratios"][key] = median_ratio(times[key], times["coda"])
                torch._dynamo.reset()
            results.append(row)
            ratios = ", ".join(f"{k} {v:.3f} ms ({row['ratios'][k]:.2f}x)"
                               for k, v in row["baselines"].items())
            print(f"{p.name} hidden {hidden}: coda {row['coda_ms']:.3f} ms; {ratios}", flush=True)
            save()
            del t, coda_run
            torch.cuda.empty_cache()

    if args.torch_kernels:
        import backward

        def record(row):
            results.append(row)
            save()

        backward.measure(args.torch_kernels, [h for h in args.hidden if h in backward.SIZES],
                         record)
    save()


if __name__ == "__main__":
    main()
