"""compute-sanitizer's initcheck does not see writes made by a kernel that
stores through TMA: after cuBLAS's bf16 GEMM on Hopper, every read of its
output is reported uninitialized; after the fp32 GEMM, none is. The same
holds for the attention that test_functions.py's Llama block calls back
into (F.scaled_dot_product_attention, causal, bf16): copying its output
with cudaMemcpy, as the block's callback does, reports every 32 bytes of it
with the default backend (cuDNN / flash attention on Hopper) and nothing
with the math backend.

  compute-sanitizer --tool initcheck python3 initcheck_tma_writes.py bf16
  compute-sanitizer --tool initcheck python3 initcheck_tma_writes.py fp32
  compute-sanitizer --tool initcheck python3 initcheck_tma_writes.py sdpa
  compute-sanitizer --tool initcheck python3 initcheck_tma_writes.py sdpa-math
"""
import sys
from contextlib import nullcontext

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from test_functions import causal_attention

mode = sys.argv[1]
if mode in ("bf16", "fp32"):
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[mode]
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(1000, 2048, device="cuda", dtype=dtype)
    w = torch.randn(2048, 2048, device="cuda", dtype=dtype)
    c = a @ w.T  # cuBLAS writes every element of c
    print(mode, (-c).float().abs().sum().item())
else:
    # The t200 block's attention: 200 tokens, 4 heads of 64.
    tokens, hidden, heads = 200, 256, 4
    q, k, v = (torch.randn(tokens, hidden, device="cuda").bfloat16() for _ in range(3))
    out = torch.empty(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    backend = sdpa_kernel([SDPBackend.MATH]) if mode == "sdpa-math" else nullcontext()
    with backend:
        out.copy_(causal_attention(q, k, v, heads))  # as attention_callback does
    print(mode, out.float().abs().sum().item(), f"{tokens * hidden * 2} bytes")
