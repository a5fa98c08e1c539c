"""What each epilogue primitive adds to the GEMM: every kernel of
test/GPU/cases/epilogues.mlir against coda's plain GEMM (primitives.mlir's
plain_nt) of the same shape, and cuBLAS, side by side in one process.

  CODA_GPU_TESTS=DIR PYTHONPATH=<runtime>:benchmarks \\
      python3 benchmarks/epilogues.py --out epilogues.json

Shapes: the block's GEMMs at hidden 2048 / 4096 / 8192 whose N suits every
primitive (Q/K/V: N = 3 x hidden, a multiple of the heads' 128), M = 16384
tokens, bf16; `--shape M N K` (repeatable) times others (N a multiple of
128). Each kernel's output is checked against a float32 reference
before it is timed; the ratio is the median per-round ratio of the plain
GEMM's time to the epilogue's (below 1: the epilogue costs that much).

--variant NAME=DIR (repeatable) adds the epilogue kernels of another build
(e.g. scripts/build-gpu-tests --schedule=ping-pong) to the same rounds, each against
the same plain GEMM of $CODA_GPU_TESTS: how each schedule carries each
primitive.
"""

import argparse
import datetime
import json
import os
import statistics

import coda_runtime
import torch

from timing import interleaved_ms, median_ratio

BUILD = os.environ.get("CODA_GPU_TESTS", os.path.join(
    os.path.dirname(__file__), "..", "build", "gpu-tests"))
SHAPES = [(16384, 6144, 2048), (16384, 12288, 4096), (16384, 24576, 8192)]


def bf16(*shape, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).bfloat16()


def f32(*shape):
    return torch.empty(*shape, device="cuda", dtype=torch.float32)


