"""GPU correctness of the fused patterns (test/GPU/cases/patterns.mlir), each
run whole by the runtime (GEMM kernels and partial finishes in order) against
a float64 PyTorch reference; shapes with tails, one token, and the benchmark
size at hidden 4096, each run twice and bitwise equal. Tolerances as in test_kernels.py: bf16 outputs carry one
bf16 rounding, f32 outputs only f32 accumulation order.
"""

import os
import sys

import coda_runtime
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from patterns import PATTERNS  # noqa: E402
from test_kernels import run_twice  # noqa: E402

BUILD = os.environ.get("CODA_GPU_TESTS", os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "gpu-tests"))

# (tokens, hidden, mlp, vocab)
SHAPES = [(200, 256, 320, 1000), (1, 128, 192, 200), (300, 384, 1000, 5000),
          (16384, 4096, 11008, 32768)]


@pytest.fixture(scope="module")
def module():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.empty(1, device="cuda")
    return coda_runtime.Module(os.path.join(BUILD, "patterns"))


def close(out, ref):
    scale = ref.abs().max().item() + 1e-30
    if out.dtype == torch.bfloat16:
        torch.testing.assert_close(out.double(), ref, rtol=8e-3, atol=2e-3 * scale)
    else:
        torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_pattern(module, pattern, shape):
    torch.manual_seed(0)
    t = pattern.make(*shape)
    for out in pattern.written(t):
        out.fill_(float("nan"))
    args = pattern.coda_args(t)
    run_twice(lambda: module.launch_function(pattern.function, args,
                                             torch.cuda.current_stream().cuda_stream), args)
    ref = pattern.reference(t)
    for name, out in pattern.outputs(t).items():
        close(out, ref[name])
