"""The most a decoder layer's fusions can gain over torch.compile, measured at
the power limit: the layer's twelve GEMMs (cuBLAS) and its attention, back
to back with nothing between them, are what any layer built on those GEMMs
and that attention takes at least; torch.compile's layer over that floor is
the highest ratio a fusion of everything else (the norms, SwiGLU, RoPE, the
residual adds, their backward) can reach. coda's layer inside a model is
timed beside them.

  python3 benchmarks/layer_bound.py --kernels build/torch-kernels --out X.json \\
      [--hidden 2048 4096] [--tokens 16384 8192] [--seconds 1.5] [--kv-heads 16 8] \\
      [--step 4 2]

--step L (one per --hidden) adds the rest of a training step of L layers
at the first --tokens: the final norm + LM head + cross-entropy under
torch.compile against its three GEMMs (cuBLAS), and fused AdamW over the
model's parameters, which both sides run alike; the step's ceiling is then
(L torch.compile layers + its LM head + AdamW) over (L floors + the LM
head's GEMMs + AdamW), the embedding left out of both.

Every case runs back to back for about SECONDS per pass, two passes
(timing.steady_ms), forward + backward, bf16, sequences of 2048: the
regime of a training step, whose kernels run one after another at the
board's power limit. Heads are of 128, K/V heads a quarter of them unless
--kv-heads gives their number per --hidden (train_llama.py's 4 x 2048
model has as many as its query heads, 16).
"""

import argparse
import datetime
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from backward import (SEQ, SIZES, VOCAB, decoder_layers, inside_a_model,  # noqa: E402
                      kv_heads_of, layer_step)
import coda_torch  # noqa: E402
from layer_gemms import attention_step, layer_gemms, layout_operands  # noqa: E402
from timing import steady_ms, steady_text  # noqa: E402


def matmuls(products):
    """torch.matmul (cuBLAS) over each (lhs, rhs) of `products`, in turn."""
    def run():
        for lhs, rhs in products:
            torch.matmul(lhs, rhs)
    return run


def cublas_gemms(hidden, mlp, tokens, kv_heads):
    """The layer's twelve GEMMs through torch.matmul, one after another."""
    return matmuls([layout_operands(layout, m, n, k)[3:]
                    for _, layout, m, n, k in layer_gemms(hidden, mlp, tokens, kv_heads)])


def lm_head_cases(hidden, tokens):
    """The final RMSNorm + LM head + cross-entropy (mean over tokens) under
    torch.compile, forward + backward, and its three GEMMs alone (logits,
    dX, dW through torch.matmul)."""
    norm = torch.nn.RMSNorm(hidden, eps=1e-5, device="cuda", dtype=torch.bfloat16)
    head = torch.nn.Linear(hidden, VOCAB, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(tokens, hidden, device="cuda").bfloat16().requires_grad_()
    t = torch.randint(0, VOCAB, (tokens,), device="cuda")
    compiled = torch.compile(lambda x, t: torch.nn.functional.cross_entropy(
        head(norm(x)).float(), t))

    def torch_compile():
        x.grad = norm.weight.grad = head.weight.grad = None
        compiled(x, t).backward()
    gemms = matmuls([
        (torch.randn(tokens, hidden, device="cuda").bfloat16(), head.weight.detach().T),
        (torch.randn(tokens, VOCAB, device="cuda").bfloat16(), head.weight.detach()),
        (torch.randn(VOCAB, tokens, device="cuda").bfloat16(), x.detach())])
    return torch_compile, gemms


def adamw_step(hidden, mlp, layers, kv_heads):
    """Fused AdamW's step over a Llama model's parameters (bf16, every
    gradient set), as train_llama.py's optimizer runs it."""
    from transformers import LlamaConfig, LlamaForCausalLM
    heads = hidden // 128
    config = LlamaConfig(hidden_size=hidden, intermediate_size=mlp, num_attention_heads=heads,
                         num_key_value_heads=kv_heads_of(heads, kv_heads),
                         num_hidden_layers=layers,
                         vocab_size=VOCAB)
    model = LlamaForCausalLM(config).cuda().to(torch.bfloat16)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95),
                            weight_decay=0.0, fused=True)
    return opt.step


