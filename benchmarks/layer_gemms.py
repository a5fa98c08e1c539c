"""A Llama decoder layer's forward + backward with coda's ops against the
GEMMs it runs, each alone with a plain epilogue (coda's kernels, and
cuBLAS's), and its attention alone: what the layer spends outside its
GEMMs and attention, the measure of nothing being left beside the GEMMs
(bf16, 16384 tokens, L2 flushed; timing.py); also for a layer inside a
model, whose input's sums of squares the previous layer hands on.

  python3 benchmarks/layer_gemms.py --kernels build/torch-kernels \\
      --plain build/gpu-tests/primitives --out X.json

--plain is the GPU suite's primitives (plain_nt: x W^T); the layouts of the
backward come from coda_torch's swiglu_mlp program (dX = dAcc W, dW =
dAcc^T x, plain epilogues). Each layer step is timed twice: synchronized
(the host launches it while the GPU waits) and queued behind a sleep (the
host ahead, as in training: its kernels and the gaps between them).
--profile adds the layer's kernels, first and inside a model, each under
the operator that launched it (torch.profiler), per step. --steady SECONDS
adds each side's twelve GEMMs back to back at the power limit
(timing.steady_ms): time, energy, power and clock per layer's GEMMs, and
per GEMM, coda's against cuBLAS's.
"""

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from backward import (SEQ, SIZES, TOKENS, decoder_layers, inside_a_model,  # noqa: E402
                      kv_heads_of, layer_step)
import coda_runtime  # noqa: E402
import coda_torch  # noqa: E402
from coda_torch import ops  # noqa: E402
from host_gaps import trace_events  # noqa: E402
from timing import (QUEUE_LEAD_MS, interleaved_ms, median_ms, queued_ms, steady_ms,  # noqa: E402
                    steady_text)


def layer_gemms(hidden, mlp, tokens=TOKENS, kv_heads=None):
    """(name, layout, M, N, K) of the layer's twelve GEMMs at `tokens`
    tokens (heads of 128, K/V heads a quarter of them unless kv_heads
    says): nt = x W^T, nn = dAcc W, tn = dAcc^T x."""
    heads = hidden // 128
    qkv = 128 * (heads + 2 * kv_heads_of(heads, kv_heads))
    t = tokens
    return [("qkv", "nt", t, qkv, hidden), ("o", "nt", t, hidden, hidden),
            ("gate_up", "nt", t, 2 * mlp, hidden), ("down", "nt", t, hidden, mlp),
            ("qkv dX", "nn", t, hidden, qkv), ("o dX", "nn", t, hidden, hidden),
            ("gate_up dX", "nn", t, hidden, 2 * mlp), ("down dX", "nn", t, mlp, hidden),
            ("qkv dW", "tn", qkv, hidden, t), ("o dW", "tn", hidden, hidden, t),
            ("gate_up dW", "tn", 2 * mlp, hidden, t), ("down dW", "tn", hidden, mlp, t)]


def layout_kernels(plain):
    """(module, kernel) of each layout: nt the GPU suite's plain_nt (x W^T,
    module `plain`), nn and tn coda_torch's swiglu_mlp program's dX = dAcc W
    and dW = dAcc^T x (plain epilogues; coda_torch loaded)."""
    program, (nn_kernel, tn_kernel) = ops._kernels(
        "swiglu_mlp", "swiglu_mlp_backward", "grad:gemm0.lhs", "grad:gemm0.rhs")
    return {"nt": (plain, plain.kernels_of("plain_nt")[0]), "nn": (program, nn_kernel),
            "tn": (program, tn_kernel)}


def layout_operands(layout, m, n, k):
    """Random bf16 operands a, b as `layout` stores them (nt a M x K, b N x
    K; nn a M x K, b K x N; tn a K x M, b K x N), the M x N output y, and
    the product's factors as torch.matmul takes them (a or a^T, b or b^T)."""
    a = torch.randn(*((k, m) if layout == "tn" else (m, k)), device="cuda").bfloat16()
    b = torch.randn(*((n, k) if layout == "nt" else (k, n)), device="cuda").bfloat16()
    y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return a, b, y, a.T if layout == "tn" else a, b.T if layout == "nt" else b


