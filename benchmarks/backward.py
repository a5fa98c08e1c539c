"""Forward + backward of coda_torch's ops, and of a whole Llama decoder
layer with coda_torch.llama.apply's ops in it, against the same computation
in torch eager and torch.compile, side by side in one process (bf16, L2
flushed, medians of CUDA-event timings; see bench.py). The decoder layers
are timed twice: synchronized per call, and queued behind a sleep so that
the host has launched the whole step before the GPU starts it (as in a
training step, whose host runs ahead): the GPU's own time. With --steady
SECONDS every case is also timed back to back at the power limit, as a
training step runs it (timing.steady_ms: ms, joules per call, mean power and
SM clock, coda and torch.compile, two passes).

  python3 benchmarks/backward.py --kernels build/torch-kernels --out X.json
"""

import argparse
import datetime
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch  # noqa: E402
from timing import QUEUE_LEAD_MS, interleaved_ms, queued_ms, steady_ms, steady_text  # noqa: E402

TOKENS, VOCAB, SEQ = 16384, 32768, 2048
SIZES = {2048: 5632, 4096: 11008}


def eager_swiglu(x, w):
    return torch.nn.functional.silu(x @ w[0::2].T) * (x @ w[1::2].T)


def eager_swiglu_mlp(x, w, wd):
    return eager_swiglu(x, w) @ wd.T


def eager_ce(x, w, t):
    return torch.nn.functional.cross_entropy((x @ w.T).float(), t, reduction="none")


def eager_norm_ce(x, rs, w, t):
    # The LM head behind a deferred RMSNorm: the row scale on the logits.
    return torch.nn.functional.cross_entropy(rs[:, None] * (x @ w.T).float(), t,
                                             reduction="none")


def coda_norm_ce_saved(x, rs, w, t):
    # As coda_torch.llama's LM head runs it by default: the logits kept.
    return coda_torch.linear_norm_cross_entropy(x, rs, w, t, save_logits=True)


def eager_qkv_rope(x, w, cos, sin, rotated):
    # Hugging Face's rotate_half RoPE per head (of the tables' width), on the
    # first `rotated` columns (Q and K).
    q = x @ w.T
    qk = q[:, :rotated]
    half = cos.shape[1] // 2
    heads = qk.reshape(q.shape[0], -1, 2 * half)
    turned = torch.cat([-heads[..., half:], heads[..., :half]], -1)
    qk = (heads * cos[:, None, :] + turned * sin[:, None, :]).reshape_as(qk)
    return torch.cat([qk, q[:, rotated:]], 1)


def eager_residual_norm(x, w, r):
    h = x @ w.T + r
    return h, h.float().pow(2).sum(1)


def kv_heads_of(heads, kv_heads=None):
    """The K/V heads of a layer of `heads` query heads: kv_heads if given,
    else a quarter of them, the benchmarks' grouped-query layers."""
    return kv_heads or heads // 4


def decoder_layers(hidden, mlp, head_dim=128, kv_heads=None):
    """A Llama decoder layer (sdpa attention, K/V heads a quarter of the query
    heads unless kv_heads says), its coda-patched copies (the whole layer;
    the MLP and Q/K/V + RoPE ops alone, layer=False), and the rotary tables
    for SEQ positions."""
    import copy
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as hf
    heads = hidden // head_dim
    config = LlamaConfig(hidden_size=hidden, intermediate_size=mlp, num_attention_heads=heads,
                         num_key_value_heads=kv_heads_of(heads, kv_heads),
                         max_position_embeddings=SEQ)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    eager = hf.LlamaDecoderLayer(config, 0).cuda().to(torch.bfloat16)
    coda = copy.deepcopy(eager)
    coda_torch.llama.apply(coda)
    ops = copy.deepcopy(eager)
    coda_torch.llama.apply(ops, layer=False)
    probe = torch.empty(1, SEQ, hidden, device="cuda", dtype=torch.bfloat16)
    positions = torch.arange(SEQ, device="cuda")[None]
    tables = hf.LlamaRotaryEmbedding(config).cuda()(probe, positions)
    return eager, coda, ops, tables


