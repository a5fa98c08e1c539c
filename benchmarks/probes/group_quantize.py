"""Probe: does a GEMM that writes its output as 1 x 128 FP8 (codes and
scales) cost what the same GEMM writing bf16 costs, and what does it save
against torch's GEMM followed by torch.compile's quantization?

  coda-compile benchmarks/probes/group_quantize.mlir -o DIR   (build machine)
  python3 benchmarks/probes/group_quantize.py DIR              (GPU machine)

Prints, per shape, median ms (L2 flushed before each call, interleaved
rounds) of: coda's quantizing GEMM, coda's bf16 GEMM, torch.mm (bf16), and
torch.mm followed by the quantization compiled by torch.compile; the codes
and scales of coda's kernel are checked against PyTorch's quantization of
the f32 product first."""

import math
import os
import sys

import coda_runtime
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from timing import interleaved_ms  # noqa: E402
import statistics  # noqa: E402

SHAPES = [(8192, 4096, 4096), (16384, 4096, 4096), (16384, 14336, 4096), (16384, 4096, 14336)]


def quantize(y):
    m, n = y.shape
    g = y.float().view(m, n // 128, 128)
    scale = torch.clamp(g.abs().amax(-1), min=1e-12) / torch.full((1,), 448.0, device=y.device)
    codes = (g / scale[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return codes.view(m, n), scale


def main(directory):
    torch.empty(1, device="cuda")
    module = coda_runtime.Module(directory)
    (kq,) = module.kernels_of("quantize")
    (kp,) = module.kernels_of("plain")
    stream = torch.cuda.current_stream().cuda_stream
    compiled = torch.compile(quantize)
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda").bfloat16()
        b = torch.randn(n, k, device="cuda").bfloat16()
        q = torch.empty(m, n, device="cuda", dtype=torch.float8_e4m3fn)
        s = torch.empty(m, n // 128, device="cuda")
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        module.launch(kq, [a, b, q, s], stream)
        ref_codes, ref_scale = quantize(a.float() @ b.float().T)
        torch.cuda.synchronize()
        codes_equal = (q.view(torch.uint8) == ref_codes.view(torch.uint8)).float().mean().item()
        scale_err = ((s - ref_scale).abs() / ref_scale).max().item()
        fns = {
            "coda_quantize": lambda: module.launch(kq, [a, b, q, s], stream),
            "coda_bf16": lambda: module.launch(kp, [a, b, y], stream),
            "torch_mm": lambda: torch.mm(a, b.T),
            "torch_mm_compiled_quantize": lambda: compiled(torch.mm(a, b.T)),
        }
        times = {name: statistics.median(ms) for name, ms in interleaved_ms(fns, reps=30).items()}
        print(f"{m}x{n}x{k}: codes equal {codes_equal:.6f}, scale rel err {scale_err:.2e} | " +
              " ".join(f"{name} {t:.3f}" for name, t in times.items()) +
              f" | quantize/bf16 {times['coda_quantize'] / times['coda_bf16']:.3f}"
              f" | torch mm+quant / coda quantize {times['torch_mm_compiled_quantize'] / times['coda_quantize']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
