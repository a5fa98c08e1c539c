"""Statistics over groups of a GEMM's row written as a frontend writes them
(test/GPU/cases/frontend-groups.mlir: linalg on the output viewed as
[T, N / w, w]) and fused by coda-compile into one GEMM each, run whole by the
runtime against PyTorch: the blockwise 1 x 128 FP8 quantization's codes and
scales bit for bit (small integer operands: every product and sum exact in
f32), Qwen3's QK-norm within bf16 of the f64 computation, a MoE router's
softmax over 60 experts within f32 and its top-1 expert (the first of tied
maxima) exactly. Each run twice, bitwise equal.
"""

import json
import os

import coda_runtime
import pytest
import torch

from test_kernels import poison, run_function

BUILD = os.environ.get("CODA_GPU_TESTS", os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "gpu-tests"))
CASE = os.path.join(BUILD, "frontend-groups")


@pytest.fixture(scope="module")
def module():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.empty(1, device="cuda")
    return coda_runtime.Module(CASE)


def test_each_form_is_one_gemm():
    with open(os.path.join(CASE, "manifest.json")) as f:
        kernels = json.load(f)["kernels"]
    gemms = sorted(k["function"] for k in kernels if k["kind"] == "gemm")
    assert gemms == ["blockwise_quantize", "qk_norm", "router"]


def test_blockwise_quantize(module):
    torch.manual_seed(0)
    x = torch.randint(-4, 5, (200, 256), device="cuda").bfloat16()
    w = torch.randint(-4, 5, (384, 256), device="cuda").bfloat16()
    x[100] = 0
    codes = torch.full((200, 384), 1.0, device="cuda").to(torch.float8_e4m3fn)
    scales = poison(200, 3)
    run_function(module, "blockwise_quantize", x, w, codes, scales)
    y = (x.float() @ w.float().T).view(200, 3, 128)
    amax = y.abs().amax(-1, keepdim=True)
    scale = torch.clamp(amax, min=1e-12) / torch.full_like(amax, 448.0)
    ref = (y / scale).clamp(-448, 448).to(torch.float8_e4m3fn).view(200, 384)
    assert torch.equal(scales, scale.view(200, 3))
    assert torch.equal(codes.view(torch.uint8), ref.view(torch.uint8))
    assert not codes[100].view(torch.uint8).any()


def test_qk_norm(module):
    torch.manual_seed(0)
    x = torch.randn(200, 256, device="cuda").bfloat16()
    w = (torch.randn(512, 256, device="cuda") / 16).bfloat16()
    gamma = (torch.rand(128, device="cuda") + 0.5).bfloat16()
    out = poison(200, 512, dtype=torch.bfloat16)
    run_function(module, "qk_norm", x, w, gamma, out)
    q = (x.double() @ w.double().T).view(200, 4, 128)
    ref = q * torch.rsqrt((q * q).mean(-1, keepdim=True) + 1e-6) * gamma.double()
    ref = ref.view(200, 512)
    scale = ref.abs().max().item()
    # The projection and the normalized value each rounded to bf16, then
    # the product with the bf16 weight: three roundings.
    torch.testing.assert_close(out.double(), ref, rtol=3e-2, atol=1e-2 * scale)


def test_router(module):
    torch.manual_seed(0)
    # Small integers: every logit exact in f32, many rows with tied maxima.
    x = torch.randint(-2, 3, (200, 256), device="cuda").bfloat16()
    w = torch.randint(-2, 3, (60, 256), device="cuda").bfloat16()
    x[100] = 0
    probs = poison(200, 60)
    expert = torch.full((200,), -1, dtype=torch.int64, device="cuda")
    run_function(module, "router", x, w, probs, expert)
    logits = x.double() @ w.double().T
    torch.testing.assert_close(probs.double(), torch.softmax(logits, -1),
                               rtol=1e-5, atol=1e-7)
    first = (logits == logits.amax(-1, keepdim=True)).double().argmax(-1)
    assert torch.equal(expert, first)
    ties = ((logits == logits.amax(-1, keepdim=True)).sum(-1) > 1).sum().item()
    assert ties > 10 and expert[100].item() == 0


def test_head_norm_backward():
    """The per-head RMSNorm's derived backward (cases/group-norm-backward.mlir,
    compiled with --derive-backward) against PyTorch's autograd of the same
    forward in f64 from the same bf16 operands: dx and dW within bf16, dgamma
    within f32 accumulation."""
    module = coda_runtime.Module(os.path.join(BUILD, "group-norm-backward"))
    torch.manual_seed(0)
    x = torch.randn(200, 256, device="cuda").bfloat16()
    w = (torch.randn(512, 256, device="cuda") / 16).bfloat16()
    gamma = torch.rand(512, device="cuda") + 0.5
    dy = torch.randn(200, 512, device="cuda").bfloat16()
    dx, dw, dgamma = poison(200, 256, dtype=torch.bfloat16), \
        poison(512, 256, dtype=torch.bfloat16), poison(512)
    run_function(module, "head_norm_backward", x, w, gamma, dy, dx, dw, dgamma)
    xr, wr, gr = (t.double().requires_grad_() for t in (x, w, gamma))
    q = (xr @ wr.T).view(200, 4, 128)
    y = (q * torch.rsqrt((q * q).mean(-1, keepdim=True) + 1e-6)).view(200, 512) * gr
    y.backward(dy.double())
    for got, ref in ((dx, xr.grad), (dw, wr.grad), (dgamma, gr.grad)):
        scale = ref.abs().max().item()
        torch.testing.assert_close(got.double(), ref, rtol=2e-2, atol=1e-2 * scale)
