"""The backward of the attention's Q/K/V views of the stacked projection
(coda_torch.llama._StackedHeads: one torch.cat of SDPA's three gradients)
against writing each gradient into its columns with a strided copy: alone,
on SDPA's own gradients, and in a decoder layer inside a model (both
backward forms in interleaved rounds of one process, their gradients
checked bitwise equal). bf16, 16384 tokens, L2 flushed; timing.py.

  python3 benchmarks/stacked_heads.py --kernels build/torch-kernels
"""

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import backward as B  # noqa: E402
import coda_torch  # noqa: E402
from coda_torch import llama  # noqa: E402
from timing import interleaved_ms  # noqa: E402


def copies(ctx, *grads):
    """The stacked gradient written one strided copy per gradient."""
    like = next(g for g in grads if g is not None)
    dqkv = like.new_empty(like.shape[0] * like.shape[2], sum(ctx.sizes))
    for view, grad in zip(llama._heads(dqkv, ctx.sizes, ctx.input_shape, ctx.head_dim), grads):
        if grad is None:
            view.zero_()
        else:
            view.copy_(grad)
    return dqkv, None, None, None


def alone(hidden, head_dim=128):
    """Both forms on the gradients SDPA returns for the layer's views."""
    heads = hidden // head_dim
    sizes = [hidden, hidden // 4, hidden // 4]
    shape = (B.TOKENS // B.SEQ, B.SEQ)
    qkv = torch.randn(B.TOKENS, sum(sizes), device="cuda").bfloat16().requires_grad_()
    q, k, v = llama._heads(qkv, sizes, shape, head_dim)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                           enable_gqa=heads > 1)
    grads = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))

    class Ctx:
        pass
    ctx = Ctx()
    ctx.sizes, ctx.input_shape, ctx.head_dim = sizes, shape, head_dim
    fns = {"copies": lambda: copies(ctx, *grads),
           "cat": lambda: llama._StackedHeads.backward(ctx, *grads)}
    if not torch.equal(fns["copies"]()[0], fns["cat"]()[0]):
        raise SystemExit(f"hidden {hidden}: the two backward forms differ")
    ms = {k: statistics.median(v) for k, v in interleaved_ms(fns, reps=30).items()}
    print(f"hidden {hidden}: SDPA's gradients stacked alone: one concatenation "
          f"{ms['cat']:.3f} ms, strided copies {ms['copies']:.3f} ms", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--hidden", type=int, nargs="+", default=sorted(B.SIZES))
    args = parser.parse_args()
    coda_torch.load(args.kernels)
    forms = {"copies": staticmethod(copies), "cat": llama._StackedHeads.__dict__["backward"]}
    for hidden in args.hidden:
        alone(hidden)
        mlp = B.SIZES[hidden]
        eager, coda, _, tables = B.decoder_layers(hidden, mlp)
        x = torch.randn(B.TOKENS // B.SEQ, B.SEQ, hidden, device="cuda").bfloat16()
        x.requires_grad_()
        llama._hand_on_sum_sq(x, x.detach().reshape(-1, hidden).float().square().sum(-1))
        dy = torch.randn_like(x)

        def layer(form):
            def run():
                llama._StackedHeads.backward = forms[form]
                x.grad = None
                coda.zero_grad(set_to_none=True)
                coda(x, position_embeddings=tables).backward(dy)
            return run
        fns = {form: layer(form) for form in forms}
        grads = {}
        for form, fn in fns.items():
            fn()
            grads[form] = [x.grad.clone()] + [p.grad.clone() for p in coda.parameters()]
        if not all(torch.equal(a, b) for a, b in zip(*grads.values())):
            raise SystemExit(f"hidden {hidden}: the two backward forms' gradients differ")
        ms = {k: statistics.median(v) for k, v in interleaved_ms(fns, reps=30).items()}
        llama._StackedHeads.backward = forms["cat"]
        print(f"hidden {hidden}: a layer inside a model, forward + backward: "
              f"one concatenation {ms['cat']:.3f} ms, strided copies {ms['copies']:.3f} ms",
              flush=True)
        del eager, coda


if __name__ == "__main__":
    main()
