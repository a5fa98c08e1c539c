"""The host's time per training step against the GPU's: the Llama of
benchmarks/train_llama.py (4 layers x hidden 2048, or 2 layers x hidden
4096 with 8 K/V heads; fused AdamW, causal attention) with coda's patch and
under torch.compile; each of ten steps starts on an idle GPU, and the time
until the host has launched the forward, the whole step, and the step to
its end on the GPU are medians; then Python's profile of three coda steps
by own time. Where the host's step is shorter than the GPU's, a loop that
lets the host run ahead keeps the GPU busy.

  PYTHONPATH=<runtime> python3 benchmarks/host_time.py <torch kernels> 2048
"""
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch  # noqa: E402
from host_gaps import training_step  # noqa: E402


def measure(mode, hidden):
    forward, finish = training_step(mode, hidden)
    forward_ms, host_ms, total_ms = [], [], []
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = forward()
        t1 = time.perf_counter()
        finish(loss)
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        forward_ms.append((t1 - t0) * 1e3)
        host_ms.append((t2 - t0) * 1e3)
        total_ms.append((t3 - t0) * 1e3)
    print(f"{mode} h{hidden}: host forward {statistics.median(forward_ms):.2f} ms, host step "
          f"{statistics.median(host_ms):.2f} ms, synchronized step "
          f"{statistics.median(total_ms):.2f} ms", flush=True)
    if mode == "coda":
        torch.cuda.synchronize()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(3):
            finish(forward())
        profile.disable()
        torch.cuda.synchronize()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(30)
        print(out.getvalue())


def main():
    coda_torch.load(sys.argv[1])
    hidden = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    for mode in ("coda", "torch_compile"):
        measure(mode, hidden)


if __name__ == "__main__":
    main()
