"""Probe: Gemma-2's soft-capped LM head + cross-entropy (logit =
30 tanh(x / 30)) as one GEMM with the loss in its epilogue, against torch
eager and torch.compile; beside it the cap's variants of
softcap_lm_head.mlir and the head without the cap.

  coda-compile benchmarks/probes/softcap_lm_head.mlir -o DIR   (build machine)
  python3 benchmarks/probes/softcap_lm_head.py DIR             (GPU machine)

Prints median ms (L2 flushed before each call, interleaved rounds) and
torch.compile / coda for each, after checking each loss against the same
computation in f32 from the f32 product."""

import os
import statistics
import sys

import coda_runtime
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import interleaved_ms  # noqa: E402

TOKENS, HIDDEN, VOCAB, CAP = 16384, 2048, 32768, 30.0


def loss(x, w, t, cap):
    logits = (x @ w.T).float()
    if cap:
        logits = cap * torch.tanh(logits / cap)
    return F.cross_entropy(logits, t, reduction="none", ignore_index=-100)


def main(directory):
    torch.manual_seed(0)
    module = coda_runtime.Module(directory)
    stream = torch.cuda.current_stream().cuda_stream
    x = torch.randn(TOKENS, HIDDEN, device="cuda").bfloat16()
    # Logits of about 10 at one standard deviation: the cap bends the tail.
    w = (torch.randn(VOCAB, HIDDEN, device="cuda") * 10 * HIDDEN ** -0.5).bfloat16()
    t = torch.randint(0, VOCAB, (TOKENS,), device="cuda")
    t[::7] = -100
    capped = torch.compile(lambda x, w, t: loss(x, w, t, CAP))
    plain = torch.compile(lambda x, w, t: loss(x, w, t, 0.0))
    fns = {"torch_compile_capped": lambda: capped(x, w, t),
           "torch_eager_capped": lambda: loss(x, w, t, CAP),
           "torch_compile_plain": lambda: plain(x, w, t),
           "torch_mm": lambda: torch.mm(x, w.T)}
    want = {True: loss(x.float(), w.float(), t, CAP), False: loss(x.float(), w.float(), t, 0.0)}
    for name in module.functions:
        out = torch.empty(TOKENS, device="cuda")
        args = [x, w, t, out]
        module.launch_function(name, args, stream)
        ref = want[name != "lm_head"]
        err = ((out - ref).abs().max() / ref.abs().max()).item()
        print(f"{name}: max err / max {err:.2e}")
        assert err < 1e-2 if "afn" in name else err < 2e-3, err
        fns[name] = lambda name=name, args=args: module.launch_function(name, args, stream)
    times = {k: statistics.median(v) for k, v in interleaved_ms(fns, reps=20).items()}
    for k, v in times.items():
        base = times["torch_compile_plain" if k == "lm_head" else "torch_compile_capped"]
        print(f"{k:24s} {v:7.3f} ms   torch.compile / this {base / v:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
