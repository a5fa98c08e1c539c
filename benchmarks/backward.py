"""Forward + backward of coda_torch's ops against the same computation in
torch eager and torch.compile, side by side in one process (bf16, L2
flushed, medians of CUDA-event timings; see bench.py).

  python3 benchmarks/backward.py --kernels build/torch-kernels --out X.json
"""

import argparse
import datetime
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch  # noqa: E402
from bench import median_ms  # noqa: E402

TOKENS = 16384
SIZES = {2048: 5632, 4096: 11008}


def eager_swiglu(x, w):
    return torch.nn.functional.silu(x @ w[0::2].T) * (x @ w[1::2].T)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(args.kernels)
    compiled = torch.compile(eager_swiglu)
    rows = []
    for hidden, mlp in SIZES.items():
        x = torch.randn(TOKENS, hidden, device="cuda").bfloat16().requires_grad_()
        w = (torch.randn(2 * mlp, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
        dy = torch.randn(TOKENS, mlp, device="cuda").bfloat16()

        def step(fn):
            def run():
                x.grad = w.grad = None
                fn(x, w).backward(dy)
            return run

        row = {"case": "linear_swiglu_fwd_bwd", "shape": {"M": TOKENS, "hidden": hidden, "mlp": mlp},
               "coda_ms": median_ms(step(coda_torch.linear_swiglu)),
               "baselines": {"torch_eager": median_ms(step(eager_swiglu)),
                             "torch_compile": median_ms(step(compiled))}}
        rows.append(row)
        print(f"linear+SwiGLU fwd+bwd hidden {hidden}: coda {row['coda_ms']:.3f} ms; " + ", ".join(
            f"{k} {v:.3f} ms ({v / row['coda_ms']:.2f}x)" for k, v in row["baselines"].items()), flush=True)
        del x, w, dy
        torch.cuda.empty_cache()
    # LM head + cross-entropy: per-token loss, mean, backward.
    def eager_ce(x, w, t):
        return torch.nn.functional.cross_entropy((x @ w.T).float(), t, reduction="none")

    compiled_ce = torch.compile(eager_ce)
    vocab = 32768
    for hidden in SIZES:
        x = torch.randn(TOKENS, hidden, device="cuda").bfloat16().requires_grad_()
        w = (torch.randn(vocab, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
        t = torch.randint(0, vocab, (TOKENS,), device="cuda")

        def ce_step(fn):
            def run():
                x.grad = w.grad = None
                fn(x, w, t).mean().backward()
            return run

        torch.cuda.reset_peak_memory_stats()
        row = {"case": "linear_cross_entropy_fwd_bwd", "shape": {"M": TOKENS, "hidden": hidden, "vocab": vocab},
               "coda_ms": median_ms(ce_step(coda_torch.linear_cross_entropy)),
               "baselines": {"torch_eager": median_ms(ce_step(eager_ce)),
                             "torch_compile": median_ms(ce_step(compiled_ce))}}
        rows.append(row)
        print(f"LM head + CE fwd+bwd hidden {hidden}: coda {row['coda_ms']:.3f} ms; " + ", ".join(
            f"{k} {v:.3f} ms ({v / row['coda_ms']:.2f}x)" for k, v in row["baselines"].items()), flush=True)
        del x, w, t
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(),
                   "commit": args.commit, "torch": torch.__version__, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
