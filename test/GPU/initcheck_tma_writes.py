"""compute-sanitizer's initcheck does not see writes made by a GEMM that
stores through TMA: after cuBLAS's bf16 GEMM on Hopper, every read of its
output is reported uninitialized; after the fp32 GEMM, none is.

  compute-sanitizer --tool initcheck python3 initcheck_tma_writes.py bf16
  compute-sanitizer --tool initcheck python3 initcheck_tma_writes.py fp32
"""
import sys

import torch

dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[1]]
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(1000, 2048, device="cuda", dtype=dtype)
w = torch.randn(2048, 2048, device="cuda", dtype=dtype)
c = a @ w.T  # cuBLAS writes every element of c
print(sys.argv[1], (-c).float().abs().sum().item())
