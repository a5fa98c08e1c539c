"""Plain GEMM: coda's kernel vs torch.matmul (cuBLAS), bf16, side by side.

Usage (on the GPU machine, kernels from scripts/build-gpu-tests):
  python3 benchmarks/bench_gemm.py [--json out.json]
"""

import argparse
import json
import os
import statistics

import coda_runtime
import torch

BUILD = os.environ.get("CODA_GPU_TESTS", os.path.join(
    os.path.dirname(__file__), "..", "build", "gpu-tests"))

# M = 16384 tokens with the (N, K) of the Llama block GEMMs at hidden 4096,
# and square shapes.
SHAPES = [(16384, 4096, 4096), (16384, 12288, 4096), (16384, 22016, 4096),
          (16384, 4096, 11008), (4096, 4096, 4096), (8192, 8192, 8192)]


def median_ms(fn, reps=30, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.empty(1, device="cuda")
    prims = coda_runtime.Module(os.path.join(BUILD, "primitives"))
    (kernel,) = prims.kernels_of("plain_nt")
    stream = torch.cuda.current_stream().cuda_stream
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda").bfloat16()
        b = torch.randn(n, k, device="cuda").bfloat16()
        y = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        coda = median_ms(lambda: prims.launch(kernel, [a, b, y], stream))
        torch.testing.assert_close(y.float(), (a @ b.T).float(), rtol=2e-2, atol=2e-1)
        cublas = median_ms(lambda: torch.matmul(a, b.T))
        tflops = 2 * m * n * k / 1e9
        row = {"case": "gemm", "shape": {"M": m, "N": n, "K": k}, "coda_ms": coda,
               "baselines": {"cublas": cublas}}
        rows.append(row)
        print(f"M={m:6} N={n:6} K={k:6}  coda {coda:8.3f} ms ({tflops / coda:6.1f} TFLOP/s)"
              f"  cuBLAS {cublas:8.3f} ms ({tflops / cublas:6.1f} TFLOP/s)  coda/cuBLAS speed {cublas / coda:5.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
