"""Where the GPU idles in a training step whose host runs ahead: a CUDA and
operator profile (no Python stacks) of six steps of host_gaps.py's model,
taken without synchronizing first, each step marked by a short sleep
kernel; steps 3-5 are read: the GPU's busy and idle time per step, the
gaps longer than 15 us in order (the kernels around each, and the operator
that launched the kernel after it), and the idle time by the operator that
launched the kernel after each such gap.

  PYTHONPATH=<runtime> python3 benchmarks/step_gaps.py <torch kernels> [coda|torch_compile] [2048|4096]
"""
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch  # noqa: E402
from host_gaps import innermost, trace_events, training_step  # noqa: E402

STEPS = 6


def main():
    coda_torch.load(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "coda"
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
    forward, finish = training_step(mode, hidden)
    for _ in range(5):
        finish(forward())
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(STEPS):
            torch.cuda._sleep(1000)  # the step's mark
            finish(forward())
        torch.cuda.synchronize()
    trace = trace_events(prof)
    gpu = sorted((e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                 key=lambda e: e["ts"])
    marks = [i for i, e in enumerate(gpu) if "spin" in e["name"]]
    if len(marks) != STEPS:
        raise SystemExit(f"found {len(marks)} step marks, not {STEPS}")
    launches = {e["args"]["correlation"]: e for e in trace
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ops = sorted((e for e in trace if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    starts = [e["ts"] for e in ops]

    def operator(t):
        """The innermost operator running on the host at time t."""
        best = innermost(ops, starts, t, lambda e: True)
        return best["name"] if best else "-"

    first, last = marks[2] + 1, marks[5]
    steps = 3
    span = (gpu[last]["ts"] - gpu[first]["ts"]) / 1000 / steps
    busy = sum(e["dur"] for e in gpu[first:last] if "spin" not in e["name"]) / 1000 / steps
    print(f"{mode}, hidden {hidden}: {(last - first - 2) / steps:.0f} kernels a step; GPU busy "
          f"{busy:.3f} ms, idle {span - busy:.3f} ms a step (the mark excluded)")
    by_operator = collections.defaultdict(lambda: [0.0, 0])
    for k in range(first + 1, last):
        before, after = gpu[k - 1], gpu[k]
        gap = after["ts"] - (before["ts"] + before["dur"])
        if gap < 15 or "spin" in before["name"] or "spin" in after["name"]:
            continue
        launch = launches.get(after.get("args", {}).get("correlation"))
        op = operator(launch["ts"]) if launch else "-"
        by_operator[op][0] += gap / 1000 / steps
        by_operator[op][1] += 1
        if k < marks[3]:
            print(f"  {gap:7.1f} us after {before['name'][:50]}, before {after['name'][:50]} "
                  f"(launched in {op[:40]})")
    for op, (ms, n) in sorted(by_operator.items(), key=lambda kv: -kv[1][0]):
        print(f"  {ms:.3f} ms a step in {n / steps:.0f} gaps before kernels launched in {op}")


if __name__ == "__main__":
    main()
