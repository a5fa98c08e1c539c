"""Probe: a Q / K projection with a per-head RMSNorm and RoPE (Qwen3,
OLMo-2) as one GEMM whose epilogue takes each head's statistic, against
torch eager and torch.compile's projection + norm + rotation.

  coda-compile benchmarks/probes/qk_norm_rope.mlir -o DIR   (build machine)
  python3 benchmarks/probes/qk_norm_rope.py DIR             (GPU machine)

Prints, per shape, median ms (L2 flushed before each call, interleaved
rounds) and the ratios, after checking coda's output against the same
computation in f32 from the f32 product (bf16 tolerance)."""

import os
import statistics
import sys

import coda_runtime
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import interleaved_ms  # noqa: E402

# (tokens, hidden, heads): Q of an 8B layer, its K (GQA 8), Q of a 1.7B one.
SHAPES = [(16384, 4096, 32), (16384, 4096, 8), (16384, 2048, 16)]
EPS = 1e-6


def rotate_half(h):
    return torch.cat([-h[..., 64:], h[..., :64]], -1)


def norm_rope(y, gamma, cos, sin):
    t, n = y.shape
    h = y.view(t, n // 128, 128).float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * gamma
    c, s = cos.float()[:, None, :], sin.float()[:, None, :]
    return (h * c + rotate_half(h) * s).view(t, n)


def torch_qk(x, w, gamma, cos, sin):
    """The projection, then the norm in f32 and the rotation, as the model
    code writes them (Hugging Face's Qwen3)."""
    return norm_rope(x @ w.T, gamma, cos, sin).to(x.dtype)


def main(directory):
    torch.empty(1, device="cuda")
    module = coda_runtime.Module(directory)
    (kernel,) = module.kernels_of("qk_norm_rope")
    stream = torch.cuda.current_stream().cuda_stream
    compiled = torch.compile(torch_qk)
    for t, hidden, heads in SHAPES:
        n = heads * 128
        x = torch.randn(t, hidden, device="cuda").bfloat16()
        w = (torch.randn(n, hidden, device="cuda") * hidden ** -0.5).bfloat16()
        gamma = 1 + 0.1 * torch.randn(128, device="cuda")
        pos = torch.arange(t, device="cuda").float()[:, None] % 4096
        freq = 10000.0 ** (-torch.arange(0, 64, device="cuda").float() / 64)
        angle = torch.cat([pos * freq, pos * freq], 1)
        cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
        y = torch.empty(t, n, device="cuda", dtype=torch.bfloat16)
        args = [x, w, gamma.repeat(heads), cos, sin, y]
        module.launch(kernel, args, stream)
        want = norm_rope(x.float() @ w.float().T, gamma, cos, sin)
        err = ((y.float() - want).abs().max() / want.abs().max()).item()
        fns = {
            "coda": lambda: module.launch(kernel, args, stream),
            "torch_eager": lambda: torch_qk(x, w, gamma, cos, sin),
            "torch_compile": lambda: compiled(x, w, gamma, cos, sin),
            "torch_mm": lambda: torch.mm(x, w.T),
        }
        times = {k: statistics.median(v) for k, v in interleaved_ms(fns, reps=30).items()}
        print(f"{t}x{n}x{hidden} ({heads} heads): max err / max {err:.2e} | "
              + " ".join(f"{k} {v:.3f}" for k, v in times.items())
              + f" | compile / coda {times['torch_compile'] / times['coda']:.3f}"
              + f" | eager / coda {times['torch_eager'] / times['coda']:.3f}"
              + f" | coda / mm {times['coda'] / times['torch_mm']:.3f}")
        assert err < 2e-2, err


if __name__ == "__main__":
    main(sys.argv[1])
