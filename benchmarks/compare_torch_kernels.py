"""coda_torch's Q/K/V + RoPE op, the decoder layer under torch.compile and
the patched decoder layer inside a model (its input's sums of squares handed
on, as the layer before does), forward + backward, with the kernels of
several builds in the same rounds (and torch.compile's own), so that a
compiler change to the training ops is measured against the kernels before
it:

  PYTHONPATH=<runtime>:python:benchmarks python3 benchmarks/compare_torch_kernels.py \\
      --kernels before=DIR after=DIR --out compare.json [--cases layer_inner ...]

Each DIR is a scripts/build-torch-kernels output. Each build's gradients are
checked against float32 autograd first (relative Frobenius error, printed and
recorded); the times are medians of interleaved rounds (timing.py), L2
flushed; per-kernel times of the op come from torch.profiler. With
--steady SECONDS the layer cases are also timed back to back at the power
limit, as a training step runs them (timing.steady_ms): ms, joules per call,
mean power and SM clock per build, two passes.
"""

import argparse
import datetime
import json
import statistics

import torch

import backward as B
import coda_torch
import coda_torch.ops as ops
from timing import interleaved_ms, steady_ms


CASES = ["qkv_rope", "layer_compiled", "layer_inner"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", nargs="+", required=True, metavar="NAME=DIR")
    parser.add_argument("--hidden", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=CASES)
    parser.add_argument("--steady", type=float, default=0, metavar="SECONDS",
                        help="also time the layer cases back to back for SECONDS "
                        "per build and pass, with energy and SM clock (timing.steady_ms)")
    args = parser.parse_args()
    builds = dict(k.split("=", 1) for k in args.kernels)
    modules = {}
    for name, directory in builds.items():
        ops._modules = {}
        coda_torch.load(directory)
        modules[name] = dict(ops._modules)

    def use(name):
        ops._modules = modules[name]

    results = []
    for hidden in args.hidden:
        if "qkv_rope" in args.cases:
            qkv_rope_case(hidden, builds, use, results)
        mlp = B.SIZES[hidden]
        eager, coda, _, tables = B.decoder_layers(hidden, mlp)
        xb = torch.randn(B.TOKENS // B.SEQ, B.SEQ, hidden, device="cuda").bfloat16().requires_grad_()
        dyb = torch.randn_like(xb)
        eager_compiled = torch.compile(eager)

        def layer_torch():
            xb.grad = None
            eager.zero_grad(set_to_none=True)
            eager_compiled(xb, position_embeddings=tables).backward(dyb)
        def layer_case(case, label, module, x):
            """Each build's coda layer (`module` on `x`) against torch.compile's."""
            fns = {}
            for name in builds:
                def layer(name=name):
                    use(name)
                    x.grad = None
                    coda.zero_grad(set_to_none=True)
                    module(x, position_embeddings=tables).backward(dyb)
                fns[label + name] = layer
            fns["torch.compile"] = layer_torch
            row = {"case": case, "hidden": hidden, "mlp": mlp,
                   "ms": {k: statistics.median(v)
                          for k, v in interleaved_ms(fns, reps=20).items()}}
            if args.steady:
                row["steady"] = steady_ms(fns, seconds=args.steady)
            results.append(row)
            print(json.dumps(row, indent=1), flush=True)
        if "layer_compiled" in args.cases:
            layer_case("llama_decoder_layer_compiled_fwd_bwd", "coda under torch.compile, ",
                       torch.compile(coda), xb)
        if "layer_inner" in args.cases:
            layer_case("llama_decoder_layer_inner_fwd_bwd", "coda, ", coda, B.inside_a_model(xb))
        del eager, coda, eager_compiled, xb, dyb
        torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "commit": args.commit,
                       "date": datetime.date.today().isoformat(), "torch": torch.__version__,
                       "builds": builds, "results": results}, f, indent=1)


def qkv_rope_case(hidden, builds, use, results):
    """The Q/K/V + RoPE op, each build against torch.compile, with its
    gradients' errors against float32 autograd and its kernels' times."""
    x = torch.randn(B.TOKENS, hidden, device="cuda").bfloat16().requires_grad_()
    wq, cos, sin, rotated, dq = B.qkv_rope_inputs(hidden)
    xf, wf = (t.detach().float().requires_grad_() for t in (x, wq))
    B.eager_qkv_rope(xf, wf, cos.float(), sin.float(), rotated).backward(dq.float())
    row = {"case": "linear_qkv_rope_fwd_bwd", "hidden": hidden, "errors": {}, "kernels_ms": {}}
    fns = {}
    for name in builds:
        def run(name=name):
            use(name)
            x.grad = wq.grad = None
            coda_torch.linear_qkv_rope(x, wq, cos, sin, rotated).backward(dq)
        run()
        row["errors"][name] = {
            g: ((a.grad.float() - r.grad).norm() / r.grad.norm()).item()
            for g, a, r in (("dx", x, xf), ("dw", wq, wf))}
        fns[name] = run
    compiled = torch.compile(B.eager_qkv_rope)

    def torch_compile():
        x.grad = wq.grad = None
        compiled(x, wq, cos, sin, rotated).backward(dq)
    fns["torch.compile"] = torch_compile
    row["ms"] = {k: statistics.median(v) for k, v in interleaved_ms(fns, reps=30).items()}
    for name in builds:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                fns[name]()
            torch.cuda.synchronize()
        row["kernels_ms"][name] = {e.key: e.device_time_total / e.count / 1000
                                   for e in p.key_averages() if "qkv" in e.key}
    results.append(row)
    print(json.dumps(row, indent=1), flush=True)
    del x, wq, dq, xf, wf


if __name__ == "__main__":
    main()
