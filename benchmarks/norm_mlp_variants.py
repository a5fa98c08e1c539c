"""coda_torch.norm_swiglu_mlp forward + backward with variant builds of its
program, interleaved in one process (L2 flushed; timing.py), each kernel's
time from a profile, and each variant's gradients against the first's:

  PYTHONPATH=<runtime>:benchmarks:python python3 benchmarks/norm_mlp_variants.py \
      build/torch-kernels NAME=DIR [NAME=DIR ...]

DIR holds a norm_swiglu_mlp/ coda-compile output (the derived program,
`coda-opt --coda-derive-backward=save=true`, with a configuration pinned on
a GEMM, compiled by coda-compile).
"""
import statistics
import sys

import torch

import coda_runtime
import coda_torch
from coda_torch import ops
from timing import interleaved_ms

base, variants = sys.argv[1], sys.argv[2:]
coda_torch.load(base)
mods = {v.split("=")[0]: coda_runtime.Module(v.split("=")[1] + "/norm_swiglu_mlp") for v in variants}
for T, H, F in [(16384, 2048, 5632), (16384, 4096, 11008)]:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, H, device="cuda", generator=g).bfloat16().requires_grad_()
    rs = (torch.rand(T, device="cuda", generator=g) + 0.5).requires_grad_()
    w = (torch.randn(2 * F, H, device="cuda", generator=g) / H ** 0.5).bfloat16().requires_grad_()
    gamma = (1 + 0.5 * torch.randn(H, device="cuda", generator=g)).bfloat16().requires_grad_()
    wd = (torch.randn(H, F, device="cuda", generator=g) / F ** 0.5).bfloat16().requires_grad_()
    dz = torch.randn(T, H, device="cuda", generator=g).bfloat16()
    dss = torch.randn(T, device="cuda", generator=g) / H
    def make(name):
        def run():
            ops._modules["norm_swiglu_mlp"] = mods[name]
            for t in (x, rs, w, gamma, wd):
                t.grad = None
            z, ss = coda_torch.norm_swiglu_mlp(x, rs, w, gamma, wd)
            torch.autograd.backward([z, ss], [dz, dss])
        return run
    fns = {name: make(name) for name in mods}
    grads = {}
    for name in mods:
        fns[name]()
        grads[name] = [t.grad.float().clone() for t in (x, rs, w, gamma, wd)]
    ref = grads[list(mods)[0]]
    for name in mods:
        err = max(((a - b).abs().max() / b.abs().max()).item() for a, b in zip(grads[name], ref))
        print(f"{T}x{H}x{F} {name}: max rel diff of grads vs {list(mods)[0]}: {err:.2e}")
    times = interleaved_ms(fns, reps=20)
    for name in mods:
        fns[name]()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                fns[name]()
            torch.cuda.synchronize()
        k = {e.key: e.device_time_total / e.count / 1000 for e in p.key_averages() if "norm_swiglu_mlp" in e.key}
        print(f"{T}x{H}x{F} {name}: step {statistics.median(times[name]):.3f} ms; dAcc "
              f"{k.get('norm_swiglu_mlp_backward_gemm1', float('nan')):.3f} ms; "
              + ", ".join(f"{n.replace('norm_swiglu_mlp_', '')} {v:.3f}" for n, v in sorted(k.items())), flush=True)
    del x, rs, w, gamma, wd, dz, fns, grads
    torch.cuda.empty_cache()
