"""Probe: does a GEMM that writes its output as 1 x 128 FP8 (codes and
scales) cost what the same GEMM writing bf16 costs, and what does it save
against torch's GEMM followed by torch.compile's quantization?

  coda-compile benchmarks/probes/group_quantize.mlir -o DIR [options]  (build machine)
  python3 benchmarks/probes/group_quantize.py DIR [NAME=DIR ...]        (GPU machine)

Prints, per shape, median ms (L2 flushed before each call, interleaved
rounds) of: coda's quantizing GEMM and its bf16 GEMM from DIR and from each
further directory (e.g. compiled under another schedule, so that the
quantizer compares with the bf16 GEMM of its own mainloop too), torch.mm
(bf16), torch.mm followed by the quantization compiled by torch.compile,
and, where torchao's sources are on PYTHONPATH (TORCHAO_FORCE_SKIP_LOADING_SO_FILES=1),
torch.mm followed by torchao's blockwise Triton quantizer (the 1 x 128 copy,
and with it the transposed 128 x 1 copy a weight gradient reads); the codes
and scales of each quantizing kernel are checked against PyTorch's
quantization of the f32 product first. Where DIR has `quantize_both` (the
1 x 128 copy and the token-major 128 x 1 copy from one epilogue), it is
checked and timed the same way, against torch.mm followed by both
quantizations (compiled, and torchao's two Triton kernels)."""

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


