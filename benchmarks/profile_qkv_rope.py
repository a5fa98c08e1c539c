"""coda_torch.linear_qkv_rope forward + backward with one build of
coda_torch's kernels: the step's median time (L2 flushed) and each kernel's
GPU time under torch.profiler; run once per build to compare builds.

  PYTHONPATH=<runtime> python3 benchmarks/profile_qkv_rope.py <kernels dir> <hidden>
"""
import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import coda_torch  # noqa: E402
from backward import TOKENS, qkv_rope_inputs  # noqa: E402
from timing import median_ms  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def main():
    kernels, hidden = sys.argv[1], int(sys.argv[2])
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(kernels)
    # The inputs of benchmarks/backward.py's Q/K/V + RoPE case.
    x = torch.randn(TOKENS, hidden, device="cuda").bfloat16().requires_grad_()
    wq, cos, sin, rotated, dq = qkv_rope_inputs(hidden)

    def run():
        x.grad = wq.grad = None
        coda_torch.linear_qkv_rope(x, wq, cos, sin, rotated).backward(dq)

    print(os.path.basename(kernels.rstrip("/")), hidden, "step ms", round(median_ms(run), 3))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            run()
        torch.cuda.synchronize()
    for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:4]:
        print(f"   {e.key[:60]:60} {e.device_time_total / e.count:8.1f} us x{e.count}")


if __name__ == "__main__":
    main()
