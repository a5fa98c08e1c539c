"""Fused FP8 patterns against the same chain in torch eager and torch.compile
(with torch._scaled_mm), side by side in one process.

  PYTHONPATH=<runtime>:benchmarks python3 benchmarks/fp8_patterns.py \\
      --kernels build/gpu-tests/fp8 --out fp8-patterns.json

Case `rowwise_quantize` (test/GPU/cases/fp8.mlir's fp8_rowwise_quantize):
an FP8 GEMM (e4m3 operands, row-wise scales) whose output is the next FP8
GEMM's operand under delayed per-tensor scaling, as Transformer Engine
trains: the dequantized output y multiplied by the quantization scale of
the last step, clamped to e4m3's range and rounded to e4m3, and the amax
of |y| for the next step's scale. coda runs one kernel (the e4m3 tensor and
per-row-block maxima of |y|) and takes the amax of those partials; PyTorch
runs _scaled_mm to a bf16 y, then the quantization and the amax
(torch.compile fuses those two into its own kernels). `_scaled_mm` runs
with fast accumulation, the accuracy coda's kernels have (docs/performance.md,
"FP8 GEMMs"); `--promoting` adds the chain with cuBLAS's promoting
accumulation. Each result is checked against eager's first: the e4m3 codes
agree but for neighbours at rounding boundaries (at most 5 %: PyTorch rounds
y to bf16 before quantizing it, coda quantizes its f32 value), the amax
within 1 %. Ratios
are the median per-round ratio of the baseline's time to coda's;
`coda_gemm_bf16_out` is coda's FP8 GEMM alone (fp8_rowwise, bf16 out), for
what the quantizing epilogue adds to it; `--variant NAME=DIR` times the
kernel of another build as `coda_NAME`.
"""

import argparse

import coda_runtime
import torch

from timing import against, interleaved_ms, write_ratio_results

E4M3_MAX = 448.0
SHAPES = [(16384, 2048, 2048), (16384, 5632, 2048), (16384, 4096, 4096),
          (16384, 11008, 4096), (16384, 8192, 8192)]


def quantize_rows(x):
    scale = x.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / E4M3_MAX
    return (x / scale).to(torch.float8_e4m3fn), scale.float()


def torch_chain(fast):
    def chain(a8, w8, sa, sw, qs):
        y = torch._scaled_mm(a8, w8.T, scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16,
                             use_fast_accum=fast)
        q = (y.float() * qs).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        return q, y.float().abs().amax()
    return chain


def check(q, amax, q_ref, amax_ref):
    differ = (q.view(torch.uint8) != q_ref.view(torch.uint8)).float().mean().item()
    if differ > 0.05:
        raise AssertionError(f"{differ:.2%} of the e4m3 codes differ")
    rel = abs(amax.item() - amax_ref.item()) / amax_ref.item()
    if rel > 1e-2:
        raise AssertionError(f"amax {amax.item()} against {amax_ref.item()}")
    return differ


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True, help="coda-compile output of fp8.mlir")
    parser.add_argument("--shape", nargs=3, type=int, action="append", metavar=("M", "N", "K"))
    parser.add_argument("--modes", nargs="*", default=["default", "max-autotune-no-cudagraphs"])
    parser.add_argument("--promoting", action="store_true")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                        help="also time the kernel of another coda-compile output of "
                             "fp8.mlir, in the same rounds")
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    stream = torch.cuda.current_stream().cuda_stream
    module = coda_runtime.Module(args.kernels)
    (kernel,) = module.kernels_of("fp8_rowwise_quantize")
    (gemm,) = module.kernels_of("fp8_rowwise")
    variants = {}
    for spec in args.variant:
        name, path = spec.split("=", 1)
        other = coda_runtime.Module(path)
        variants[name] = (other, other.kernels_of("fp8_rowwise_quantize")[0])
    rows = []
    for m, n, k in (args.shape or SHAPES):
        torch.manual_seed(0)
        a8, sa = quantize_rows(torch.randn(m, k, device="cuda"))
        w8, sw = quantize_rows(torch.randn(n, k, device="cuda") * k ** -0.5)
        sw_row = sw.T.contiguous()
        eager = torch_chain(fast=True)
        _, amax0 = eager(a8, w8, sa, sw_row, 1.0)
        # The last step's scale: this output's amax, a little larger.
        qs = E4M3_MAX / (1.25 * amax0.item())
        q = torch.empty(m, n, device="cuda", dtype=torch.float8_e4m3fn)
        parts = torch.empty(m, -(-n // 128), device="cuda")

        def coda():
            module.launch(kernel, [a8, w8, sa.view(m), sw.view(n), qs, q, parts], stream)
            return q, parts.amax()

        # coda's FP8 GEMM alone with a bf16 output, for what the quantizing
        # epilogue costs over it.
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        fns = {"coda": coda, "torch_eager": lambda: eager(a8, w8, sa, sw_row, qs),
               "coda_gemm_bf16_out": lambda: module.launch(
                   gemm, [a8, w8, sa.view(m), sw.view(n), y], stream)}
        if args.promoting:
            promoting = torch_chain(fast=False)
            fns["torch_eager_promoting"] = lambda: promoting(a8, w8, sa, sw_row, qs)
        for name, (other, other_kernel) in variants.items():
            def run_variant(other=other, other_kernel=other_kernel):
                other.launch(other_kernel, [a8, w8, sa.view(m), sw.view(n), qs, q, parts],
                             stream)
                return q, parts.amax()
            fns[f"coda_{name}"] = run_variant
        for mode in args.modes:
            key = "torch_compile" if mode == "default" else "torch_compile_max_autotune"
            compiled = torch.compile(torch_chain(fast=True),
                                     mode=None if mode == "default" else mode)
            fns[key] = lambda compiled=compiled: compiled(a8, w8, sa, sw_row, qs)
            if args.promoting:
                compiled_p = torch.compile(torch_chain(fast=False),
                                           mode=None if mode == "default" else mode)
                fns[key + "_promoting"] = (lambda compiled_p=compiled_p:
                                           compiled_p(a8, w8, sa, sw_row, qs))
        q_ref, amax_ref = (t.clone() for t in eager(a8, w8, sa, sw_row, qs))
        differ = {name: check(*fn(), q_ref, amax_ref) for name, fn in fns.items()
                  if name != "coda_gemm_bf16_out"}
        times = interleaved_ms(fns)
        ms, baselines, ratios = against(times, "coda")
        row = {"case": "rowwise_quantize", "shape": {"M": m, "N": n, "K": k}, "coda_ms": ms,
               "baselines": baselines, "ratios": ratios, "codes_differing_from_eager": differ}
        rows.append(row)
        print(f"rowwise_quantize {m}x{n}x{k}: coda {row['coda_ms']:.3f} ms; " + ", ".join(
            f"{name} {t:.3f} ms ({row['ratios'][name]:.3f}x)"
            for name, t in row["baselines"].items()), flush=True)
        torch._dynamo.reset()
        del a8, w8, q, parts, q_ref, y
        torch.cuda.empty_cache()
        geomean = write_ratio_results(args.out, args.commit, rows)
    print("geometric mean: " + ", ".join(f"{k} {g:.3f}x" for k, g in geomean.items()))


if __name__ == "__main__":
    main()
