#!/usr/bin/env python3
"""Runs a bundle of generated programs (coda_fuzz.py --gpu --gpu-bundle DIR)
on the GPU and checks every output against the program's meaning evaluated
by PyTorch in float64 from the same description (program.py's semantics,
written a third time, independently of coda's lowerings).

  python3 tools/coda-fuzz/gpu_check.py DIR [--out failures.json]

Needs torch with CUDA and coda_runtime on PYTHONPATH (scripts/build-runtime).
Each program runs twice on the same inputs; the two runs must agree bitwise.
"""

import argparse
import json
import math
import os
import sys

import coda_runtime
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from program import FP8_MAX  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
          "f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2,
          "i32": torch.int32, "i64": torch.int64}
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def unary(op, c, x):
    if op == "neg":
        return -x
    if op == "abs":
        return x.abs()
    if op == "tanh":
        return torch.tanh(x)
    if op == "sigmoid":
        return 1.0 / (1.0 + torch.exp(-x))
    if op == "silu":
        return x * (1.0 / (1.0 + torch.exp(-x)))
    if op == "exp_tanh":
        return torch.exp(torch.tanh(x))
    if op == "log1p_abs":
        return torch.log(x.abs() + 1.0)
    if op == "rsqrt1p":
        return torch.rsqrt(x * x + 1.0)
    if op == "gelu_erf":
        return (x * 0.5) * (torch.erf(x * 0.7071067811865476) + 1.0)
    if op == "scale":
        return x * c
    if op == "offset":
        return x + c
    if op == "rsqrt_offset":
        return torch.rsqrt(x + c)
    raise ValueError(op)


def binary(op, x, y):
    return {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y,
            "max": lambda: torch.maximum(x, y), "min": lambda: torch.minimum(x, y),
            "div1p": lambda: x / (y.abs() + 1.0)}[op]()


def expr(e, leaf):
    if e[0] == "leaf":
        return leaf(tuple(e[1]))
    if e[0] == "un":
        return unary(e[1], e[2], expr(e[3], leaf))
    return binary(e[1], expr(e[2], leaf), expr(e[3], leaf))


