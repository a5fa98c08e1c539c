"""The weight-gradient GEMMs of decoder layers at hidden 2048 and 4096
(dAcc^T x, 16384 tokens: weight rows x columns x tokens), coda's plain
dW kernel from two builds, and cuBLAS: interleaved rounds (L2 flushed) and
back to back at the power limit (timing.steady_ms: time, energy, power,
clock per call):

  python3 benchmarks/weight_grad_tiles.py --kernels selected=build/torch-kernels \\
      wide=DIR

where DIR is a copy of build/torch-kernels whose manifests forbid the
128 x 128 variants the launch chooses by waves (GemmConfigAttr's
wave_cost, byWaves): their `wave_cost` raised, e.g. to 100000, so that
every launch takes the 128 x 256 kernel.
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from backward import SIZES  # noqa: E402
import coda_torch  # noqa: E402
from coda_torch import ops  # noqa: E402
from layer_gemms import check_product, layer_gemms, layout_operands  # noqa: E402
from timing import interleaved_ms, steady_ms, steady_text  # noqa: E402

# The layers' weight gradients (tn), M x N x K = weight rows x columns x
# tokens.
SHAPES = [(m, n, k) for hidden, mlp in sorted(SIZES.items())
          for _, layout, m, n, k in layer_gemms(hidden, mlp) if layout == "tn"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", nargs="+", required=True, metavar="NAME=DIR")
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    builds = {}
    for spec in args.kernels:
        name, directory = spec.split("=", 1)
        coda_torch.load(directory)
        builds[name] = ops._kernels("swiglu_mlp", "swiglu_mlp_backward", "grad:gemm0.rhs")
    for m, n, k in SHAPES:
        a, b, y, lhs, rhs = layout_operands("tn", m, n, k)
        fns = {name: (lambda module=module, kernel=kernel: ops._launch(module, kernel, a, b, y))
               for name, (module, (kernel,)) in builds.items()}
        fns["cublas"] = lambda: lhs @ rhs
        reference = (lhs @ rhs).float()
        for name in builds:
            fns[name]()
            check_product(y, reference)
        rounds = interleaved_ms(fns)
        steady = steady_ms(fns, seconds=args.seconds)
        line = f"{m} x {n} x {k}: interleaved " + ", ".join(
            f"{name} {statistics.median(times):.3f}" for name, times in rounds.items())
        line += " | steady " + steady_text(steady)
        print(line, flush=True)
        del a, b, y, lhs, rhs, reference


if __name__ == "__main__":
    main()
