"""coda_torch.linear_swiglu forward + backward at 16384 tokens (hidden
2048 and 4096) with the kernels of several builds in the same rounds, so
that a change to its kernels is measured against the kernels before it:
gradient errors against float32 autograd, medians of interleaved rounds
(three sets, L2 flushed) and per-kernel times from torch.profiler.

  PYTHONPATH=<runtime>:python:benchmarks python3 benchmarks/compare_swiglu_kernels.py \\
      OUT.json before=DIR after=DIR
"""
import json, statistics, sys
import torch
import coda_torch, coda_torch.ops as ops
from timing import interleaved_ms
builds = dict(a.split("=", 1) for a in sys.argv[2:])
mods = {}
for n, d in builds.items():
    ops._modules = {}
    coda_torch.load(d)
    mods[n] = dict(ops._modules)
T = 16384
out = []
for hidden, mlp in ((2048, 5632), (4096, 11008)):
    x = torch.randn(T, hidden, device="cuda").bfloat16().requires_grad_()
    w = (torch.randn(2 * mlp, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
    dy = torch.randn(T, mlp, device="cuda").bfloat16()
    xf, wf = (t.detach().float().requires_grad_() for t in (x, w))
    g, u = (xf @ wf.t()).view(T, mlp, 2).unbind(-1)
    (torch.nn.functional.silu(g) * u).backward(dy.float())
    row = {"hidden": hidden, "mlp": mlp, "errors": {}, "kernels_us": {}}
    fns = {}
    for n in builds:
        def run(n=n):
            ops._modules = mods[n]
            x.grad = w.grad = None
            coda_torch.linear_swiglu(x, w).backward(dy)
        run(); torch.cuda.synchronize()
        row["errors"][n] = {k: ((a.grad.float() - r.grad).norm() / r.grad.norm()).item()
                            for k, a, r in (("dx", x, xf), ("dw", w, wf))}
        fns[n] = run
    for s in range(3):
        ms = interleaved_ms(fns, reps=30)
        row[f"ms_set{s}"] = {k: statistics.median(v) for k, v in ms.items()}
    for n in builds:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(10):
                fns[n]()
            torch.cuda.synchronize()
        row["kernels_us"][n] = {e.key: round(e.device_time_total / e.count, 1)
                                for e in p.key_averages() if "swiglu" in e.key}
    print(json.dumps(row, indent=1), flush=True)
    out.append(row)
json.dump(out, open(sys.argv[1], "w"), indent=1)
