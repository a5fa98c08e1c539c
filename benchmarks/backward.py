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

TOKENS, VOCAB = 16384, 32768
SIZES = {2048: 5632, 4096: 11008}


def eager_swiglu(x, w):
    return torch.nn.functional.silu(x @ w[0::2].T) * (x @ w[1::2].T)


def eager_ce(x, w, t):
    return torch.nn.functional.cross_entropy((x @ w.T).float(), t, reduction="none")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(args.kernels)
    rows = []

    def measure(case, shape, ops, make_step):
        row = {"case": case, "shape": shape, "coda_ms": median_ms(make_step(ops[0])),
               "baselines": {"torch_eager": median_ms(make_step(ops[1])),
                             "torch_compile": median_ms(make_step(ops[2]))}}
        rows.append(row)
        print(f"{case} {shape}: coda {row['coda_ms']:.3f} ms; " + ", ".join(
            f"{k} {v:.3f} ms ({v / row['coda_ms']:.2f}x)" for k, v in row["baselines"].items()),
            flush=True)

    swiglu = (coda_torch.linear_swiglu, eager_swiglu, torch.compile(eager_swiglu))
    ce = (coda_torch.linear_cross_entropy, eager_ce, torch.compile(eager_ce))
    for hidden, mlp in SIZES.items():
        x = torch.randn(TOKENS, hidden, device="cuda").bfloat16().requires_grad_()
        w = (torch.randn(2 * mlp, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
        dy = torch.randn(TOKENS, mlp, device="cuda").bfloat16()
        wv = (torch.randn(VOCAB, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
        t = torch.randint(0, VOCAB, (TOKENS,), device="cuda")

        def swiglu_step(fn):
            def run():
                x.grad = w.grad = None
                fn(x, w).backward(dy)
            return run

        def ce_step(fn):
            def run():
                x.grad = wv.grad = None
                fn(x, wv, t).mean().backward()
            return run

        measure("linear_swiglu_fwd_bwd", {"M": TOKENS, "hidden": hidden, "mlp": mlp}, swiglu,
                swiglu_step)
        measure("linear_cross_entropy_fwd_bwd", {"M": TOKENS, "hidden": hidden, "vocab": VOCAB},
                ce, ce_step)
        del x, w, dy, wv, t
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(),
                   "commit": args.commit, "torch": torch.__version__, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
