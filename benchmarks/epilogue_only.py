"""The epilogue-only kernels of coda_torch's derived backward programs
(adjoints whose epilogue reads no product: memory-bound passes) from
kernel sets compiled with different schedules, timed in the same rounds
(bf16, L2 flushed; timing.py), with the bandwidth each reaches and, beside
it, what torch's copy of the kernel's largest input reaches in the same
rounds. Every variant's outputs are checked against the first's (16-bit
outputs bit for bit, f32 partials within rounding) before timing:

  python3 benchmarks/epilogue_only.py --variant ws=build/torch-kernels \\
      --variant pp=<scripts/build-torch-kernels --schedule=ping-pong output> ... --out X.json

The first variant is the reference of the ratios.
"""

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_runtime  # noqa: E402
from coda_torch import ops  # noqa: E402
from timing import interleaved_ms, median_ratio  # noqa: E402


def cases(tokens, hidden, heads):
    """(name, program, function, role, arguments, outputs, bytes moved,
    streamed) per kernel: its last `outputs` arguments are what it writes;
    `streamed`, its largest input, which the copy reference reads."""
    gen = torch.Generator(device="cuda").manual_seed(0)

    def randn(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device="cuda", generator=gen).to(dtype)

    n = 3 * 128 * heads
    x, w = randn(tokens, hidden), randn(n, hidden)
    rs, cos, sin = randn(tokens, dtype=torch.float32).abs(), randn(tokens, 128), randn(tokens, 128)
    dy, dacc = randn(tokens, n), randn(tokens, n)
    qkv = (x, w, rs, cos, sin, 2 * heads, dy, dacc)
    # Qwen2's Q/K/V bias: its gradient's column partials beside dAcc.
    qkv_bias = qkv + (ops._col_partials(tokens, n, x.device),)
    dh, h, dss = randn(tokens, hidden), randn(tokens, hidden), randn(tokens, dtype=torch.float32)
    wo, out = randn(hidden, hidden), randn(tokens, hidden)
    residual = (x, wo, dh, dss, h, out)
    mlp = (randn(tokens, 4 * hidden), randn(hidden, 4 * hidden), dh, dss, h, out)
    row = 2 * tokens * 4
    col = (tokens + 127) // 128 * n * 4
    return [("qkv_rope_adjoint", "linear_norm_qkv_rope", "linear_norm_qkv_rope_backward",
             "adjoint:gemm0", qkv, 1, 2 * dy.numel() * 2, dy),
            ("qkv_rope_bias_adjoint", "linear_norm_qkv_rope", "linear_norm_qkv_rope_bias_backward",
             "adjoint:gemm0", qkv_bias, 2, 2 * dy.numel() * 2 + col, dy),
            ("residual_norm_adjoint", "linear_residual_norm", "linear_residual_norm_backward",
             "adjoint:gemm0", residual, 1, 3 * dh.numel() * 2 + row, dh),
            ("mlp_residual_norm_adjoint", "norm_swiglu_mlp", "norm_swiglu_mlp_backward",
             "adjoint:gemm1", mlp, 1, 3 * dh.numel() * 2 + row, dh)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", action="append", required=True,
                        help="NAME=DIR: a scripts/build-torch-kernels output")
    parser.add_argument("--shape", type=int, nargs=3, action="append",
                        metavar=("TOKENS", "HIDDEN", "HEADS"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    variants = [spec.split("=", 1) for spec in args.variant]
    modules = {name: {p: coda_runtime.Module(os.path.join(path, p))
                      for p in ("linear_norm_qkv_rope", "linear_residual_norm", "norm_swiglu_mlp")}
               for name, path in variants}
    reference = variants[0][0]
    rows = []
    for tokens, hidden, heads in args.shape or [(16384, 2048, 16), (16384, 4096, 32)]:
        for name, program, function, role, launch_args, outputs, moved, streamed in cases(
                tokens, hidden, heads):
            fns = {}
            for variant, programs in modules.items():
                module = programs[program]
                kernel = module.kernel_for(function, role)
                fns[variant] = (lambda m=module, k=kernel: ops._launch(m, k, *launch_args))
            # Every variant writes what the reference writes: its 16-bit
            # outputs bit for bit, its f32 partials (summed in each kernel's
            # order) within rounding.
            written = {}
            for variant, fn in fns.items():
                for out in launch_args[-outputs:]:
                    out.fill_(float("nan"))
                fn()
                written[variant] = [out.clone() for out in launch_args[-outputs:]]
            for variant in fns:
                for a, b in zip(written[variant], written[reference]):
                    same = (torch.equal(a, b) if a.element_size() < 4 else
                            torch.allclose(a, b, rtol=1e-4, atol=1e-4))
                    if not same:
                        sys.exit(f"{name} T={tokens} H={hidden}: {variant} writes other "
                                 f"values than {reference}")
            # The same bytes' worth of a plain copy (torch's), for the
            # bandwidth a streaming kernel reaches on this device.
            copied = torch.empty_like(streamed)
            fns["torch_copy"] = lambda: copied.copy_(streamed)
            times = interleaved_ms(fns)
            ms = {v: statistics.median(t) for v, t in times.items()}
            copy_ms = ms.pop("torch_copy")
            times.pop("torch_copy")
            row = {"case": name, "tokens": tokens, "hidden": hidden, "ms": ms,
                   "tb_per_s": {v: moved / t / 1e9 for v, t in ms.items()},
                   "speedup": {v: median_ratio(times[reference], t) for v, t in times.items()},
                   "copy_tb_per_s": 2 * streamed.numel() * streamed.element_size() / copy_ms / 1e9}
            rows.append(row)
            print(f"{name} T={tokens} H={hidden}: " + "; ".join(
                f"{v} {ms[v]:.3f} ms {row['tb_per_s'][v]:.2f} TB/s ({row['speedup'][v]:.3f}x)"
                for v in ms) + f"; torch copy {row['copy_tb_per_s']:.2f} TB/s", flush=True)
            with open(args.out, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "commit": args.commit,
                           "torch": torch.__version__, "reference": reference, "results": rows},
                          f, indent=1)


if __name__ == "__main__":
    main()
