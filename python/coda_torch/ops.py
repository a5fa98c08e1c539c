"""The custom ops and the compiled kernels behind them."""

import os

import coda_runtime
import torch

_modules = {}


def load(directory):
    """Loads the kernels that scripts/build-torch-kernels wrote under
    `directory` (one coda-compile output per program)."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isfile(os.path.join(path, "manifest.json")):
            _modules[name] = coda_runtime.Module(path)


def _kernels(program, function):
    if program not in _modules:
        raise RuntimeError(f"coda_torch: no kernels for {program}; call "
                           "coda_torch.load(<scripts/build-torch-kernels output>)")
    module = _modules[program]
    return module, module.kernels_of(function)


def _launch(module, kernel, *args):
    module.launch_kernel(kernel, list(args), torch.cuda.current_stream().cuda_stream)


def _check(name, **tensors):
    for arg, t in tensors.items():
        if t.dtype != torch.bfloat16 or not t.is_cuda or t.dim() != 2:
            raise ValueError(f"coda_torch.{name}: {arg} must be a 2-D bf16 CUDA "
                             f"tensor, got {t.dtype} {tuple(t.shape)} on {t.device}")


@torch.library.custom_op("coda::linear_swiglu", mutates_args=())
def linear_swiglu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """silu(x Wg^T) * (x Wu^T) for a weight whose rows interleave gate and up
    (row 2j: gate j, row 2j + 1: up j); x: T x H, w: 2F x H, bf16."""
    _check("linear_swiglu", x=x, w=w)
    if w.shape[0] % 2:
        raise ValueError("coda_torch.linear_swiglu: w needs an even number of "
                         f"rows (interleaved gate/up), got {w.shape[0]}")
    module, (forward,) = _kernels("linear_swiglu", "linear_swiglu")
    y = x.new_empty(x.shape[0], w.shape[0] // 2)
    _launch(module, forward, x.contiguous(), w.contiguous(), y)
    return y


@linear_swiglu.register_fake
def _(x, w):
    return x.new_empty(x.shape[0], w.shape[0] // 2)


@torch.library.custom_op("coda::linear_swiglu_backward", mutates_args=())
def linear_swiglu_backward(dy: torch.Tensor, x: torch.Tensor,
                           w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """dx, dW of linear_swiglu: the adjoint GEMM recomputes x W^T and writes
    dgate / dup interleaved (dAcc), then dx = dAcc W and dW = dAcc^T x."""
    module, (adjoint, data_grad, weight_grad) = _kernels(
        "linear_swiglu", "linear_swiglu_backward")
    x, w, dy = x.contiguous(), w.contiguous(), dy.contiguous().to(torch.bfloat16)
    dacc = x.new_empty(x.shape[0], w.shape[0])
    _launch(module, adjoint, x, w, dy, dacc)
    dx = torch.empty_like(x)
    _launch(module, data_grad, dacc, w, dx)
    dw = torch.empty_like(w)
    _launch(module, weight_grad, dacc, x, dw)
    return dx, dw


@linear_swiglu_backward.register_fake
def _(dy, x, w):
    return torch.empty_like(x), torch.empty_like(w)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, dy):
    x, w = ctx.saved_tensors
    return linear_swiglu_backward(dy, x, w)


linear_swiglu.register_autograd(_backward, setup_context=_setup_context)