def quantize_rcp(y):
    """torchao's blockwise quantization: inverse scale 448 / amax in f64,
    rounded to f32; codes = y * inverse; scale = 1 / inverse."""
    m, n = y.shape
    g = y.float().view(m, n // 128, 128)
    inv = (448.0 / torch.clamp(g.abs().amax(-1), min=1e-12).double()).float()
    codes = (g * inv[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return codes.view(m, n), torch.ones_like(inv) / inv


def quantize_both(y):
    codes, scale = quantize(y)
    tcodes, tscale = quantize(y.T)
    return codes, scale, tcodes, tscale


def torchao_quantizers():
    """torchao's blockwise FP8 training prototype's Triton quantizers of an
    activation (row-major 1 x 128, and transposed 128 x 1), or None."""
    try:
        from torchao.prototype.blockwise_fp8_training import kernels
    except Exception as error:  # noqa: BLE001 - reported, the probe goes on
        print(f"torchao not available ({type(error).__name__}: {error})")
        return None
    return (kernels.triton_fp8_blockwise_act_quant_lhs,
            kernels.triton_fp8_blockwise_act_quant_transposed_lhs)


def main(directories):
    torch.empty(1, device="cuda")
    modules = {}
    for entry in directories:
        name, _, directory = entry.rpartition("=")
        modules[name or "coda"] = coda_runtime.Module(directory)
    first = next(iter(modules.values()))
    quantizers = {name: (module, module.kernels_of("quantize")[0]) for name, module in modules.items()}
    plains = {name: (module, module.kernels_of("plain")[0]) for name, module in modules.items()}
    stream = torch.cuda.current_stream().cuda_stream
    compiled = torch.compile(quantize)
    compiled_both = torch.compile(quantize_both)
    both = first.kernels_of("quantize_both") if "quantize_both" in first.functions else []
    both_rcp = (first.kernels_of("quantize_both_rcp")
                if "quantize_both_rcp" in first.functions else [])
    torchao = torchao_quantizers()
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda").bfloat16()
        b = torch.randn(n, k, device="cuda").bfloat16()
        q = torch.empty(m, n, device="cuda", dtype=torch.float8_e4m3fn)
        s = torch.empty(m, n // 128, device="cuda")
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref_codes, ref_scale = quantize(a.float() @ b.float().T)
        checks = []
        for name, (module, kq) in quantizers.items():
            q.zero_()
            module.launch(kq, [a, b, q, s], stream)
            torch.cuda.synchronize()
            codes_equal = (q.view(torch.uint8) == ref_codes.view(torch.uint8)).float().mean().item()
            scale_err = ((s - ref_scale).abs() / ref_scale).max().item()
            checks.append(f"{name} codes equal {codes_equal:.6f} scale rel err {scale_err:.2e}")
        fns = {name: (lambda mod=module, kern=kq: mod.launch(kern, [a, b, q, s], stream))
               for name, (module, kq) in quantizers.items()}
        if both:
            qt = torch.empty(n, m, device="cuda", dtype=torch.float8_e4m3fn)
            st = torch.empty(m // 128, n, device="cuda")
            first.launch(both[0], [a, b, q, s, qt, st], stream)
            torch.cuda.synchronize()
            ref_t_codes, ref_t_scale = quantize((a.float() @ b.float().T).T.contiguous())
            equal = ((q.view(torch.uint8) == ref_codes.view(torch.uint8)).float().mean().item(),
                     (qt.view(torch.uint8) == ref_t_codes.view(torch.uint8)).float().mean().item())
            scale_err = ((st.T - ref_t_scale).abs() / ref_t_scale).max().item()
            checks.append(f"both: codes equal {equal[0]:.6f}, transposed {equal[1]:.6f}, "
                          f"128 x 1 scale rel err {scale_err:.2e}")
            fns["both"] = lambda: first.launch(both[0], [a, b, q, s, qt, st], stream)
        if both_rcp:
            first.launch(both_rcp[0], [a, b, q, s, qt, st], stream)
            torch.cuda.synchronize()
            y32 = a.float() @ b.float().T
            rc, rs = quantize_rcp(y32)
            rtc, rts = quantize_rcp(y32.T.contiguous())
            # Fractions: torch's f32 product sums in another order.
            equal = ((q.view(torch.uint8) == rc.view(torch.uint8)).float().mean().item(),
                     (qt.view(torch.uint8) == rtc.view(torch.uint8)).float().mean().item())
            scale_err = max(((s - rs).abs() / rs).max().item(),
                            ((st.T - rts).abs() / rts).max().item())
            checks.append(f"both_rcp (torchao's form): codes equal {equal[0]:.6f}, "
                          f"transposed {equal[1]:.6f}, scale rel err {scale_err:.2e}")
            fns["both_rcp"] = lambda: first.launch(both_rcp[0], [a, b, q, s, qt, st], stream)
            fns["torch_mm_compiled_quantize_both"] = lambda: compiled_both(torch.mm(a, b.T))
        for name, (module, kp) in plains.items():
            fns[f"{name}_bf16"] = lambda mod=module, kern=kp: mod.launch(kern, [a, b, y], stream)
        fns["torch_mm"] = lambda: torch.mm(a, b.T)
        fns["torch_mm_compiled_quantize"] = lambda: compiled(torch.mm(a, b.T))
        if torchao:
            lhs, transposed = torchao
            codes, scales = lhs(a.float().matmul(b.float().T).bfloat16())
            # torchao rounds the bf16 product and scales by reciprocals:
            # compared with PyTorch's quantization of that bf16 product.
            ref_b_codes, _ = quantize((a.float() @ b.float().T).bfloat16())
            equal = (codes.view(torch.uint8) == ref_b_codes.view(torch.uint8)).float().mean().item()
            checks.append(f"torchao codes equal {equal:.6f} (of the bf16 product)")
            fns["torch_mm_torchao_quant"] = lambda: lhs(torch.mm(a, b.T))
            fns["torch_mm_torchao_quant_and_transposed"] = lambda: (
                lambda y: (lhs(y), transposed(y)))(torch.mm(a, b.T))
        times = {name: statistics.median(ms) for name, ms in interleaved_ms(fns, reps=30).items()}
        print(f"{m}x{n}x{k}: " + "; ".join(checks))
        print("  " + " ".join(f"{name} {t:.3f}" for name, t in times.items()))
        selected = times[f"{next(iter(modules))}_bf16"]
        for name in quantizers:
            line = (f"  {name}: / selected bf16 {times[name] / selected:.3f}"
                    f" / own bf16 {times[name] / times[name + '_bf16']:.3f}"
                    f" | torch mm+quant / it {times['torch_mm_compiled_quantize'] / times[name]:.3f}")
            if torchao:
                line += (f" | torch mm+torchao quant / it {times['torch_mm_torchao_quant'] / times[name]:.3f}"
                         f" (+transposed {times['torch_mm_torchao_quant_and_transposed'] / times[name]:.3f})")
            print(line)
        if both_rcp:
            print(f"  both_rcp: / selected bf16 {times['both_rcp'] / selected:.3f}"
                  + (f" | torch mm+torchao both / it "
                     f"{times['torch_mm_torchao_quant_and_transposed'] / times['both_rcp']:.3f}"
                     if torchao else ""))
        if both:
            line = (f"  both: / selected bf16 {times['both'] / selected:.3f}"
                    f" / quantize {times['both'] / times[next(iter(quantizers))]:.3f}"
                    f" | torch mm+both quant / it {times['torch_mm_compiled_quantize_both'] / times['both']:.3f}")
            if torchao:
                line += (f" | torch mm+torchao both / it "
                         f"{times['torch_mm_torchao_quant_and_transposed'] / times['both']:.3f}")
            print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