def case(name, m, n, k, a, b, acc):
    """Arguments, outputs to check and their float32 references, of epilogue
    kernel `name` on operands a (M x K) and b (N x K), acc = a b^T."""
    if name == "row_scale":
        r = torch.rand(m, device="cuda") + 0.5
        y = bf16(m, n)
        return [a, b, r, y], [(y, acc * r[:, None])]
    if name == "col_bias":
        bias = torch.randn(n, device="cuda")
        y = bf16(m, n)
        return [a, b, bias, y], [(y, acc + bias)]
    if name == "scalar_scale":
        y = bf16(m, n)
        return [a, b, 0.5, y], [(y, acc * 0.5)]
    if name == "residual":
        res, y = bf16(m, n), bf16(m, n)
        return [a, b, res, y], [(y, acc + res.float())]
    if name == "row_sumsq":
        y, part = bf16(m, n), f32(m, n // 128)
        return [a, b, y, part], [(y, acc), (part, (acc * acc).view(m, -1, 128).sum(-1))]
    if name == "rotate_half":
        y = bf16(m, n)
        x = acc.view(m, -1, 2, 64)
        return [a, b, y], [(y, torch.stack([-x[:, :, 1], x[:, :, 0]], 2).reshape(m, n))]
    if name == "residual_norm":
        res, y, part = bf16(m, n), bf16(m, n), f32(m, n // 128)
        h = acc + res.float()
        return [a, b, res, y, part], [(y, h), (part, (h * h).view(m, -1, 128).sum(-1))]
    if name == "swiglu":
        out = bf16(m, n // 2)
        g, u = acc[:, 0::2], acc[:, 1::2]
        return [a, b, out], [(out, torch.nn.functional.silu(g) * u)]
    if name == "logsumexp":
        t = torch.randint(0, n, (m,), device="cuda")
        lse, logit = f32(m, n // 128), f32(m)
        return [a, b, t, lse, logit], [
            (lse, torch.logsumexp(acc.view(m, -1, 128), -1)),
            (logit, acc.gather(1, t[:, None])[:, 0])]
    raise ValueError(name)


def check(checks):
    """Each (kernel output, float32 reference) pair of `case` agrees."""
    for got, want in checks:
        torch.testing.assert_close(got.float(), want, rtol=2e-2,
                                   atol=2e-2 * want.abs().max().item())


def checked_launcher(module, name, kernel_args, checks, stream):
    """Launches epilogue kernel `name` of `module` once, checks its outputs
    against their float32 references (`case`'s checks), and returns a
    function that launches it again."""
    (kernel,) = module.kernels_of(name)
    module.launch(kernel, kernel_args, stream)
    torch.cuda.synchronize()
    check(checks)
    return lambda: module.launch(kernel, kernel_args, stream)


def vendor(name, a, b, coda_args):
    """cuBLAS with its own epilogue for the primitives it has one for
    (addmm's beta = 1 input and its bias), or None."""
    if name == "residual":
        res = coda_args[2]
        return lambda: torch.addmm(res, a, b.T)
    if name == "col_bias":
        bias = coda_args[2].bfloat16()
        return lambda: torch.addmm(bias, a, b.T)
    return None


NAMES = ["row_scale", "col_bias", "scalar_scale", "residual", "row_sumsq", "rotate_half",
         "residual_norm", "swiglu", "logsumexp"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default=os.environ.get("CODA_COMMIT", "unknown"))
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                        help="also time the epilogue kernels built into DIR")
    parser.add_argument("--cases", nargs="+", choices=NAMES, default=NAMES)
    parser.add_argument("--shape", nargs=3, type=int, action="append",
                        metavar=("M", "N", "K"),
                        help="time this shape (repeatable) instead of SHAPES")
    args = parser.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant)
    torch.backends.cuda.matmul.allow_tf32 = False
    prims = coda_runtime.Module(os.path.join(BUILD, "primitives"))
    epis = coda_runtime.Module(os.path.join(BUILD, "epilogues"))
    others = {name: coda_runtime.Module(os.path.join(d, "epilogues"))
              for name, d in variants.items()}
    stream = torch.cuda.current_stream().cuda_stream
    (plain,) = prims.kernels_of("plain_nt")
    results = []
    for m, n, k in args.shape or SHAPES:
        torch.manual_seed(0)
        a, b = bf16(m, k), bf16(n, k, scale=k ** -0.5)
        acc = a.float() @ b.float().T
        y = bf16(m, n)
        for name in args.cases:
            coda_args, checks = case(name, m, n, k, a, b, acc)
            fns = {"plain": lambda: prims.launch(plain, [a, b, y], stream),
                   "cublas": lambda: torch.matmul(a, b.T)}
            fused = vendor(name, a, b, coda_args)
            if fused:
                fns["cublas_epilogue"] = fused
            for variant, mod in [("epilogue", epis)] + list(others.items()):
                fns[variant] = checked_launcher(mod, name, coda_args, checks, stream)
            times = interleaved_ms(fns)
            row = {"case": "epilogue", "epilogue": name, "shape": {"M": m, "N": n, "K": k},
                   "coda_ms": statistics.median(times["epilogue"]),
                   "baselines": {key: statistics.median(times[key]) for key in ("plain", "cublas")},
                   "ratios": {key: median_ratio(times[key], times["epilogue"])
                              for key in ("plain", "cublas")}}
            if fused:
                # What cuBLAS's own epilogue costs it, for comparison.
                row["cublas_epilogue"] = {
                    "ms": statistics.median(times["cublas_epilogue"]),
                    "vs_cublas": median_ratio(times["cublas"], times["cublas_epilogue"])}
            if others:
                row["variants"] = {v: {"ms": statistics.median(times[v]),
                                       "vs_plain": median_ratio(times["plain"], times[v])}
                                   for v in others}
            results.append(row)
            extra = "".join(f", {v} {r['ms']:.3f} ms ({r['vs_plain']:.3f}x)"
                            for v, r in row.get("variants", {}).items())
            print(f"{name} {m}x{n}x{k}: {row['coda_ms']:.3f} ms, plain GEMM "
                  f"{row['baselines']['plain']:.3f} ms ({row['ratios']['plain']:.3f}x), "
                  f"cuBLAS {row['baselines']['cublas']:.3f} ms ({row['ratios']['cublas']:.3f}x)"
                  + extra, flush=True)
            if fused:
                print(f"  cuBLAS with its epilogue {row['cublas_epilogue']['ms']:.3f} ms "
                      f"({row['cublas_epilogue']['vs_cublas']:.3f}x of cuBLAS)")
            doc = {"device": torch.cuda.get_device_name(),
                   "date": datetime.date.today().isoformat(), "commit": args.commit,
                   "torch": torch.__version__, "results": results}
            with open(args.out, "w") as f:
                json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