def inside_a_model(x):
    """A copy of the layer input `x` that carries its row sums of squares,
    as the previous patched layer hands them on: coda's layer inside a model
    takes them instead of computing them (torch's layers compute their
    input norm in every layer)."""
    xi = x.detach().clone().requires_grad_()
    coda_torch.llama._hand_on_sum_sq(
        xi, xi.detach().reshape(-1, xi.shape[-1]).float().square().sum(-1))
    return xi


def layer_step(layer, x, dy, tables):
    """One forward + backward of a decoder layer on `x` with the upstream
    gradient `dy`, its gradients cleared first."""
    module = getattr(layer, "_orig_mod", layer)

    def run():
        x.grad = None
        module.zero_grad(set_to_none=True)
        layer(x, position_embeddings=tables).backward(dy)
    return run


def qkv_rope_inputs(hidden, head_dim=128):
    """Q/K/V with RoPE: hidden / head_dim query heads, a quarter of that for
    K and V, RoPE on the Q and K columns. Returns w (N x hidden, requiring
    grad), cos, sin (T x head_dim, bf16), the number of rotated columns and
    an output gradient dq (T x N)."""
    qh = hidden // head_dim
    n = head_dim * (qh + 2 * kv_heads_of(qh))
    wq = (torch.randn(n, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
    angles = torch.rand(TOKENS, head_dim // 2, device="cuda") * 6.28
    cos, sin = (torch.cat([f(angles)] * 2, 1).bfloat16() for f in (torch.cos, torch.sin))
    dq = torch.randn(TOKENS, n, device="cuda").bfloat16()
    return wq, cos, sin, head_dim * (qh + kv_heads_of(qh)), dq


def measure(kernels, hidden_sizes, record, head_dim=128, cases=None, steady=0):
    """Runs every case at each hidden size (keys of SIZES), attention heads
    of head_dim, with the coda_torch kernels under `kernels` (only the cases
    whose names start with one of `cases`, if given; with `steady` seconds,
    also timed back to back); record(row) gets each result, in bench.py's
    format."""
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(kernels)

    def compare(case, shape, ops, make_step, queued=False):
        if cases and not any(case.startswith(c) for c in cases):
            return
        # In interleaved rounds, so that clock and power drift reach every
        # side alike.
        steps = {side: make_step(op) for side, op in
                 zip(("coda", "torch_eager", "torch_compile"), ops)}
        times = interleaved_ms(steps)
        ms = {side: statistics.median(t) for side, t in times.items()}
        row = {"case": case, "shape": shape, "coda_ms": ms["coda"],
               "baselines": {"torch_eager": ms["torch_eager"],
                             "torch_compile": ms["torch_compile"]}}
        print(f"{case} {shape}: coda {row['coda_ms']:.3f} ms; " + ", ".join(
            f"{k} {v:.3f} ms ({v / row['coda_ms']:.2f}x)" for k, v in row["baselines"].items()),
            flush=True)
        if steady:
            # Back to back at the power limit: coda against torch.compile.
            row["steady"] = steady_ms({side: steps[side] for side in ("coda", "torch_compile")},
                                      seconds=steady)
            print("  steady: " + steady_text(row["steady"]), flush=True)
        if queued:
            # Each step queued behind a sleep, the host ahead as in
            # training: the GPU's time, without the host's launches.
            gpu = queued_ms(steps, reps=20, lead_ms=QUEUE_LEAD_MS)
            row["queued"] = {"coda_ms": gpu["coda"][0],
                             "baselines": {side: gpu[side][0] for side in row["baselines"]},
                             "host_ms": {side: host for side, (_, host) in gpu.items()}}
            print(f"  queued (host ahead): coda {gpu['coda'][0]:.3f} ms; " + ", ".join(
                f"{k} {v:.3f} ms ({v / gpu['coda'][0]:.2f}x)"
                for k, v in row["queued"]["baselines"].items()) + "; host " + ", ".join(
                f"{k} {v:.2f}" for k, v in row["queued"]["host_ms"].items()), flush=True)
        record(row)

    swiglu = (coda_torch.linear_swiglu, eager_swiglu, torch.compile(eager_swiglu))
    ce = (coda_torch.linear_cross_entropy, eager_ce, torch.compile(eager_ce))
    for hidden in hidden_sizes:
        mlp = SIZES[hidden]
        x = torch.randn(TOKENS, hidden, device="cuda").bfloat16().requires_grad_()
        w = (torch.randn(2 * mlp, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
        dy = torch.randn(TOKENS, mlp, device="cuda").bfloat16()
        wv = (torch.randn(VOCAB, hidden, device="cuda") / hidden ** 0.5).bfloat16().requires_grad_()
        t = torch.randint(0, VOCAB, (TOKENS,), device="cuda")

        def swiglu_step(fn):
            def run():
                x.grad = w.grad = None
                fn(x, w).backward(dy)
            return run

        def ce_step(fn):
            def run():
                x.grad = wv.grad = None
                fn(x, wv, t).mean().backward()
            return run

        compare("linear_swiglu_fwd_bwd", {"M": TOKENS, "hidden": hidden, "mlp": mlp}, swiglu,
                swiglu_step)
        # The whole MLP: the SwiGLU backward in the epilogue of the dh GEMM.
        wd = (torch.randn(hidden, mlp, device="cuda") / mlp ** 0.5).bfloat16().requires_grad_()
        dz = torch.randn(TOKENS, hidden, device="cuda").bfloat16()

        def mlp_step(fn):
            def run():
                x.grad = w.grad = wd.grad = None
                fn(x, w, wd).backward(dz)
            return run

        compare("swiglu_mlp_fwd_bwd", {"M": TOKENS, "hidden": hidden, "mlp": mlp},
                (coda_torch.swiglu_mlp, eager_swiglu_mlp, torch.compile(eager_swiglu_mlp)),
                mlp_step)
        del wd, dz
        compare("linear_cross_entropy_fwd_bwd", {"M": TOKENS, "hidden": hidden, "vocab": VOCAB},
                ce, ce_step)
        rs = (torch.rand(TOKENS, device="cuda") + 0.5).requires_grad_()

        def norm_ce_step(fn):
            def run():
                x.grad = wv.grad = rs.grad = None
                fn(x, rs, wv, t).mean().backward()
            return run

        compare("linear_norm_cross_entropy_saved_fwd_bwd",
                {"M": TOKENS, "hidden": hidden, "vocab": VOCAB},
                (coda_norm_ce_saved, eager_norm_ce, torch.compile(eager_norm_ce)), norm_ce_step)
        del rs
        wq, cos, sin, rotated, dq = qkv_rope_inputs(hidden, head_dim)
        n = wq.shape[0]

        def rope_step(fn):
            def run():
                x.grad = wq.grad = None
                fn(x, wq, cos, sin, rotated).backward(dq)
            return run

        compare("linear_qkv_rope_fwd_bwd",
                {"M": TOKENS, "hidden": hidden, "N": n, "head_dim": head_dim},
                (coda_torch.linear_qkv_rope, eager_qkv_rope, torch.compile(eager_qkv_rope)),
                rope_step)
        # The down projection + residual and the next RMSNorm's sums of squares.
        xd = torch.randn(TOKENS, mlp, device="cuda").bfloat16().requires_grad_()
        wd = (torch.randn(hidden, mlp, device="cuda") / mlp ** 0.5).bfloat16().requires_grad_()
        r = torch.randn(TOKENS, hidden, device="cuda").bfloat16().requires_grad_()
        dh = torch.randn(TOKENS, hidden, device="cuda").bfloat16()
        dss = torch.randn(TOKENS, device="cuda") / hidden

        def norm_step(fn):
            def run():
                xd.grad = wd.grad = r.grad = None
                torch.autograd.backward(fn(xd, wd, r), [dh, dss])
            return run

        compare("linear_residual_norm_fwd_bwd",
                {"M": TOKENS, "hidden": hidden, "K": mlp, "N": hidden},
                (coda_torch.linear_residual_norm, eager_residual_norm,
                 torch.compile(eager_residual_norm)), norm_step)
        del x, w, dy, wv, t, wq, dq, xd, wd, r, dh
        torch.cuda.empty_cache()
        # A whole decoder layer (RMSNorm, Q/K/V + RoPE, sdpa attention, o_proj,
        # residual, RMSNorm, MLP, residual): coda's copy runs everything but
        # the attention through coda_torch (norms deferred into the GEMMs);
        # the `ops` copy only Q/K/V + RoPE and the MLP.
        eager, coda, ops, tables = decoder_layers(hidden, mlp, head_dim)
        heads = {"heads": hidden // head_dim, "kv_heads": hidden // head_dim // 4,
                 "head_dim": head_dim}
        compiled = torch.compile(eager)
        xb = torch.randn(TOKENS // SEQ, SEQ, hidden, device="cuda").bfloat16().requires_grad_()
        dyb = torch.randn_like(xb)

        def first_layer_step(layer):
            return layer_step(layer, xb, dyb, tables)

        compare("llama_decoder_layer_fwd_bwd",
                {"M": TOKENS, "batch": TOKENS // SEQ, "seq": SEQ, "hidden": hidden, "mlp": mlp,
                 **heads}, (coda, eager, compiled), first_layer_step, queued=True)
        # A layer inside a model: its input's row sums of squares come from
        # the previous layer's down-projection epilogue (carried on the
        # tensor, as coda_torch.llama's layers hand them on), so coda's layer
        # does not compute them; torch's layers compute their input norm in
        # every layer. (Without a gradient into the previous layer, whose
        # adjoint takes it in an epilogue it runs anyway.)
        # Only coda's layer gets them, on a copy of the input (an attribute
        # on torch.compile's input would change what it guards on).
        xi = inside_a_model(xb)

        def inner_layer_step(layer):
            return layer_step(layer, xi if layer is coda else xb, dyb, tables)

        compare("llama_decoder_layer_inner_fwd_bwd",
                {"M": TOKENS, "batch": TOKENS // SEQ, "seq": SEQ, "hidden": hidden, "mlp": mlp,
                 **heads}, (coda, eager, compiled), inner_layer_step, queued=True)
        # The same with torch.compile around coda's (opaque) ops, fusing the
        # norms, residuals and attention glue as it does for eager's layer.
        compare("llama_decoder_layer_compiled_fwd_bwd",
                {"M": TOKENS, "batch": TOKENS // SEQ, "seq": SEQ, "hidden": hidden, "mlp": mlp,
                 **heads}, (torch.compile(coda), eager, compiled), first_layer_step, queued=True)
        for name, layer in (("llama_decoder_layer_ops_fwd_bwd", ops),
                            ("llama_decoder_layer_ops_compiled_fwd_bwd", torch.compile(ops))):
            compare(name,
                    {"M": TOKENS, "batch": TOKENS // SEQ, "seq": SEQ, "hidden": hidden,
                     "mlp": mlp, **heads}, (layer, eager, compiled), first_layer_step)
        del eager, coda, ops, compiled, xb, xi, dyb
        torch.cuda.empty_cache()


def main():
    global TOKENS
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--hidden", type=int, nargs="+", default=sorted(SIZES))
    parser.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    parser.add_argument("--cases", nargs="+", help="run only the cases whose names "
                        "start with one of these")
    parser.add_argument("--tokens", type=int, default=TOKENS,
                        help="tokens per call (a multiple of the sequence length, 2048; "
                        "a training step of 4 x 2048 runs 8192)")
    parser.add_argument("--steady", type=float, default=0, metavar="SECONDS",
                        help="also time each case back to back for SECONDS per side "
                        "and pass, with energy and SM clock (timing.steady_ms)")
    args = parser.parse_args()
    if args.tokens % SEQ:
        parser.error(f"--tokens must be a multiple of {SEQ}")
    TOKENS = args.tokens
    rows = []
    measure(args.kernels, args.hidden, rows.append, args.head_dim, args.cases, args.steady)
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(),
                   "commit": args.commit, "torch": torch.__version__, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
