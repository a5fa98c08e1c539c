"""A Llama MLP's forward + backward with FP8 GEMMs (coda_torch.swiglu_mlp_fp8)
against the same recipe in PyTorch (torch._scaled_mm, row-wise scales, the
weight gradients in bf16: torchao's float8 row-wise recipe with
high-precision weight gradients), eager and under torch.compile, and
against the bf16 MLP (coda_torch.swiglu_mlp, torch.compile), side by side
in one process.

  PYTHONPATH=<runtime> python3 benchmarks/fp8_mlp.py --kernels build/torch-kernels \\
      --out fp8-mlp.json

Each candidate's output and input gradient are checked against the PyTorch
FP8 recipe's in eager (within a few FP8 roundings relative to the largest
value). `_scaled_mm` runs with fast accumulation, the accuracy coda's FP8
kernels have (docs/performance.md, "FP8 GEMMs"). Ratios are the median per-round ratio of the baseline's time to
coda_fp8's (L2 flushed before each run; timing.py).
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import coda_torch  # noqa: E402
from timing import against, interleaved_ms, write_ratio_results  # noqa: E402

E4M3_MAX = 448.0
# (tokens, hidden, features): Llama hidden 2048 and 4096 at 16384 tokens.
SHAPES = [(16384, 2048, 5632), (16384, 4096, 11008)]


def quantize_rows(t):
    scale = t.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / E4M3_MAX
    q = (t.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


class Fp8Linear(torch.autograd.Function):
    """x W^T with the row-wise recipe: x and W quantized per row (K), dy per
    row and W per column for dx, dW = dy^T x in bf16."""

    @staticmethod
    def forward(ctx, x, w):
        xq, sx = quantize_rows(x)
        wq, sw = quantize_rows(w)
        ctx.save_for_backward(x, w)
        return torch._scaled_mm(xq, wq.t(), scale_a=sx, scale_b=sw.t().contiguous(),
                                out_dtype=torch.bfloat16, use_fast_accum=True)

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dyq, sdy = quantize_rows(dy)
        wtq, swt = quantize_rows(w.t().contiguous())
        dx = torch._scaled_mm(dyq, wtq.t(), scale_a=sdy, scale_b=swt.t().contiguous(),
                              out_dtype=torch.bfloat16, use_fast_accum=True)
        return dx, dy.t() @ x


def torch_fp8_mlp(x, w_gate_up, w_down):
    # Gate rows then up rows (torch's own layout); the same values as the
    # interleaved weight coda reads.
    g, u = Fp8Linear.apply(x, w_gate_up).chunk(2, dim=1)
    return Fp8Linear.apply(F.silu(g) * u, w_down)


def torch_bf16_mlp(x, w_gate_up, w_down):
    g, u = (x @ w_gate_up.t()).chunk(2, dim=1)
    return (F.silu(g) * u) @ w_down.t()


def profile(name, fn, steps=5):
    """Prints the GPU time per step of each kernel `fn` launches, largest
    first, and their sum (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    fn()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    events.sort(key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in events) / steps / 1e3
    print(f"profile {name}: {total:.3f} ms of kernels per step", flush=True)
    for e in events[:16]:
        print(f"  {e.device_time_total / steps / 1e3:7.3f} ms  x{e.count // steps:<3d} "
              f"{e.key[:110]}", flush=True)
    # Where the GPU waits between kernels: the largest gaps, by the kernels
    # around them.
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA"),
                     key=lambda e: e.time_range.start)
    gaps = {}
    for a, b in zip(kernels, kernels[1:]):
        key = f"{a.name[:40]} -> {b.name[:40]}"
        gaps[key] = gaps.get(key, 0.0) + max(0.0, b.time_range.start - a.time_range.end)
    idle = sum(gaps.values()) / steps / 1e3
    print(f"  idle between kernels: {idle:.3f} ms per step (the steps' boundaries included)",
          flush=True)
    for key, gap in sorted(gaps.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {gap / steps / 1e3:7.3f} ms idle  {key}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True, help="scripts/build-torch-kernels output")
    parser.add_argument("--shape", nargs=3, type=int, action="append",
                        metavar=("T", "H", "F"))
    parser.add_argument("--modes", nargs="*", default=["default", "max-autotune-no-cudagraphs"])
    parser.add_argument("--profile", nargs="*", default=[], metavar="NAME",
                        help="print the kernels of these candidates (torch.profiler)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(args.kernels)
    rows = []
    for t, h, f in (args.shape or SHAPES):
        torch.manual_seed(0)
        x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
        w_stacked = (torch.randn(2 * f, h, device="cuda") * h ** -0.5).bfloat16()
        # Interleaved for coda: row 2j gate j, row 2j + 1 up j.
        w_inter = w_stacked.view(2, f, h).transpose(0, 1).reshape(2 * f, h).contiguous()
        w_down = (torch.randn(h, f, device="cuda") * f ** -0.5).bfloat16()
        dz = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
        params = {"stacked": [w_stacked.clone().requires_grad_(), w_down.clone().requires_grad_()],
                  "interleaved": [w_inter.clone().requires_grad_(),
                                  w_down.clone().requires_grad_()]}
        xg = x.clone().requires_grad_()

        def step(fn, layout):
            def run():
                xg.grad = None
                for p in params[layout]:
                    p.grad = None
                fn(xg, *params[layout]).backward(dz)
                return xg.grad
            return run

        fns = {"coda_fp8": step(coda_torch.swiglu_mlp_fp8, "interleaved"),
               "coda_bf16": step(coda_torch.swiglu_mlp, "interleaved"),
               "torch_fp8_eager": step(torch_fp8_mlp, "stacked")}
        for mode in args.modes:
            suffix = "" if mode == "default" else "_max_autotune"
            options = {"mode": None if mode == "default" else mode}
            fns["torch_fp8_compile" + suffix] = step(torch.compile(torch_fp8_mlp, **options),
                                                     "stacked")
            fns["torch_bf16_compile" + suffix] = step(torch.compile(torch_bf16_mlp, **options),
                                                      "stacked")
        # Checks: output and input gradient of each FP8 candidate against
        # PyTorch's recipe in eager.
        want_dx = fns["torch_fp8_eager"]().clone()
        want_z = torch_fp8_mlp(x, w_stacked, w_down).float()
        got_z = coda_torch.swiglu_mlp_fp8(x, w_inter, w_down).float()
        errors = {"coda_fp8_z": ((got_z - want_z).abs().max() / want_z.abs().max()).item()}
        for name, fn in fns.items():
            dx = fn().float()
            errors[name + "_dx"] = ((dx - want_dx.float()).abs().max()
                                    / want_dx.float().abs().max()).item()
        bad = {k: e for k, e in errors.items() if "fp8" in k and e > 0.05}
        if bad:
            raise AssertionError(f"{t}x{h}x{f}: differs from the PyTorch recipe: {bad}")
        if args.profile:
            for name in args.profile:
                profile(name, fns[name])
        times = interleaved_ms(fns)
        ms, baselines, ratios = against(times, "coda_fp8")
        row = {"shape": {"T": t, "H": h, "F": f}, "coda_fp8_ms": ms, "baselines": baselines,
               "ratios": ratios, "max_rel_error_vs_torch_fp8_eager": errors}
        rows.append(row)
        print(f"mlp fwd+bwd {t}x{h}x{f}: coda_fp8 {row['coda_fp8_ms']:.3f} ms; " + ", ".join(
            f"{name} {v:.3f} ms ({row['ratios'][name]:.3f}x)"
            for name, v in row["baselines"].items()), flush=True)
        torch._dynamo.reset()
        del fns, params, xg
        torch.cuda.empty_cache()
        geomean = write_ratio_results(args.out, args.commit, rows)
    print("geometric mean: " + ", ".join(f"{k} {g:.3f}x" for k, g in geomean.items()))


if __name__ == "__main__":
    main()