def mean_ms(passes):
    return statistics.mean(p["ms"] for p in passes)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--hidden", type=int, nargs="+", default=sorted(SIZES))
    parser.add_argument("--tokens", type=int, nargs="+", default=[16384])
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--kv-heads", type=int, nargs="+", default=[])
    parser.add_argument("--step", type=int, nargs="+", default=[], metavar="LAYERS")
    args = parser.parse_args()
    for name in ("step", "kv_heads"):
        if getattr(args, name) and len(getattr(args, name)) != len(args.hidden):
            parser.error(f"--{name.replace('_', '-')} takes one number per --hidden")
    for tokens in args.tokens:
        if tokens % SEQ:
            parser.error(f"--tokens must be multiples of {SEQ}")
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(args.kernels)
    rows, steps = [], []
    for i, hidden in enumerate(args.hidden):
        mlp = SIZES[hidden]
        kv_heads = args.kv_heads[i] if args.kv_heads else None
        eager, coda, _, tables = decoder_layers(hidden, mlp, kv_heads=kv_heads)
        compiled = torch.compile(eager)
        for tokens in args.tokens:
            xb = torch.randn(tokens // SEQ, SEQ, hidden, device="cuda").bfloat16()
            xb.requires_grad_()
            dyb = torch.randn_like(xb)
            gemms = cublas_gemms(hidden, mlp, tokens, kv_heads)
            attention = attention_step(hidden, tokens, kv_heads)

            def floor():
                gemms()
                attention()
            cases = {"torch.compile": layer_step(compiled, xb, dyb, tables),
                     "coda": layer_step(coda, inside_a_model(xb), dyb, tables),
                     "floor": floor, "cuBLAS GEMMs": gemms, "attention": attention}
            steady = steady_ms(cases, seconds=args.seconds)
            ms = {name: mean_ms(passes) for name, passes in steady.items()}
            row = {"hidden": hidden, "mlp": mlp, "kv_heads": kv_heads_of(hidden // 128, kv_heads),
                   "tokens": tokens, "steady": steady, "ms": ms,
                   "ceiling": ms["torch.compile"] / ms["floor"],
                   "coda_over_torch_compile": ms["torch.compile"] / ms["coda"],
                   "coda_over_floor": ms["coda"] / ms["floor"]}
            rows.append(row)
            print(f"hidden {hidden}, {tokens} tokens: {steady_text(steady)}", flush=True)
            print(f"  torch.compile / floor (the most any fusion reaches) "
                  f"{row['ceiling']:.3f}x; torch.compile / coda {row['coda_over_torch_compile']:.3f}x; "
                  f"coda / floor {row['coda_over_floor']:.3f}", flush=True)
            del xb, dyb, gemms, attention, floor, cases
            torch.cuda.empty_cache()
        del eager, coda, compiled
        torch.cuda.empty_cache()
        if args.step:
            layers, tokens = args.step[i], args.tokens[0]
            head_compiled, head_gemms = lm_head_cases(hidden, tokens)
            rest = steady_ms({"LM head torch.compile": head_compiled,
                              "LM head GEMMs": head_gemms,
                              "AdamW": adamw_step(hidden, mlp, layers, kv_heads)},
                             seconds=args.seconds)
            part = {name: mean_ms(passes) for name, passes in rest.items()}
            layer = next(r for r in rows if r["hidden"] == hidden and r["tokens"] == tokens)
            ms = layer["ms"]
            top = layers * ms["torch.compile"] + part["LM head torch.compile"] + part["AdamW"]
            bottom = layers * ms["floor"] + part["LM head GEMMs"] + part["AdamW"]
            step = {"hidden": hidden, "layers": layers, "tokens": tokens, "steady": rest,
                    "torch_compile_ms": top, "floor_ms": bottom, "ceiling": top / bottom}
            steps.append(step)
            print(f"hidden {hidden}, a step of {layers} layers at {tokens} tokens: "
                  f"{steady_text(rest)}", flush=True)
            print(f"  torch.compile's layers + LM head + AdamW {top:.3f} ms, floors {bottom:.3f} "
                  f"ms: the step's ceiling {step['ceiling']:.3f}x", flush=True)
            torch.cuda.empty_cache()
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "commit": args.commit,
                       "date": datetime.date.today().isoformat(), "torch": torch.__version__,
                       "results": rows, "steps": steps}, f, indent=1)


if __name__ == "__main__":
    main()