def make_inputs(p, gen):
    """Arguments in @p<seed>'s order, destinations last (NaN, zeros for a
    row_select), and the float64 views the reference reads. A batched
    program's (p["B"]) have the batch first where its GPU form does
    (program.batch_dims): lhs, rhs where batched, tile, row and periodic
    inputs, row_select targets and every output."""
    M, N, K = p["M"], p["N"], p["K"]
    dt = DTYPES[p["dtype"]]
    batch = p.get("B")

    def rand(*shape, dtype=dt, batched=True):
        if batch and batched:
            shape = (batch,) + shape
        return (torch.rand(*shape, generator=gen, device="cuda") * 2 - 1).to(dtype)
    a = rand(K, M) if p["ta"] else rand(M, K)
    b = rand(*((N, K) if p["tb"] else (K, N)), batched=bool(p.get("rhs_batched")))
    args, ins = [a, b], []
    for item in p["inputs"]:
        t = DTYPES[item["dtype"]]
        if item["kind"] == "scalar":
            x = 0.5 + torch.rand(1, generator=gen, device="cuda").item()
        else:
            shape = {"tile": (M, N), "row": (M,), "col": (N,),
                     "periodic": (M, item.get("period", 1))}[item["kind"]]
            x = rand(*shape, dtype=t, batched=item["kind"] != "col")
        args.append(x)
        ins.append(x)
    targets = {}
    for j, out in enumerate(p["outputs"]):
        if out["kind"] == "row_select":
            shape = (batch, M) if batch else (M,)
            t = torch.randint(-1, N + 1, shape, generator=gen, device="cuda").to(DTYPES[out["index"]])
            args.append(t)
            targets[j] = t
    dests = []
    for out in p["outputs"]:
        kind = out["kind"]
        t = DTYPES[out.get("dtype", "f32")]
        shape = {"tile": (M, N), "row_reduce": (M, -(-N // out.get("tile", 1))),
                 "col_reduce": (-(-M // out.get("tile", 1)), N), "row_select": (M,),
                 "pair_contract": (M, N // 2), "interleave": (M, 2 * N),
                 "group_value": (M, -(-N // out.get("width", 1)))}[kind]
        if batch:
            shape = (batch,) + shape
        fill = 0.0 if kind == "row_select" else float("nan")
        d = torch.full(shape, fill, dtype=t, device="cuda")
        dests.append(d)
    return a, b, ins, targets, args + dests, dests


def batched_reference(p, a, b, ins, targets):
    """reference(), batch by batch for a batched program: its outputs
    stacked along the batch."""
    if not p.get("B"):
        return reference(p, a, b, ins, targets)
    per_batch = []
    for k in range(p["B"]):
        pick = lambda x, batched: x[k] if batched else x  # noqa: E731
        per_batch.append(reference(
            p, a[k], pick(b, p.get("rhs_batched")),
            [pick(x, item["kind"] in ("tile", "row", "periodic"))
             for x, item in zip(ins, p["inputs"])],
            {j: t[k] for j, t in targets.items()}))
    return [torch.stack(outs) for outs in zip(*per_batch)]


def reference(p, a, b, ins, targets):
    M, N = p["M"], p["N"]
    A = a.double().T if p["ta"] else a.double()
    B = b.double().T if p["tb"] else b.double()
    acc = A @ B
    n = torch.arange(N, device="cuda")
    m = torch.arange(M, device="cuda")
    s = p["stride"] or 1
    first = (n % (2 * s)) < s
    c0 = torch.where(first, n, n - s)
    c1 = torch.where(first, n + s, n)
    vals, stats = [], {}
    for i, node in enumerate(p["values"]):
        op = node["op"]
        if op == "acc":
            vals.append(acc)
        elif op == "input":
            item, x = p["inputs"][node["input"]], ins[node["input"]]
            kind = item["kind"]
            if kind == "scalar":
                vals.append(torch.full((M, N), float(torch.tensor(x, dtype=torch.float32)),
                                       dtype=torch.float64, device="cuda"))
            elif kind == "tile":
                vals.append(x.double())
            elif kind == "row":
                vals.append(x.double()[:, None].expand(M, N))
            elif kind == "col":
                vals.append(x.double()[None, :].expand(M, N))
            else:
                vals.append(x.double()[:, n % item["period"]])
        elif op == "row_index":
            vals.append((m.double() * 0.0625)[:, None].expand(M, N))
        elif op == "col_index":
            vals.append((n.double() * 0.0625)[None, :].expand(M, N))
        elif op == "round":
            vals.append(vals[node["args"][0]].float().to(DTYPES[node["dtype"]]).double())
        elif op == "expr":
            args = [vals[x] for x in node["args"]]
            vals.append(expr(node["expr"], lambda l: args[l[1]]))
        elif op == "group":
            # Each row padded with the statistic's identity to whole groups.
            w, kind = node["width"], node["kind"]
            groups = -(-N // w)
            fill = {"sum": 0.0, "max": -math.inf, "min": math.inf}[kind]
            padded = torch.full((M, groups * w), fill, dtype=torch.float64, device="cuda")
            padded[:, :N] = vals[node["args"][0]]
            split = padded.view(M, groups, w)
            stats[i] = {"sum": lambda: split.sum(2), "max": lambda: split.amax(2),
                        "min": lambda: split.amin(2)}[kind]()
            vals.append(stats[i][:, n // w])
        elif op == "pair_map":
            args = [(vals[x][:, c0], vals[x][:, c1]) for x in node["args"]]
            y0 = expr(node["exprs"][0], lambda l: args[l[1]][l[2]])
            y1 = expr(node["exprs"][1], lambda l: args[l[1]][l[2]])
            vals.append(torch.where(first, y0, y1))
    outs = []
    for j, out in enumerate(p["outputs"]):
        kind = out["kind"]
        if kind == "tile":
            bound = FP8_MAX.get(out["dtype"])
            v = vals[out["value"]]
            outs.append(v.clamp(-bound, bound) if bound else v)
        elif kind in ("row_reduce", "col_reduce"):
            v = vals[out["value"]]
            t, red = out["tile"], out["reduction"]
            if kind == "col_reduce":
                v = v.T
            rows, length = v.shape
            blocks = -(-length // t)
            fill = 0.0 if red == "sum" else -math.inf
            padded = torch.full((rows, blocks * t), fill, dtype=torch.float64, device="cuda")
            padded[:, :length] = v
            split = padded.view(rows, blocks, t)
            r = {"sum": lambda: split.sum(2), "max": lambda: split.amax(2),
                 "logsumexp": lambda: torch.logsumexp(split, 2)}[red]()
            outs.append(r.T if kind == "col_reduce" else r)
        elif kind == "group_value":
            outs.append(stats[out["value"]])
        elif kind == "row_select":
            tg = targets[j].long()
            ok = (tg >= 0) & (tg < N)
            picked = vals[out["value"]][m, tg.clamp(0, N - 1)]
            outs.append(torch.where(ok, picked, torch.zeros_like(picked)))
        elif kind == "pair_contract":
            q = torch.arange(N // 2, device="cuda")
            f0 = (q // s) * 2 * s + q % s
            args = [(vals[x][:, f0], vals[x][:, f0 + s]) for x in out["args"]]
            outs.append(expr(out["expr"], lambda l: args[l[1]][l[2]]))
        elif kind == "interleave":
            ev, od = vals[out["even"]], vals[out["odd"]]
            outs.append(torch.stack((ev, od), dim=2).reshape(M, 2 * N))
    return outs


def low_precision(p):
    return any(v["op"] == "round" for v in p["values"]) or any(
        o.get("dtype", "f32") != "f32" for o in p["outputs"])


def compare(got, want, p, dtype):
    """None, or a description of the worst element outside the tolerance:
    rtol 1e-3 in f32 (the GPU accumulates in f32 in its own order), 2e-2
    with a rounding to 16 bits (one unit of a 16-bit value, after
    different f32 bits), atol that fraction of the output's largest
    magnitude plus 1e-6 (an output whose terms cancel to ~1e-13 in float64
    comes out as 0 in f32); an 8-bit output's code may also be the
    expected one's neighbour."""
    # Rounded like the output (an 8-bit one from f32, as the kernel rounds).
    want = want.float().to(dtype) if dtype in FP8 else want.to(dtype)
    codes = (got.view(torch.uint8), want.view(torch.uint8)) if dtype in FP8 else None
    want, got = want.double(), got.double()
    if torch.isnan(got).any():
        return f"NaN at {torch.nonzero(torch.isnan(got))[0].tolist()}"
    tol = 2e-2 if low_precision(p) else 1e-3
    scale = want.abs().max().item() if want.numel() else 0.0
    err = (got - want).abs() - (tol * want.abs() + tol * scale + 1e-6)
    if codes:
        # An 8-bit code may be the neighbour of the expected one: values that
        # differ in their last f32 bits round to adjacent codes.
        ordered = [torch.where(c >= 128, 128 - c.int(), c.int()) for c in codes]
        err = torch.where((ordered[0] - ordered[1]).abs() <= 1, torch.zeros_like(err), err)
    if (err > 0).any():
        i = torch.nonzero(err == err.max())[0].tolist()
        return f"at {i}: got {got[tuple(i)].item()!r}, want {want[tuple(i)].item()!r}"
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bundle")
    parser.add_argument("--out", default="gpu-failures.json")
    parser.add_argument("--verbose", action="store_true", help="name each program before it runs")
    parser.add_argument("--every", type=int, default=1,
                        help="check every this many programs (under a sanitizer)")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.empty(1, device="cuda")
    with open(os.path.join(args.bundle, "programs.json")) as f:
        listing = json.load(f)[::args.every]
    modules = {}
    failures = []
    for entry in listing:
        p = entry["program"]
        if args.verbose:
            print(f"gpu_check: seed {entry['seed']} ({entry['function']})", flush=True)
        module = modules.setdefault(entry["module"], coda_runtime.Module(
            os.path.join(args.bundle, entry["module"])))
        gen = torch.Generator(device="cuda").manual_seed(entry["seed"])
        a, b, ins, targets, launch_args, dests = make_inputs(p, gen)
        problem = None
        try:
            (kernel,) = module.kernels_of(entry["function"])
            module.launch(kernel, launch_args)
            torch.cuda.synchronize()
            first = [d.clone() for d in dests]
            for d, out in zip(dests, p["outputs"]):
                d.fill_(0 if out["kind"] == "row_select" else float("nan"))
            module.launch(kernel, launch_args)
            torch.cuda.synchronize()
            for j, (x, y) in enumerate(zip(first, dests)):
                if not torch.equal(x.view(torch.uint8), y.view(torch.uint8)):  # bitwise
                    problem = f"output {j}: two runs on the same inputs differ"
                    break
            if problem is None:
                for j, (got, want) in enumerate(zip(dests, batched_reference(p, a, b, ins, targets))):
                    bad = compare(got, want, p, got.dtype)
                    if bad:
                        problem = f"output {j} ({p['outputs'][j]['kind']}): {bad}"
                        break
        except Exception as e:  # a refusal or a launch error is a failure too
            problem = f"{type(e).__name__}: {e}"
        if problem:
            failures.append({"seed": entry["seed"], "problem": problem, "program": p})
            print(f"gpu_check: seed {entry['seed']}: {problem}", flush=True)
    with open(args.out, "w") as f:
        json.dump(failures, f, indent=1)
    print(f"gpu_check: {len(listing)} programs, {len(failures)} failures "
          f"(each run twice: bitwise equal)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
