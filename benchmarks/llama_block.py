"""The shipped Llama blocks as the compiler's function programs
(examples/llama-block-h*.mlir, imported linalg, fused by coda-compile) against
the same block in PyTorch, eager and under torch.compile, in one process:

  PYTHONPATH=<runtime>:benchmarks:python python3 benchmarks/llama_block.py \\
      [--variant NAME=DIR ...] [--out results.json]

coda runs the block through the runtime's launch_function with causal
attention (PyTorch's SDPA) as its host callback; PyTorch runs the block
test/GPU/test_functions.py checks coda against (`reference` in bf16, which
rounds where the linalg block does), with the same attention. Kernels come
from scripts/build-gpu-tests (CODA_GPU_TESTS); `--variant NAME=DIR` times the
blocks of another build as well, in the same rounds. Each coda build's
output is checked against PyTorch's first (test_functions' tolerance).
Rounds are interleaved (timing.interleaved_ms, L2 flushed before each run).
"""
import argparse
import datetime
import json
import os
import statistics
import sys

import coda_runtime
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "GPU"))
from test_functions import (BLOCKS, BUILD, attention_callback,  # noqa: E402
                            make_inputs, reference, relative_error, run_block)
from timing import interleaved_ms, median_ratio  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", nargs="*", default=["llama-block-h2048", "llama-block-h4096"])
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    builds = {"coda": BUILD, **dict(v.split("=", 1) for v in args.variant)}
    results = []
    for name, tokens, hidden, heads, mlp in BLOCKS:
        if name not in args.blocks:
            continue
        inputs = make_inputs(tokens, hidden, heads, mlp)
        ref_out, _ = reference(inputs, heads, torch.float32)
        bf_out, _ = reference(inputs, heads, torch.bfloat16)
        bound = 1.5 * relative_error(bf_out, ref_out) + 1e-3
        fns = {}
        for build, path in builds.items():
            module = coda_runtime.Module(os.path.join(path, name))
            module.set_callback("attention", attention_callback(heads))
            workspace = torch.empty(module.workspace_bytes("block"), device="cuda",
                                    dtype=torch.uint8)
            out, _ = run_block(module, inputs, tokens, hidden, workspace)
            error = relative_error(out, ref_out)
            assert error <= bound, f"{build} {name}: error {error:.2e} above {bound:.2e}"
            fns[build] = (lambda m=module, w=workspace:
                          run_block(m, inputs, tokens, hidden, w))
        fns["torch_eager"] = lambda: reference(inputs, heads, torch.bfloat16)
        compiled = torch.compile(reference)
        compiled(inputs, heads, torch.bfloat16)
        fns["torch_compile"] = lambda: compiled(inputs, heads, torch.bfloat16)
        times = interleaved_ms(fns, reps=args.reps)
        row = {"block": name, "tokens": tokens, "hidden": hidden,
               "ms": {k: statistics.median(t) for k, t in times.items()},
               "ratios": {f"{base}/{build}": median_ratio(times[base], times[build])
                          for build in builds for base in times if base != build}}
        results.append(row)
        print(name, " ".join(f"{k} {v:.3f} ms" for k, v in row["ms"].items()), flush=True)
        for key, ratio in row["ratios"].items():
            print(f"  {key}: {ratio:.3f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(),
                       "date": datetime.date.today().isoformat(),
                       "torch": torch.__version__, "builds": builds,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
