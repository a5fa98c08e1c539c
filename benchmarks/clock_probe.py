"""The SM clock each kernel runs at, and so its cycles: coda's plain GEMM,
cuBLAS and the epilogues whose cost is in question (residual, residual +
norm partials, column bias, row partials), each alone in a steady loop for
2.5 s (L2 flushed before every launch, as in the timed rounds) after
half a second of the same loop, while NVML (timing.EnergyMeter) samples
the SM clock every 20 ms and counts the energy. Per kernel: median ms,
mean MHz and W over the loop, and ms x MHz, the cycles in thousands.
Two passes over the kernels.
`--shape M N K` (repeatable) and `--cases` choose other shapes and
epilogues (`--cases` with none: the plain GEMM and cuBLAS alone).

  CODA_GPU_TESTS=DIR PYTHONPATH=<runtime>:benchmarks \\
      python3 benchmarks/clock_probe.py --out clock-probe.json
"""

import argparse
import json
import os
import statistics
import time

import coda_runtime
import torch

from epilogues import BUILD, bf16, case, checked_launcher
from timing import EnergyMeter

SHAPES = [(16384, 6144, 2048), (16384, 12288, 4096)]
CASES = ["residual", "residual_norm", "col_bias", "row_sumsq"]


def steady(fn, flush, meter, seconds=2.5):
    """fn in a loop (L2 flushed before each call) after half a second of
    the same loop: median ms, and the mean SM MHz (NVML, sampled every 20
    ms) and W (NVML's energy counter over the loop's time) meanwhile."""
    def loop(seconds):
        times, start = [], time.perf_counter()
        while time.perf_counter() - start < seconds:
            events = []
            for _ in range(20):
                flush.zero_()
                begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                begin.record()
                fn()
                end.record()
                events.append((begin, end))
            torch.cuda.synchronize()
            times += [begin.elapsed_time(end) for begin, end in events]
        return times, time.perf_counter() - start
    loop(0.5)
    joules = meter.read()
    meter.sample_clock()
    times, wall = loop(seconds)
    mhz = meter.stop_clock()
    return statistics.median(times), mhz, (meter.read() - joules) / wall


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", nargs=3, type=int, action="append", metavar=("M", "N", "K"))
    parser.add_argument("--cases", nargs="*", default=CASES)
    args = parser.parse_args()
    prims = coda_runtime.Module(os.path.join(BUILD, "primitives"))
    epis = coda_runtime.Module(os.path.join(BUILD, "epilogues"))
    stream = torch.cuda.current_stream().cuda_stream
    (plain,) = prims.kernels_of("plain_nt")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    meter = EnergyMeter()
    if not meter.available:
        parser.error("the SM clock and the energy counter come from NVML: install pynvml")
    out = {}
    for m, n, k in args.shape or SHAPES:
        torch.manual_seed(0)
        a, b = bf16(m, k), bf16(n, k, scale=k ** -0.5)
        acc = a.float() @ b.float().T
        y = bf16(m, n)
        fns = {"plain": lambda: prims.launch(plain, [a, b, y], stream),
               "cublas": lambda: torch.matmul(a, b.T)}
        for name in args.cases:
            kernel_args, checks = case(name, m, n, k, a, b, acc)
            fns[name] = checked_launcher(epis, name, kernel_args, checks, stream)
        for rep in range(2):
            for name, fn in fns.items():
                ms, mhz, watts = steady(fn, flush, meter)
                key = f"{m}x{n}x{k} {name}"
                out.setdefault(key, []).append({"ms": ms, "mhz": mhz, "watts": watts})
                print(f"{key:32s} pass {rep}: {ms:.4f} ms {mhz:7.1f} MHz {watts:6.1f} W, "
                      f"kcycles {ms * mhz:8.2f}", flush=True)
                with open(args.out, "w") as f:
                    json.dump({"device": torch.cuda.get_device_name(), "results": out}, f,
                              indent=1)


if __name__ == "__main__":
    main()
