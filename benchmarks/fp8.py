"""FP8 GEMMs against torch._scaled_mm (cuBLASLt's FP8 kernels), side by side
in one process: test/GPU/cases/fp8.mlir's kernels at the block shapes,
e4m3 operands (lhs M x K, weight N x K), bf16 out.

  PYTHONPATH=<runtime>:benchmarks python3 benchmarks/fp8.py \\
      --variant default=build/gpu-tests/fp8 --out fp8.json

Cases: `rowwise` (a per-token scale of the lhs and a per-channel scale of
the weight, torchao's float8 row-wise recipe) against `torch._scaled_mm`
with scale_a M x 1 and scale_b 1 x N; `tensorwise` (one scale per operand,
their product passed as the kernel's scalar) against `_scaled_mm` with
scalar scales. The bf16 GEMM of the same shape (torch.matmul) is timed in
the same rounds for scale. Each coda output is checked against the
float64 product of the dequantized operands first. `vs_scaled_mm` is the
median over rounds of _scaled_mm's time / coda's.
"""

import argparse
import json
import statistics

import coda_runtime
import torch

from gemm_configs import block_shapes
from timing import interleaved_ms, median_ratio

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def quantize_rows(x):
    """x (rows x K, float) as e4m3 with one f32 scale per row: x ~ q * s."""
    scale = x.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
    return (x / scale).to(torch.float8_e4m3fn), scale.float()


def check(y, want):
    """y's largest error against want, over want's largest magnitude. FP8
    WGMMA accumulates with fewer bits than f32 unless the kernel promotes
    (cuBLAS without fast accumulation does; coda and cuBLAS with it do
    not), so the error grows with K: refused above 3 %."""
    scale = want.abs().max().item()
    err = (y.double() - want).abs().max().item()
    if not err <= 3e-2 * scale:
        raise AssertionError(f"max error {err:.3e} against a scale of {scale:.3e}")
    return err / scale


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", required=True,
                        metavar="NAME=DIR", help="a coda-compile output of fp8.mlir")
    parser.add_argument("--shape", nargs=3, type=int, action="append",
                        metavar=("M", "N", "K"))
    parser.add_argument("--cases", nargs="+", choices=["rowwise", "tensorwise"],
                        default=["rowwise", "tensorwise"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    stream = torch.cuda.current_stream().cuda_stream
    variants = []
    for spec in args.variant:
        name, path = spec.split("=", 1)
        variants.append((name, coda_runtime.Module(path)))
    rows = []
    for m, n, k in (args.shape or block_shapes()):
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda")
        w = torch.randn(n, k, device="cuda") * k ** -0.5
        a8, sa = quantize_rows(x)
        w8, sw = quantize_rows(w)
        xb, wb = x.bfloat16(), w.bfloat16()
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        deq = (a8.double() @ w8.double().T)
        for case in args.cases:
            if case == "rowwise":
                want = deq * sa.double() * sw.double().T
                scale_a, scale_b = sa, sw.T.contiguous()
                kernel_args = [a8, w8, sa.view(m), sw.view(n), y]
            else:
                ta, tw = sa.max(), sw.max()
                want = deq * (ta * tw).double()
                scale_a, scale_b = ta, tw
                kernel_args = [a8, w8, (ta * tw).item(), y]
            fns = {
                "scaled_mm": lambda: torch._scaled_mm(
                    a8, w8.T, scale_a=scale_a, scale_b=scale_b,
                    out_dtype=torch.bfloat16),
                "scaled_mm_fast": lambda: torch._scaled_mm(
                    a8, w8.T, scale_a=scale_a, scale_b=scale_b,
                    out_dtype=torch.bfloat16, use_fast_accum=True),
                "bf16_matmul": lambda: torch.matmul(xb, wb.T),
            }
            errors = {"scaled_mm": check(fns["scaled_mm"](), want),
                      "scaled_mm_fast": check(fns["scaled_mm_fast"](), want)}
            for name, module in variants:
                (kernel,) = module.kernels_of(f"fp8_{case}")
                y.fill_(float("nan"))
                module.launch(kernel, kernel_args, stream)
                torch.cuda.synchronize()
                errors[name] = check(y, want)
                fns[name] = (lambda module=module, kernel=kernel:
                             module.launch(kernel, kernel_args, stream))
            times = interleaved_ms(fns)
            row = {"case": case, "shape": {"M": m, "N": n, "K": k},
                   "scaled_mm_ms": statistics.median(times["scaled_mm"]),
                   "bf16_matmul_ms": statistics.median(times["bf16_matmul"]),
                   "coda_ms": {v: statistics.median(times[v]) for v, _ in variants},
                   "scaled_mm_fast_ms": statistics.median(times["scaled_mm_fast"]),
                   "vs_scaled_mm": {v: median_ratio(times["scaled_mm"], times[v])
                                    for v, _ in variants},
                   "vs_scaled_mm_fast": {v: median_ratio(times["scaled_mm_fast"], times[v])
                                         for v, _ in variants},
                   "max_error_over_scale": errors}
            rows.append(row)
            print(f"{case} {m}x{n}x{k}: _scaled_mm {row['scaled_mm_ms']:.3f} ms, "
                  f"fast {row['scaled_mm_fast_ms']:.3f} ms, "
                  f"bf16 {row['bf16_matmul_ms']:.3f} ms; " + ", ".join(
                      f"{v} {t:.3f} ({row['vs_scaled_mm'][v]:.3f}x, "
                      f"{row['vs_scaled_mm_fast'][v]:.3f}x fast)"
                      for v, t in row["coda_ms"].items())
                  + "; error/scale " + ", ".join(
                      f"{v} {e:.1e}" for v, e in errors.items()), flush=True)
        del x, w, a8, w8, xb, wb, y, deq
        torch.cuda.empty_cache()
    geomean = {}
    for case in args.cases:
        for v, _ in variants:
            for base in ("vs_scaled_mm", "vs_scaled_mm_fast"):
                r = [row[base][v] for row in rows if row["case"] == case]
                geomean[f"{case}/{v}/{base}"] = statistics.geometric_mean(r)
    print("geometric mean vs _scaled_mm: " + ", ".join(
        f"{key} {g:.3f}x" for key, g in geomean.items()))
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "commit": args.commit,
                   "torch": torch.__version__, "results": rows,
                   "geomean_vs_scaled_mm": geomean}, f, indent=1)


if __name__ == "__main__":
    main()
