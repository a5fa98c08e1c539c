"""Per-kernel GPU time of each fused pattern, coda against torch.compile: where
a pattern's time goes, kernel by kernel (torch.profiler, L2 flushed before
each repetition, the flush itself left out).

  CODA_GPU_TESTS=DIR PYTHONPATH=<runtime>:benchmarks \\
      python3 benchmarks/breakdown.py --hidden 2048 [--pattern rmsnorm_gemm]

Prints, for each pattern and hidden size, every kernel's mean time per run
for coda's program and for torch.compile (default mode).
"""

import argparse
import collections
import os

import coda_runtime
import torch
from torch.profiler import ProfilerActivity, profile

from bench import BUILD, SIZES, TOKENS, VOCAB, runner
from patterns import PATTERNS


def kernel_times(fn, reps):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    times = collections.defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            times[event.name] += event.device_time / 1000 / reps
    # The flush (a fill kernel over 256 MiB) is not the pattern's.
    return {name: ms for name, ms in times.items()
            if not (name.startswith("void at::native::vectorized_elementwise_kernel")
                    and "FillFunctor" in name)}


def show(label, times):
    print(f"  {label}: {sum(times.values()):.3f} ms")
    for name, ms in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"    {ms:8.3f} ms  {name[:100]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, nargs="+", default=sorted(SIZES))
    parser.add_argument("--pattern", action="append",
                        help="a pattern's name (repeatable; default: all)")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    pats = coda_runtime.Module(os.path.join(BUILD, "patterns"))
    stream = torch.cuda.current_stream().cuda_stream
    for hidden in args.hidden:
        mlp = SIZES[hidden]
        for p in PATTERNS:
            if args.pattern and p.name not in args.pattern:
                continue
            torch.manual_seed(0)
            t = p.make(TOKENS, hidden, mlp, VOCAB)
            coda_run = runner(pats, p, t, stream)
            compiled = torch.compile(p.eager)
            print(f"{p.name} hidden {hidden}")
            show("coda", kernel_times(coda_run, args.reps))
            show("torch.compile", kernel_times(lambda: compiled(t), args.reps))
            torch._dynamo.reset()
            del t, coda_run
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
