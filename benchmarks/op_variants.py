"""One of coda_torch's ops, forward + backward, with variant builds of its
program (a configuration pinned on a GEMM, say), interleaved in one process
(L2 flushed; timing.py): the step's time, each of the program's kernels'
times from a profile, and each variant's gradients against the first's:

  PYTHONPATH=<runtime>:benchmarks:python python3 benchmarks/op_variants.py \\
      --kernels build/torch-kernels --op norm_swiglu_mlp NAME=DIR [NAME=DIR ...]

DIR holds a coda-compile output named as the op's program (norm_swiglu_mlp/,
linear_qkv_rope/, ...; the LM head's linear_norm_cross_entropy/ and
linear_norm_cross_entropy.saved/): for a derived program, `coda-opt
--coda-derive-backward` (`=save=true` where the program asks for
--save-for-backward) with the configuration pinned, compiled by
coda-compile. The RoPE ops run with Qwen2's bias (`*_bias` functions).
"""
import argparse
import statistics

import torch

import coda_runtime
import coda_torch
from coda_torch import ops
from backward import kv_heads_of
from timing import interleaved_ms

T = 16384


def randn(*shape, gen, scale=1.0):
    return (scale * torch.randn(*shape, device="cuda", generator=gen)).bfloat16()


def norm_swiglu_mlp(hidden, mlp, gen):
    """Leaves, the op's call and its output gradients."""
    x = randn(T, hidden, gen=gen)
    rs = torch.rand(T, device="cuda", generator=gen) + 0.5
    w = randn(2 * mlp, hidden, gen=gen, scale=hidden ** -0.5)
    gamma = 1 + randn(hidden, gen=gen, scale=0.5)
    wd = randn(hidden, mlp, gen=gen, scale=mlp ** -0.5)
    grads = [randn(T, hidden, gen=gen), torch.randn(T, device="cuda", generator=gen) / hidden]
    return [x, rs, w, gamma, wd], lambda *a: coda_torch.norm_swiglu_mlp(*a), grads


def swiglu_mlp_fp8(hidden, mlp, gen):
    x = randn(T, hidden, gen=gen)
    w = randn(2 * mlp, hidden, gen=gen, scale=hidden ** -0.5)
    wd = randn(hidden, mlp, gen=gen, scale=mlp ** -0.5)
    return [x, w, wd], lambda *a: coda_torch.swiglu_mlp_fp8(*a), [randn(T, hidden, gen=gen)]


def rope_inputs(hidden, gen):
    heads = hidden // 128
    n = 128 * (heads + 2 * kv_heads_of(heads))
    angles = torch.rand(T, 64, device="cuda", generator=gen) * 6.28
    cos, sin = (torch.cat([f(angles)] * 2, 1).bfloat16() for f in (torch.cos, torch.sin))
    return n, cos, sin, 128 * (heads + kv_heads_of(heads))


def linear_qkv_rope(hidden, mlp, gen):
    n, cos, sin, rotated = rope_inputs(hidden, gen)
    leaves = [randn(T, hidden, gen=gen), randn(n, hidden, gen=gen, scale=hidden ** -0.5),
              randn(n, gen=gen, scale=0.5)]
    return (leaves, lambda x, w, b: coda_torch.linear_qkv_rope(x, w, cos, sin, rotated, b),
            [randn(T, n, gen=gen)])


def linear_norm_qkv_rope(hidden, mlp, gen):
    n, cos, sin, rotated = rope_inputs(hidden, gen)
    leaves = [randn(T, hidden, gen=gen), torch.rand(T, device="cuda", generator=gen) + 0.5,
              randn(n, hidden, gen=gen, scale=hidden ** -0.5), 1 + randn(hidden, gen=gen, scale=0.5),
              randn(n, gen=gen, scale=0.5)]
    return (leaves, lambda x, rs, w, g, b: coda_torch.linear_norm_qkv_rope(
        x, rs, w, g, cos, sin, rotated, b), [randn(T, n, gen=gen)])


def linear_norm_cross_entropy(hidden, mlp, gen):
    """The LM head + loss as llama.apply runs it (logits kept, program
    linear_norm_cross_entropy.saved), vocabulary 32768."""
    vocab = 32768
    leaves = [randn(T, hidden, gen=gen), torch.rand(T, device="cuda", generator=gen) + 0.5,
              randn(vocab, hidden, gen=gen, scale=hidden ** -0.5)]
    target = torch.randint(0, vocab, (T,), device="cuda", generator=gen)
    return (leaves, lambda x, rs, w: coda_torch.linear_norm_cross_entropy(
        x, rs, w, target, save_logits=True), [torch.ones(T, device="cuda") / T])


OPS = {"norm_swiglu_mlp": norm_swiglu_mlp, "swiglu_mlp_fp8": swiglu_mlp_fp8,
       "linear_qkv_rope": linear_qkv_rope, "linear_norm_qkv_rope": linear_norm_qkv_rope,
       "linear_norm_cross_entropy": linear_norm_cross_entropy}
# The programs an op runs, where not only its own (swapped together).
PROGRAMS = {"linear_norm_cross_entropy": ["linear_norm_cross_entropy",
                                          "linear_norm_cross_entropy.saved"]}
SIZES = [(2048, 5632), (4096, 11008)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--op", required=True, choices=sorted(OPS))
    parser.add_argument("variants", nargs="+", metavar="NAME=DIR")
    args = parser.parse_args()
    coda_torch.load(args.kernels)
    programs = PROGRAMS.get(args.op, [args.op])
    mods = {v.split("=")[0]: {p: coda_runtime.Module(f"{v.split('=')[1]}/{p}") for p in programs}
            for v in args.variants}
    for hidden, mlp in SIZES:
        leaves, call, out_grads = OPS[args.op](hidden, mlp, torch.Generator(device="cuda")
                                              .manual_seed(0))
        for t in leaves:
            t.requires_grad_()

        def make(name):
            def run():
                ops._modules.update(mods[name])
                for t in leaves:
                    t.grad = None
                out = call(*leaves)
                torch.autograd.backward(out if isinstance(out, tuple) else [out], out_grads)
            return run
        fns = {name: make(name) for name in mods}
        grads = {}
        for name in mods:
            fns[name]()
            grads[name] = [t.grad.float().clone() for t in leaves]
        first = list(mods)[0]
        shape = f"{T} x {hidden}"
        for name in mods:
            err = max(((a - b).abs().max() / b.abs().max()).item()
                      for a, b in zip(grads[name], grads[first]))
            print(f"{shape} {name}: max relative difference of the gradients from {first}'s: "
                  f"{err:.2e}")
        times = interleaved_ms(fns, reps=20)
        for name in mods:
            fns[name]()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
                for _ in range(3):
                    fns[name]()
                torch.cuda.synchronize()
            kernels = {e.key: e.device_time_total / e.count / 1000 for e in p.key_averages()
                       if e.key.startswith(args.op)}
            print(f"{shape} {name}: step {statistics.median(times[name]):.3f} ms; " + ", ".join(
                f"{k.removeprefix(args.op + '_')} {v:.3f}" for k, v in sorted(kernels.items())),
                flush=True)
        del leaves, fns, grads
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
