"""The weight gradient of a norm-deferred GEMM (W diag(gamma) folded into
the weight) with gamma's gradient: coda's one GEMM (norm_weight_grad.mlir,
gamma as a column input, gamma's gradient as column partials) against the
same GEMM without the epilogue followed by the fold's backward in PyTorch
(dW' diag(gamma), then sum_n dW' * W), coda's and cuBLAS's, in one process
(bf16, L2 flushed, rounds in rotated order; timing.py).

  python3 benchmarks/norm_weight_grad.py --kernels build/torch-kernels \\
      [--variant NAME=<coda-compile output of norm_weight_grad.mlir>] --out X.json
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_runtime  # noqa: E402
import coda_torch  # noqa: E402
from coda_torch import ops  # noqa: E402
from timing import against, interleaved_ms, write_ratio_results  # noqa: E402

# Tokens x weight rows x hidden: the MLP's gate/up (2F) and the stacked
# Q/K/V of a Llama at hidden 2048 (16 heads) and 4096 (32 heads, 8 K/V);
# --shape times others.
SHAPES = [(16384, 11264, 2048), (16384, 6144, 2048), (16384, 22016, 4096),
          (16384, 6144, 4096)]


def fused(module):
    gemm = module.kernel_for("norm_weight_grad", "forward:gemm0")
    finish = module.kernel_for("norm_weight_grad", "forward:finish0")

    def run(dacc, x, w, gamma):
        dw = torch.empty_like(w)
        partials = torch.empty((w.shape[0] + 127) // 128, w.shape[1], device=w.device,
                               dtype=torch.float32)
        ops._launch(module, gemm, dacc, x, gamma, w, dw, partials)
        dgamma = torch.empty(w.shape[1], device=w.device, dtype=torch.float32)
        ops._launch(module, finish, partials, dgamma)
        return dw, dgamma
    return run


def unfused(gemm):
    def run(dacc, x, w, gamma):
        dwf = gemm(dacc, x)
        return dwf * gamma, (dwf * w).sum(0, dtype=torch.float32)
    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--shape", nargs=3, type=int, action="append",
                        metavar=("T", "N", "H"),
                        help="time tokens x weight rows x hidden (repeatable) "
                             "instead of the default shapes")
    args = parser.parse_args()
    coda_torch.load(args.kernels)
    derived, (weight_grad,) = ops._kernels("norm_swiglu_mlp", "norm_swiglu_mlp_backward",
                                           "grad:gemm0.rhs")

    def derived_gemm(dacc, x):
        dw = dacc.new_empty(dacc.shape[1], x.shape[1])
        ops._launch(derived, weight_grad, dacc, x, dw)
        return dw

    candidates = {"coda": fused(ops._modules["norm_weight_grad"])}
    for spec in args.variant:
        name, path = spec.split("=", 1)
        candidates[name] = fused(coda_runtime.Module(path))
    candidates["coda GEMM + torch"] = unfused(derived_gemm)
    candidates["cuBLAS + torch"] = unfused(lambda dacc, x: dacc.T @ x)
    rows = []
    for t, n, h in args.shape or SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(0)
        dacc = (torch.randn(t, n, device="cuda", generator=gen) / t ** 0.5).bfloat16()
        x = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
        w = (torch.randn(n, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
        gamma = (1 + 0.5 * torch.randn(h, device="cuda", generator=gen)).bfloat16()
        dwf = dacc.float().T @ x.float()
        want_dw, want_dg = dwf * gamma.float(), (dwf * w.float()).sum(0)
        for name, fn in candidates.items():
            dw, dg = fn(dacc, x, w, gamma)
            for got, want in ((dw, want_dw), (dg, want_dg)):
                err = (got.float() - want).norm() / want.norm()
                if not err < 1e-2:
                    raise SystemExit(f"{name} at {t} x {n} x {h}: relative L2 error {err:.3g}")
        fns = {name: (lambda fn=fn: fn(dacc, x, w, gamma)) for name, fn in candidates.items()}
        ours, others, ratios = against(interleaved_ms(fns), "coda")
        rows.append({"shape": [t, n, h], "coda_ms": ours, "ms": others, "ratios": ratios})
        print(f"{t} x {n} x {h}: coda {ours:.3f} ms; " + "; ".join(
            f"{name} {others[name]:.3f} ({ratios[name]:.3f}x)" for name in others), flush=True)
        geomean = write_ratio_results(args.out, args.commit, rows)
    print("geometric mean: " + "; ".join(f"{k} {v:.3f}x" for k, v in geomean.items()))


if __name__ == "__main__":
    main()
