"""PyTorch ops backed by coda kernels compiled ahead of time.

    import coda_torch
    coda_torch.load("build/torch-kernels")      # scripts/build-torch-kernels
    y = coda_torch.swiglu_mlp(x, w_gate_up, w_down)  # autograd-aware, torch.compile-able
    y = coda_torch.swiglu_mlp_fp8(x, w_gate_up, w_down)  # its GEMMs in FP8 (row-wise)
    loss = coda_torch.linear_cross_entropy(h, w_vocab, targets).mean()
    coda_torch.llama.apply(model)                # decoder layers, LM head + loss
    coda_torch.llama.apply(model, fp8=True)      # the MLPs' GEMMs in FP8

Each op runs as a torch.autograd.Function in eager mode and, while
torch.compile traces, as a torch.library custom op (opaque to the compiler,
traced with its fake implementation) with the same autograd formula; the
backward runs the kernels that `coda-compile --derive-backward` derived from
the forward program (swiglu_mlp_fp8's, whose operands are FP8, are written
in its program). Needs the `coda_runtime` extension
(scripts/build-runtime) and a CUDA device.
"""

from . import llama
from .ops import (linear_cross_entropy, linear_norm_cross_entropy, linear_norm_qkv_rope,
                  linear_qkv_rope, linear_residual_norm, linear_swiglu, load, norm_swiglu_mlp,
                  quantize_rows, scale_columns, set_dependent_launch, sum_squares, swiglu_mlp,
                  swiglu_mlp_fp8)

__all__ = ["linear_cross_entropy", "linear_norm_cross_entropy", "linear_norm_qkv_rope",
           "linear_qkv_rope", "linear_residual_norm", "linear_swiglu", "llama", "load",
           "norm_swiglu_mlp", "quantize_rows", "scale_columns", "set_dependent_launch",
           "sum_squares", "swiglu_mlp", "swiglu_mlp_fp8"]
