"""Where the GPU waits for the host in a training step: one profiled run of
three steps of the 4-layer, hidden-2048 Llama of benchmarks/train_llama.py
(each step synchronized, as train_llama.py's loop is), with Python stacks;
every interval in which no kernel runs is attributed, in 1/20ths, to the
innermost Python function and the PyTorch operator the host was in.

  PYTHONPATH=<runtime> python3 benchmarks/host_gaps.py <torch kernels> [coda|torch|torch_compile]

`torch` profiles the unpatched model in eager mode, `torch_compile` under
torch.compile, instead of coda's.
"""
import bisect
import collections
import json
import os
import sys
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch  # noqa: E402

STEPS = 3


def innermost(events, starts, t, keep):
    """The shortest of `events` (sorted by start) that spans time t."""
    best = None
    for j in range(bisect.bisect_right(starts, t) - 1, -1, -1):
        e = events[j]
        if e["ts"] + e["dur"] >= t and keep(e) and (best is None or e["dur"] < best["dur"]):
            best = e
        if t - e["ts"] > 200_000:  # no event of a step spans longer
            break
    return best


def trace_events(prof):
    """The events of a finished torch.profiler run, as its Chrome trace."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        return json.load(open(f.name))["traceEvents"]


def kernel_gaps(trace, min_us=0.0):
    """(start, end, the event after) of every interval longer than min_us
    in which the GPU runs no kernel, copy or memset."""
    kernels = sorted((e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                     key=lambda e: e["ts"])
    for before, after in zip(kernels, kernels[1:]):
        start, end = before["ts"] + before["dur"], after["ts"]
        if end - start > min_us:
            yield start, end, after


def idle_by_host(trace):
    kernels = [e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    python = sorted((e for e in trace if e.get("cat") == "python_function" and e.get("ph") == "X"),
                    key=lambda e: e["ts"])
    ops = sorted((e for e in trace if e.get("cat") == "cpu_op" and e.get("ph") == "X"),
                 key=lambda e: e["ts"])
    python_starts, op_starts = [e["ts"] for e in python], [e["ts"] for e in ops]
    by_function, by_op = collections.Counter(), collections.Counter()
    idle, busy = 0.0, sum(e["dur"] for e in kernels)
    for start, end, _ in kernel_gaps(trace, min_us=3):  # shorter: launch latency
        idle += end - start
        step = (end - start) / 20
        for i in range(20):
            t = start + (i + 0.5) * step
            f = innermost(python, python_starts, t,
                          lambda e: "site-packages/torch/" not in e["name"])
            o = innermost(ops, op_starts, t, lambda e: True)
            by_function[f["name"] if f else "<outside Python>"] += step
            by_op[o["name"] if o else "<no operator>"] += step
    return idle, busy, by_function, by_op


def main():
    coda_torch.load(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "coda"
    config = LlamaConfig(vocab_size=32768, hidden_size=2048, intermediate_size=5632,
                         num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=16,
                         max_position_embeddings=2048, use_cache=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).cuda().to(torch.bfloat16)
    if mode == "coda":
        coda_torch.llama.apply(model)
    run = torch.compile(model) if mode == "torch_compile" else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 32768, (4, 2048), device="cuda")

    def step():
        loss = run(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(8):
        step()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, with_stack=True) as prof:
        for _ in range(STEPS):
            step()
    idle, busy, by_function, by_op = idle_by_host(trace_events(prof))
    print(f"{mode}: kernels {busy / 1000 / STEPS:.3f} ms per step; the GPU waits "
          f"{idle / 1000 / STEPS:.3f} ms per step (between steps included); the host meanwhile in")
    for name, us in by_function.most_common(25):
        print(f"  {us / 1000 / STEPS:7.3f} ms  {name[:110]}")
    print("by PyTorch operator:")
    for name, us in by_op.most_common(15):
        print(f"  {us / 1000 / STEPS:7.3f} ms  {name[:80]}")


if __name__ == "__main__":
    main()