def check_product(y, reference):
    """coda's bf16 product `y` against torch's `reference`, within bf16's
    rounding of a sum over K (relative 2 %, absolute 2 % of its largest
    entry)."""
    torch.testing.assert_close(y.float(), reference.float(), rtol=2e-2,
                               atol=2e-2 * reference.abs().max().item())


def attention_step(hidden, tokens=TOKENS, kv_heads=None):
    """The layer's attention alone, forward + backward: SDPA, causal, heads
    of 128 with a quarter as many K/V heads unless kv_heads says, sequences
    of SEQ."""
    heads = hidden // 128
    q = torch.randn(tokens // SEQ, heads, SEQ, 128, device="cuda").bfloat16().requires_grad_()
    kv = [torch.randn(tokens // SEQ, kv_heads_of(heads, kv_heads), SEQ, 128, device="cuda")
          .bfloat16().requires_grad_() for _ in range(2)]
    do = torch.randn_like(q)

    def run():
        q.grad = kv[0].grad = kv[1].grad = None
        torch.nn.functional.scaled_dot_product_attention(
            q, *kv, is_causal=True, enable_gqa=True).backward(do)
    return run


def kernels_by_operator(step, steps=5):
    """[(ms per step, kernels per step, operator, kernel)] of `step`'s GPU
    kernels, each under the PyTorch operator that launched it."""
    step()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    trace = trace_events(prof)
    launcher = {e["args"]["External id"]: e["name"] for e in trace
                if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    totals = {}
    for e in trace:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            key = (launcher.get(e.get("args", {}).get("External id"), "?"), e["name"])
            ms, n = totals.get(key, (0.0, 0))
            totals[key] = (ms + e["dur"] / 1000 / steps, n + 1)
    return sorted(((ms, n // steps, op, kernel) for (op, kernel), (ms, n) in totals.items()),
                  reverse=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--plain", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--hidden", type=int, nargs="+", default=sorted(SIZES))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--steady", type=float, default=0, metavar="SECONDS",
                        help="also time each side's GEMMs back to back for about SECONDS "
                             "per side and pass, with their energy")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(args.kernels)
    plain = coda_runtime.Module(args.plain)
    kernels = layout_kernels(plain)
    rows = []
    for hidden in args.hidden:
        mlp = SIZES[hidden]
        gemms, sides = [], []
        for name, layout, m, n, k in layer_gemms(hidden, mlp):
            a, b, y, lhs, rhs = layout_operands(layout, m, n, k)
            module, kernel = kernels[layout]
            ops._launch(module, kernel, a, b, y)
            check_product(y, lhs @ rhs)
            # In interleaved rounds, as gemm_configs.py times them: timed one
            # after the other, each side runs at the clock the power drawn
            # before it leaves (docs/performance.md, "Raster order").
            side = {"coda": lambda a=a, b=b, y=y, module=module, kernel=kernel:
                        ops._launch(module, kernel, a, b, y),
                    "cublas": lambda lhs=lhs, rhs=rhs: torch.matmul(lhs, rhs)}
            times = interleaved_ms(side)
            coda_ms, cublas_ms = (statistics.median(times[k]) for k in ("coda", "cublas"))
            gemm = {"gemm": name, "layout": layout, "M": m, "N": n, "K": k,
                    "coda_ms": coda_ms, "cublas_ms": cublas_ms}
            if args.steady:
                gemm["steady"] = steady_ms(side, seconds=args.steady)
                sides.append(side)
            gemms.append(gemm)
        steady = None
        if args.steady:
            # The twelve back to back, each side's as a layer step runs them.
            steady = steady_ms({s: (lambda s=s: [side[s]() for side in sides])
                                for s in ("coda", "cublas")}, seconds=args.steady)
        del sides
        eager, coda, _, tables = decoder_layers(hidden, mlp)
        xb = torch.randn(TOKENS // SEQ, SEQ, hidden, device="cuda").bfloat16().requires_grad_()
        dyb = torch.randn_like(xb)

        first = layer_step(coda, xb, dyb, tables)
        layer_ms = median_ms(first)
        # A layer inside a model, its input's sums of squares handed on by
        # the previous layer (backward.py's llama_decoder_layer_inner).
        inner = layer_step(coda, inside_a_model(xb), dyb, tables)
        inner_ms = median_ms(inner)
        # The same with the host ahead, as a training step runs: each step
        # queued behind a sleep before its first kernel starts.
        queued = queued_ms({"layer": first, "inner": inner}, reps=20, lead_ms=QUEUE_LEAD_MS)
        profile = kernels_by_operator(first) if args.profile else []
        inner_profile = kernels_by_operator(inner) if args.profile else []
        attention = attention_step(hidden)
        attention_ms = median_ms(attention)
        queued_attention_ms = queued_ms({"attention": attention}, reps=20,
                                        lead_ms=QUEUE_LEAD_MS)["attention"][0]
        coda_gemms = sum(g["coda_ms"] for g in gemms)
        cublas_gemms = sum(g["cublas_ms"] for g in gemms)
        row = {"hidden": hidden, "mlp": mlp, "tokens": TOKENS, "layer_ms": layer_ms,
               "attention_ms": attention_ms, "coda_gemms_ms": coda_gemms,
               "cublas_gemms_ms": cublas_gemms,
               "outside_over_coda_gemms": (layer_ms - attention_ms) / coda_gemms,
               "outside_over_cublas_gemms": (layer_ms - attention_ms) / cublas_gemms,
               "inner_layer_ms": inner_ms,
               "inner_outside_over_coda_gemms": (inner_ms - attention_ms) / coda_gemms,
               "queued_layer_ms": queued["layer"][0], "queued_inner_layer_ms": queued["inner"][0],
               "queued_attention_ms": queued_attention_ms,
               "queued_host_ms": max(queued["layer"][1], queued["inner"][1]),
               "queued_outside_over_coda_gemms":
                   (queued["layer"][0] - queued_attention_ms) / coda_gemms,
               "queued_inner_outside_over_coda_gemms":
                   (queued["inner"][0] - queued_attention_ms) / coda_gemms,
               "gemms": gemms, "steady_gemms": steady, "layer_kernels": profile,
               "inner_layer_kernels": inner_profile}
        rows.append(row)
        print(f"hidden {hidden}: layer fwd+bwd {layer_ms:.3f} ms, attention {attention_ms:.3f}, "
              f"its GEMMs alone: coda {coda_gemms:.3f} / cuBLAS {cublas_gemms:.3f}; (layer - "
              f"attention) / GEMMs: {row['outside_over_coda_gemms']:.3f} / "
              f"{row['outside_over_cublas_gemms']:.3f}; a layer inside a model {inner_ms:.3f} ms, "
              f"{row['inner_outside_over_coda_gemms']:.3f}", flush=True)
        print(f"  host ahead (queued behind {QUEUE_LEAD_MS} ms; the host's step "
              f"{row['queued_host_ms']:.3f} ms): layer {row['queued_layer_ms']:.3f} ms, "
              f"attention {queued_attention_ms:.3f}, (layer - attention) / coda's GEMMs "
              f"{row['queued_outside_over_coda_gemms']:.3f}; inside a model "
              f"{row['queued_inner_layer_ms']:.3f} ms, "
              f"{row['queued_inner_outside_over_coda_gemms']:.3f}", flush=True)
        if steady:
            print(f"  the GEMMs back to back: {steady_text(steady)}", flush=True)
        for g in gemms:
            print(f"  {g['gemm']:>11} {g['layout']} {g['M']} x {g['N']} x {g['K']}: "
                  f"coda {g['coda_ms']:.3f} ms, cuBLAS {g['cublas_ms']:.3f}", flush=True)
            if "steady" in g:
                print(f"    back to back: {steady_text(g['steady'])}", flush=True)
        for title, launched in (("the first layer's", profile),
                                ("a layer inside a model's", inner_profile)):
            if launched:
                print(f"  {title} kernels: {sum(p[0] for p in launched):.3f} ms a step",
                      flush=True)
            for ms, n, op, kernel in launched:
                print(f"  {ms:7.3f} ms x{n:2d}  {op[:36]:36}  {kernel[:80]}", flush=True)
        del eager, coda, xb, first, inner, dyb, attention
        torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "commit": args.commit,
                       "torch": torch.__version__, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
