"""Where the GPU waits for the host in a training step: one profiled run of
three steps of the Llama of benchmarks/train_llama.py (4 layers x hidden
2048, or 2 layers x hidden 4096 with 8 K/V heads; fused AdamW, causal
attention, the host running ahead, as train_llama.py's loop does), with Python stacks; every
interval in which no kernel runs is attributed, in 1/20ths, to the
innermost Python function and the PyTorch operator the host was in.

  PYTHONPATH=<runtime> python3 benchmarks/host_gaps.py <torch kernels> [coda|torch|torch_compile] [2048|4096]

`torch` profiles the unpatched model in eager mode, `torch_compile` under
torch.compile, instead of coda's.

  PYTHONPATH=<runtime> python3 benchmarks/host_gaps.py <torch kernels> layer [HIDDEN...]

profiles one decoder layer inside a model instead, forward + backward at
16384 tokens as backward.py times it (L2 flushed before each step, which
is outside the step), coda's patch and torch.compile's layer: the waits
counted are those between the step's first and last kernel.
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


MARKER = "<between steps>"


def report(mode, trace, steps):
    idle, busy, by_function, by_op = idle_by_host(trace)
    busy -= sum(e["dur"] for e in trace if e.get("name") == MARKER)
    print(f"{mode}: kernels {busy / 1000 / steps:.3f} ms per step; the GPU waits "
          f"{idle / 1000 / steps:.3f} ms per step; the host meanwhile in")
    for name, us in by_function.most_common(25):
        print(f"  {us / 1000 / steps:7.3f} ms  {name[:110]}")
    print("by PyTorch operator:")
    for name, us in by_op.most_common(15):
        print(f"  {us / 1000 / steps:7.3f} ms  {name[:80]}", flush=True)


def layers(hidden_sizes):
    from backward import SEQ, SIZES, TOKENS, decoder_layers, inside_a_model, layer_step
    for hidden in hidden_sizes:
        eager, coda, _, tables = decoder_layers(hidden, SIZES[hidden])
        compiled = torch.compile(eager)
        xb = torch.randn(TOKENS // SEQ, SEQ, hidden, device="cuda").bfloat16().requires_grad_()
        dyb = torch.randn_like(xb)
        flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        for name, layer, x in (("coda", coda, inside_a_model(xb)), ("torch_compile", compiled, xb)):
            layer_run = layer_step(layer, x, dyb, tables)

            def step():
                flush.fill_(7)
                layer_run()
                torch.cuda.synchronize()
            for _ in range(5):
                step()
            activities = [torch.profiler.ProfilerActivity.CPU,
                          torch.profiler.ProfilerActivity.CUDA]
            with torch.profiler.profile(activities=activities, with_stack=True) as prof:
                for _ in range(STEPS):
                    step()
            report(f"layer inside a model, hidden {hidden}, {name}",
                   step_windows(trace_events(prof)), STEPS)


def step_windows(trace):
    """`trace` with each interval from one step's last kernel to the end of
    the next step's L2 flush (a fill kernel of more than 50 us) covered by a
    marker kernel, so that only the waits inside the timed steps count; the
    markers' time is taken out of the kernels' again by report()."""
    kernels = sorted((e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                     key=lambda e: e["ts"])
    markers, last_end = [], None
    for k in kernels:
        if "FillFunctor" in k["name"] and k["dur"] > 50:
            begin = last_end if last_end is not None else k["ts"]
            markers.append({"cat": "kernel", "name": MARKER, "ts": begin,
                            "dur": k["ts"] + k["dur"] - begin})
        else:
            last_end = max(last_end or 0, k["ts"] + k["dur"])
    covered = {id(k) for k in kernels if "FillFunctor" in k["name"] and k["dur"] > 50}
    return [e for e in trace if id(e) not in covered] + markers


# The training runs of benchmarks/train_llama.py: hidden size -> (layers,
# MLP size, heads, K/V heads).
STEP_MODELS = {2048: (4, 5632, 16, 16), 4096: (2, 11008, 32, 8)}


def training_step(mode, hidden):
    """train_llama.py's model at `hidden` (STEP_MODELS) in `mode` (coda,
    torch, torch_compile) with fused AdamW and causal attention, after eight
    warm-up steps: `forward()` returns a step's loss, `finish(loss)` runs its
    backward and the optimizer."""
    from train_llama import causal_attention
    layers_, mlp, heads, kv_heads = STEP_MODELS[hidden]
    config = LlamaConfig(vocab_size=32768, hidden_size=hidden, intermediate_size=mlp,
                         num_hidden_layers=layers_, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, max_position_embeddings=2048,
                         use_cache=False)
    causal_attention(config)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).cuda().to(torch.bfloat16)
    if mode == "coda":
        coda_torch.llama.apply(model)
    run = torch.compile(model) if mode == "torch_compile" else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    ids = torch.randint(0, 32768, (4, 2048), device="cuda")

    def forward():
        return run(input_ids=ids, labels=ids).loss

    def finish(loss):
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(8):
        finish(forward())
    return forward, finish


def main():
    coda_torch.load(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "coda"
    if mode == "layer":
        layers([int(h) for h in sys.argv[3:]] or [2048])
        return
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
    forward, finish = training_step(mode, hidden)

    def step():
        finish(forward())

    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, with_stack=True) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    report(f"{mode}, hidden {hidden}", trace_events(prof), STEPS)


if __name__ == "__main__":
    main()
