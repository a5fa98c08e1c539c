"""The host's time per training step against the GPU's: the Llama of
benchmarks/train_llama.py (4 layers x hidden 2048, or 2 layers x hidden
4096 with 8 K/V heads; fused AdamW, causal attention) with coda's patch and
under torch.compile; each of ten steps starts on an idle GPU, and the time
until the host has launched the forward, the whole step, and the step to
its end on the GPU are medians; then Python's profile of three coda steps
by own time. Where the host's step is shorter than the GPU's, a loop that
lets the host run ahead keeps the GPU busy.

  PYTHONPATH=<runtime> python3 benchmarks/host_time.py <torch kernels> 2048
"""
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch  # noqa: E402
from host_gaps import STEP_MODELS  # noqa: E402
from train_llama import causal_attention  # noqa: E402


def measure(mode, hidden):
    layers, mlp, heads, kv_heads = STEP_MODELS[hidden]
    config = transformers.LlamaConfig(vocab_size=32768, hidden_size=hidden,
                                      intermediate_size=mlp, num_hidden_layers=layers,
                                      num_attention_heads=heads, num_key_value_heads=kv_heads,
                                      max_position_embeddings=2048, use_cache=False)
    causal_attention(config)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).cuda().bfloat16()
    if mode == "coda":
        coda_torch.llama.apply(model)
    fn = torch.compile(model) if mode == "torch_compile" else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    ids = torch.randint(0, 32768, (4, 2048), device="cuda")

    def step():
        loss = fn(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(8):
        step()
    forward, host, total = [], [], []
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = fn(input_ids=ids, labels=ids).loss
        t1 = time.perf_counter()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        forward.append((t1 - t0) * 1e3)
        host.append((t2 - t0) * 1e3)
        total.append((t3 - t0) * 1e3)
    print(f"{mode} h{hidden}: host forward {statistics.median(forward):.2f} ms, host step "
          f"{statistics.median(host):.2f} ms, synchronized step {statistics.median(total):.2f} ms",
          flush=True)
    if mode == "coda":
        torch.cuda.synchronize()
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(3):
            step()
        profile.disable()
        torch.cuda.synchronize()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(30)
        print(out.getvalue())


def main():
    coda_torch.load(sys.argv[1])
    hidden = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    for mode in ("coda", "torch_compile"):
        measure(mode, hidden)


if __name__ == "__main__":
    main()
