"""The custom ops and the compiled kernels behind them."""

import os
from typing import Optional

import coda_runtime
import torch

_modules = {}
# set_dependent_launch's setting, which load gives each module it loads
# (None: the runtime's default, on).
_dependent_launch = None


def load(directory):
    """Loads the kernels that scripts/build-torch-kernels wrote under
    `directory` (one coda-compile output per program)."""
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isfile(os.path.join(path, "manifest.json")):
            _modules[name] = coda_runtime.Module(path)
            if _dependent_launch is not None:
                _modules[name].dependent_launch = _dependent_launch


def set_dependent_launch(enabled: bool) -> None:
    """Whether coda's kernels are launched with programmatic stream
    serialization, each scheduled as the kernel before it in the stream
    exits (it waits for that kernel before touching memory;
    docs/KernelABI.md, dependent_launch). On by default; off, each is
    launched after the one before has ended."""
    global _dependent_launch
    _dependent_launch = bool(enabled)
    for module in _modules.values():
        module.dependent_launch = _dependent_launch


def _kernels(program, function, *roles):
    """The module of `program` and the names of `function`'s kernels with
    `roles`, in that order (the roles the compiler gives each kernel:
    "forward:gemm0", "adjoint:gemm0", "grad:gemm0.lhs", ...; KernelABI.md)."""
    if program not in _modules:
        raise RuntimeError(f"coda_torch: no kernels for {program}; call "
                           "coda_torch.load(<scripts/build-torch-kernels output>)")
    module = _modules[program]
    return module, [module.kernel_for(function, role) for role in roles]


# The kernels of a GEMM's derived backward that _gemm_backward runs.
_GEMM_BACKWARD = ("adjoint:gemm0", "grad:gemm0.lhs", "grad:gemm0.rhs")


def _launch(module, kernel, *args):
    # The current stream's handle without a torch.cuda.Stream object (what
    # Inductor's generated code calls): a few microseconds less per launch.
    stream = torch._C._cuda_getCurrentRawStream(args[0].get_device())
    module.launch_kernel(kernel, list(args), stream)


def _gemm_backward(module, kernels, x, w, *adjoint_inputs, need_x, need_w, extra_outputs=(),
                   dacc=None):
    """The derived backward of a GEMM x W^T: the adjoint kernel writes dAcc
    (T x rows of w; into `dacc` if given), then `extra_outputs` (gradients
    of its tile inputs, partials of its row and column inputs'), from x, w
    and `adjoint_inputs`; then dx = dAcc W and dW = dAcc^T x, each only if
    needed (else an empty tensor, _skipped_like)."""
    adjoint, data_grad, weight_grad = kernels
    x, w = x.contiguous(), w.contiguous()
    if dacc is None:
        dacc = x.new_empty(x.shape[0], w.shape[0])
    _launch(module, adjoint, x, w, *adjoint_inputs, dacc, *extra_outputs)
    return _operand_grads(module, data_grad, weight_grad, dacc, x, w, need_x, need_w)


def _operand_grads(module, data_grad, weight_grad, dacc, x, w, need_x, need_w):
    """dx = dAcc W and dW = dAcc^T x of a GEMM x W^T (x, w contiguous), each
    only if needed (else an empty tensor, _skipped_like)."""
    dx, dw = _skipped_like(x, need_x), _skipped_like(w, need_w)
    if need_x:
        _launch(module, data_grad, dacc, w, dx)
    if need_w:
        _launch(module, weight_grad, dacc, x, dw)
    return dx, dw


# A gradient nobody needs (of an input that does not require grad: a frozen
# weight) is not computed: its GEMM is not launched, and the backward
# kernels return an empty tensor in its place (a custom op returns
# tensors), which the autograd formula turns into None (_needed).
def _skipped_like(t, needed):
    """The tensor a gradient shaped like `t` is written into, or the empty
    tensor in its place where it is not needed (real and fake alike)."""
    return torch.empty_like(t) if needed else t.new_empty(0)


def _needed(grad, needed):
    """What the autograd formula returns for a gradient: None if unneeded."""
    return grad if needed else None


class _Op:
    """An op with two paths to the same kernels: in eager mode a
    torch.autograd.Function, whose calls cost little host time; while
    torch.compile traces, a torch.library custom op (opaque to the compiler,
    traced with its fake implementation) with the same autograd formula.

    `forward(*inputs)` and `backward_kernels(*tensors)` run the kernels
    (typed, as custom ops need); `setup_context(ctx, inputs, output)` saves
    what `backward(ctx, run, *grads)` reads, which calls `run` (the backward
    kernels, as a custom op while compiling) and returns the inputs'
    gradients."""

    def __init__(self, name, forward, forward_fake, backward_kernels, backward_fake,
                 setup_context, backward):
        self.__doc__ = forward.__doc__
        self._op = torch.library.custom_op(f"coda::{name}", forward, mutates_args=())
        self._op.register_fake(forward_fake)
        backward_op = torch.library.custom_op(f"coda::{name}_backward", backward_kernels,
                                              mutates_args=())
        backward_op.register_fake(backward_fake)
        self._op.register_autograd(lambda ctx, *grads: backward(ctx, backward_op, *grads),
                                   setup_context=setup_context)

        def function_forward(ctx, *inputs):
            output = forward(*inputs)
            setup_context(ctx, inputs, output)
            return output

        def function_backward(ctx, *grads):
            return backward(ctx, backward_kernels, *grads)

        # Named for the op, so that its grad_fn reads `<name>Backward`.
        self._function = type(name, (torch.autograd.Function,),
                              {"forward": staticmethod(function_forward),
                               "backward": staticmethod(function_backward)})

    def __call__(self, *inputs):
        if torch.compiler.is_compiling():
            return self._op(*inputs)
        return self._function.apply(*inputs)


def _row_partials(like, columns, tile=128):
    """The destination of a row reduction's partials: one f32 per row and
    per `tile` columns (the programs' row_reduce tile)."""
    return torch.empty(like.shape[0], (columns + tile - 1) // tile, device=like.device,
                       dtype=torch.float32)


def _finish_rows(module, finish, partials):
    """The row sums of `partials` (a reduce_partials kernel)."""
    total = torch.empty(partials.shape[0], device=partials.device, dtype=torch.float32)
    _launch(module, finish, partials, total)
    return total


def _col_partials(rows, columns, device, tile=128):
    """The destination of a column reduction's partials over `rows` rows:
    one f32 per column and per `tile` rows (the programs' col_reduce tile)."""
    return torch.empty((rows + tile - 1) // tile, columns, device=device, dtype=torch.float32)


def _finish_cols(module, finish, partials):
    """The column sums of `partials` (a reduce_partials kernel)."""
    total = torch.empty(partials.shape[1], device=partials.device, dtype=torch.float32)
    _launch(module, finish, partials, total)
    return total


def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _check(name, **tensors):
    for arg, t in tensors.items():
        if t.dtype != torch.bfloat16 or not t.is_cuda or t.dim() != 2:
            raise ValueError(f"coda_torch.{name}: {arg} must be a 2-D bf16 CUDA "
                             f"tensor, got {t.dtype} {tuple(t.shape)} on {t.device}")


def _linear_swiglu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """silu(x Wg^T) * (x Wu^T) for a weight whose rows interleave gate and up
    (row 2j: gate j, row 2j + 1: up j); x: T x H, w: 2F x H, bf16."""
    _check("linear_swiglu", x=x, w=w)
    if w.shape[0] % 2:
        raise ValueError("coda_torch.linear_swiglu: w needs an even number of "
                         f"rows (interleaved gate/up), got {w.shape[0]}")
    module, (forward,) = _kernels("linear_swiglu", "linear_swiglu", "forward:gemm0")
    y = x.new_empty(x.shape[0], w.shape[0] // 2)
    _launch(module, forward, x.contiguous(), w.contiguous(), y)
    return y


def _linear_swiglu_fake(x, w):
    return x.new_empty(x.shape[0], w.shape[0] // 2)


def _linear_swiglu_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                            need_x: bool, need_w: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """dx, dW of linear_swiglu: the adjoint GEMM recomputes x W^T and writes
    dgate / dup interleaved (dAcc), then dx = dAcc W and dW = dAcc^T x where
    needed."""
    module, kernels = _kernels("linear_swiglu", "linear_swiglu_backward", *_GEMM_BACKWARD)
    return _gemm_backward(module, kernels, x, w, dy.contiguous().to(torch.bfloat16),
                          need_x=need_x, need_w=need_w)


def _operand_grads_fake(dy, x, w, *rest):
    """dx and dW of a backward whose last two arguments say which are
    needed."""
    need_x, need_w = rest[-2:]
    return _skipped_like(x, need_x), _skipped_like(w, need_w)


def _swiglu_backward(ctx, run, dy):
    x, w = ctx.saved_tensors
    need_x, need_w = ctx.needs_input_grad
    dx, dw = run(dy, x, w, need_x, need_w)
    return _needed(dx, need_x), _needed(dw, need_w)


linear_swiglu = _Op("linear_swiglu", _linear_swiglu, _linear_swiglu_fake,
                    _linear_swiglu_backward, _operand_grads_fake, _save_inputs,
                    _swiglu_backward)


def _check_gate_up(name, x, w_gate_up):
    if w_gate_up.shape[0] % 2 or w_gate_up.shape[1] != x.shape[1]:
        raise ValueError(f"coda_torch.{name}: w_gate_up must be 2F x H (interleaved gate/up "
                         f"rows) for x of {x.shape[1]} columns, got {tuple(w_gate_up.shape)}")


def _check_mlp(name, x, w_gate_up, w_down):
    """The MLP ops' operands: bf16 CUDA matrices, gate/up rows interleaved
    over x's columns, one column of w_down per SwiGLU feature."""
    _check(name, x=x, w_gate_up=w_gate_up, w_down=w_down)
    _check_gate_up(name, x, w_gate_up)
    if w_down.shape[1] != w_gate_up.shape[0] // 2:
        raise ValueError(f"coda_torch.{name}: w_down must have {w_gate_up.shape[0] // 2} "
                         f"columns (one per SwiGLU feature), got {tuple(w_down.shape)}")


def _swiglu_mlp_forward(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """z = h W_down^T with h = silu(x Wg^T) * (x Wu^T), and what the backward
    reads: h and the gate and up pre-activations (each T x F)."""
    _check_mlp("swiglu_mlp", x, w_gate_up, w_down)
    tokens, features = x.shape[0], w_gate_up.shape[0] // 2
    module, (gate_up, down) = _kernels("swiglu_mlp", "swiglu_mlp", "forward:gemm0",
                                       "forward:gemm1")
    h, g, u = (x.new_empty(tokens, features) for _ in range(3))
    x, w_gate_up, w_down = x.contiguous(), w_gate_up.contiguous(), w_down.contiguous()
    _launch(module, gate_up, x, w_gate_up, h, g, u)
    z = x.new_empty(tokens, w_down.shape[0])
    _launch(module, down, h, w_down, z)
    return z, h, g, u


def _swiglu_mlp_forward_fake(x, w_gate_up, w_down):
    features = w_gate_up.shape[0] // 2
    return (x.new_empty(x.shape[0], w_down.shape[0]),
            *(x.new_empty(x.shape[0], features) for _ in range(3)))


def _swiglu_mlp_backward(dz: torch.Tensor, x: torch.Tensor, w_gate_up: torch.Tensor,
                         w_down: torch.Tensor, h: torch.Tensor, g: torch.Tensor,
                         u: torch.Tensor, need_x: bool, need_gate_up: bool, need_down: bool
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx, dW_gate_up, dW_down in four GEMMs, each where needed: dz W_down
    with the SwiGLU derivative (from the saved g, u) in its epilogue, writing
    dgate / dup interleaved (dAcc; for dx or dW_gate_up); dx = dAcc
    W_gate_up; dW_gate_up = dAcc^T x; dW_down = dz^T h."""
    module, (adjoint, data_grad, gate_up_grad, down_grad) = _kernels(
        "swiglu_mlp", "swiglu_mlp_backward", "adjoint:gemm0", "grad:gemm0.lhs",
        "grad:gemm0.rhs", "grad:gemm1.rhs")
    dz = dz.contiguous().to(torch.bfloat16)
    x, w_gate_up, w_down = x.contiguous(), w_gate_up.contiguous(), w_down.contiguous()
    dx, dw_gate_up = _skipped_like(x, need_x), _skipped_like(w_gate_up, need_gate_up)
    if need_x or need_gate_up:
        dacc = x.new_empty(x.shape[0], w_gate_up.shape[0])
        _launch(module, adjoint, dz, w_down, g, u, dacc)
        dx, dw_gate_up = _operand_grads(module, data_grad, gate_up_grad, dacc, x, w_gate_up,
                                        need_x, need_gate_up)
    dw_down = _skipped_like(w_down, need_down)
    if need_down:
        _launch(module, down_grad, dz, h, dw_down)
    return dx, dw_gate_up, dw_down


def _swiglu_mlp_backward_fake(dz, x, w_gate_up, w_down, h, g, u, need_x, need_gate_up,
                              need_down):
    return (_skipped_like(x, need_x), _skipped_like(w_gate_up, need_gate_up),
            _skipped_like(w_down, need_down))


def _mlp_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs, *output[1:])
    # h, g and u are kept for the backward, never used outside: no zero
    # gradients for them.
    ctx.set_materialize_grads(False)


def _mlp_backward(ctx, run, dz, dh, dg, du):
    if dz is None:
        return None, None, None
    need = ctx.needs_input_grad
    return tuple(_needed(grad, needed)
                 for grad, needed in zip(run(dz, *ctx.saved_tensors, *need), need))


_swiglu_mlp = _Op("swiglu_mlp", _swiglu_mlp_forward, _swiglu_mlp_forward_fake,
                  _swiglu_mlp_backward, _swiglu_mlp_backward_fake, _mlp_setup_context,
                  _mlp_backward)


def swiglu_mlp(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """A Llama MLP, (silu(x Wg^T) * (x Wu^T)) W_down^T, for a gate/up weight
    whose rows interleave gate and up (row 2j: gate j, row 2j + 1: up j).
    x: T x H, w_gate_up: 2F x H, w_down: H' x F, bf16. The forward keeps h
    and the gate / up pre-activations; the backward recomputes no GEMM."""
    return _swiglu_mlp(x, w_gate_up, w_down)[0]


# FP8 (torchao's float8 row-wise recipe with high-precision weight
# gradients): every FP8 GEMM operand is e4m3 with one f32 scale per row
# along K, amax / 448, applied to the accumulator in the epilogue (row and
# column inputs); the weight gradients are bf16 GEMMs.

E4M3_MAX = 448.0

try:  # Triton ships with PyTorch's CUDA builds.
    import triton
    import triton.language as tl
except ImportError:
    triton = None


def _need_triton(what):
    if triton is None:
        raise RuntimeError(f"coda_torch: {what} needs Triton (PyTorch's CUDA builds ship it)")


if triton is not None:
    @triton.jit
    def _quantize_rows_kernel(x_ptr, q_ptr, s_ptr, cols, BLOCK: tl.constexpr):
        # One row per program, read once: held in registers, its amax, the
        # scale amax / 448, the e4m3 values (an IEEE-rounded division, as
        # PyTorch's).
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
        scale = tl.fdiv(tl.maximum(tl.max(tl.abs(x), axis=0), 1e-12), 448.0,
                        ieee_rounding=True)
        q = tl.fdiv(x, scale, ieee_rounding=True)
        q = tl.minimum(tl.maximum(q, -448.0), 448.0)
        tl.store(q_ptr + row * cols + offs, q.to(tl.float8e4nv), mask=mask)
        tl.store(s_ptr + row, scale)

    @triton.jit
    def _quantize_cols_kernel(w_ptr, q_ptr, s_ptr, rows, cols, BLOCK_R: tl.constexpr,
                              BLOCK_C: tl.constexpr):
        # BLOCK_C columns of a row-major rows x cols w per program: their
        # amax over the rows, then the e4m3 values stored transposed (q is
        # cols x rows), the rows read twice from L2 and HBM once.
        c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        cmask = c < cols
        amax = tl.zeros([BLOCK_C], dtype=tl.float32)
        for r0 in range(0, rows, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            mask = (r[:, None] < rows) & cmask[None, :]
            x = tl.load(w_ptr + r[:, None].to(tl.int64) * cols + c[None, :], mask=mask,
                        other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.max(tl.abs(x), axis=0))
        scale = tl.fdiv(tl.maximum(amax, 1e-12), 448.0, ieee_rounding=True)
        tl.store(s_ptr + c, scale, mask=cmask)
        for r0 in range(0, rows, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            mask = (r[:, None] < rows) & cmask[None, :]
            x = tl.load(w_ptr + r[:, None].to(tl.int64) * cols + c[None, :], mask=mask,
                        other=0.0).to(tl.float32)
            q = tl.fdiv(x, scale[None, :], ieee_rounding=True)
            q = tl.minimum(tl.maximum(q, -448.0), 448.0)
            tl.store(q_ptr + c[None, :].to(tl.int64) * rows + r[:, None], q.to(tl.float8e4nv),
                     mask=mask)


def quantize_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """t (2-D, bf16) as e4m3 with one f32 scale per row (amax / 448;
    t ~ q * scale), q contiguous; the rows of a transposed view (the
    columns of the tensor it views) quantized with no transposed copy. One
    Triton kernel."""
    _need_triton("quantize_rows")
    t = t.detach()
    rows, cols = t.shape
    q = torch.empty(rows, cols, device=t.device, dtype=torch.float8_e4m3fn)
    scale = torch.empty(rows, device=t.device, dtype=torch.float32)
    if not t.is_contiguous() and t.T.is_contiguous():
        # The rows of a transposed view: columns of the tensor it views,
        # quantized into q's rows without a transposed copy.
        block_c = 16
        _quantize_cols_kernel[(triton.cdiv(rows, block_c),)](
            t.T, q, scale, cols, rows, BLOCK_R=256, BLOCK_C=block_c, num_warps=4)
        return q, scale
    t = t.contiguous()
    block = max(16, 1 << (cols - 1).bit_length())
    _quantize_rows_kernel[(rows,)](t, q, scale, cols, BLOCK=block,
                                   num_warps=min(32, max(4, block // 512)))
    return q, scale


# Memory-bound passes beside the GEMMs that PyTorch runs below bandwidth: a
# product by a vector broadcast along rows (gamma folded into a weight or
# scaling an LM head's input: PyTorch's broadcasting kernel is not
# vectorized, 0.75-1.5 TB/s) and a row's sum of squares (x.float().square()
# .sum(-1): an f32 copy, a power and a sum, three passes back). Each as
# one Triton kernel, bitwise PyTorch's result where PyTorch's is rounded once.

if triton is not None:
    @triton.jit
    def _scale_columns_kernel(a_ptr, v_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr,
                              BLOCK_C: tl.constexpr):
        # out = a * v[None, :] in f32, rounded once to out's type (as
        # PyTorch's bf16 product).
        r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        mask = (r[:, None] < rows) & (c[None, :] < cols)
        offs = r[:, None].to(tl.int64) * cols + c[None, :]
        a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + c, mask=c < cols, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (a * v[None, :]).to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def _sum_squares_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
        # One row per program, read once, its squares summed in f32.
        row = tl.program_id(0).to(tl.int64)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c0 in range(0, cols, BLOCK):
            c = c0 + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=0.0).to(tl.float32)
            acc += x * x
        tl.store(out_ptr + row, tl.sum(acc, axis=0))

    @triton.jit
    def _sum_squares_grad_kernel(x_ptr, g_ptr, dx_ptr, cols, BLOCK: tl.constexpr):
        # dx = 2 g x in f32, rounded once (PyTorch's power backward, then
        # the copy back to x's type).
        row = tl.program_id(0).to(tl.int64)
        g = tl.load(g_ptr + row)
        for c0 in range(0, cols, BLOCK):
            c = c0 + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=0.0).to(tl.float32)
            tl.store(dx_ptr + row * cols + c, (g * (2.0 * x)).to(dx_ptr.dtype.element_ty),
                     mask=c < cols)


def _scale_columns(a, v):
    """a * v (a: rows x cols, v: cols, both bf16 CUDA tensors) without
    autograd: one Triton kernel, bitwise PyTorch's product."""
    _need_triton("gamma's product")
    a, v = a.contiguous(), v.contiguous()
    out = torch.empty_like(a)
    rows, cols = a.shape
    _scale_columns_kernel[(triton.cdiv(rows, 16), triton.cdiv(cols, 256))](
        a, v, out, rows, cols, BLOCK_R=16, BLOCK_C=256, num_warps=4)
    return out


class _ScaleColumns(torch.autograd.Function):
    """x * v[None, :] with the gradients PyTorch's product has: dx = g * v
    (the same kernel), dv = (g * x).sum(0)."""

    @staticmethod
    def forward(ctx, x, v):
        ctx.save_for_backward(x, v)
        return _scale_columns(x, v)

    @staticmethod
    def backward(ctx, grad):
        x, v = ctx.saved_tensors
        dx = _scale_columns(grad, v) if ctx.needs_input_grad[0] else None
        dv = (grad * x).sum(0) if ctx.needs_input_grad[1] else None
        return dx, dv


def scale_columns(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """x * v (x: tokens x H bf16, v: H bf16, e.g. a norm's gamma), the
    product's value and gradients PyTorch's; one Triton kernel each way in
    eager mode (PyTorch's broadcasting product runs well below bandwidth),
    PyTorch's product while torch.compile traces (Inductor fuses it)."""
    if torch.compiler.is_compiling():
        return x * v
    _check("scale_columns", x=x)
    _check_vector("scale_columns", "v", v, torch.bfloat16, x.shape[1])
    return _ScaleColumns.apply(x, v)


class _SumSquares(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        _need_triton("the rows' sums of squares")
        x = x.contiguous()
        ctx.save_for_backward(x)
        out = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
        _sum_squares_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=1024, num_warps=4)
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        dx = torch.empty_like(x)
        _sum_squares_grad_kernel[(x.shape[0],)](x, grad.contiguous(), dx, x.shape[1],
                                                BLOCK=1024, num_warps=4)
        return dx


def sum_squares(x: torch.Tensor) -> torch.Tensor:
    """The rows' sums of squares of x (tokens x H, bf16) in f32, an RMSNorm's
    statistic where no GEMM's epilogue emitted it: x.float().square().sum(-1)
    with its gradient; one Triton kernel each way in eager mode (PyTorch's
    takes three passes each way), PyTorch's expression while torch.compile
    traces."""
    if torch.compiler.is_compiling():
        return x.float().square().sum(dim=-1)
    _check("sum_squares", x=x)
    return _SumSquares.apply(x)


def _check_fp8_shapes(name, x, w_gate_up, w_down):
    _check_mlp(name, x, w_gate_up, w_down)
    # TMA reads FP8 rows in 16-byte units: every K (H, F, 2F) a multiple of 16.
    for what, k in (("hidden size", x.shape[1]), ("feature count", w_down.shape[1]),
                    ("output size", w_down.shape[0])):
        if k % 16:
            raise ValueError(f"coda_torch.{name}: the {what} must be a multiple of 16 for "
                             f"FP8 GEMMs, got {k}")


def _linear_fp8(module, aq, sa, bq, sb):
    """a b^T * sa[row] * sb[col] in bf16 from e4m3 operands (a linear_fp8 kernel)."""
    y = torch.empty(aq.shape[0], bq.shape[0], device=aq.device, dtype=torch.bfloat16)
    _launch(module, module.kernel_for("linear_fp8", "forward:gemm0"), aq, bq, sa, sb, y)
    return y


def _swiglu_mlp_fp8_forward(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """swiglu_mlp with FP8 GEMMs: z, and h and the gate and up
    pre-activations for the backward."""
    _check_fp8_shapes("swiglu_mlp_fp8", x, w_gate_up, w_down)
    module, (gate_up,) = _kernels("swiglu_mlp_fp8", "swiglu_mlp_fp8", "forward:gemm0")
    tokens, features = x.shape[0], w_gate_up.shape[0] // 2
    xq, sx = quantize_rows(x)
    wq, sw = quantize_rows(w_gate_up)
    h, g, u = (x.new_empty(tokens, features) for _ in range(3))
    _launch(module, gate_up, xq, wq, sx, sw, h, g, u)
    hq, sh = quantize_rows(h)
    wdq, swd = quantize_rows(w_down)
    return _linear_fp8(module, hq, sh, wdq, swd), h, g, u


def _swiglu_mlp_fp8_backward(dz: torch.Tensor, x: torch.Tensor, w_gate_up: torch.Tensor,
                             w_down: torch.Tensor, h: torch.Tensor, g: torch.Tensor,
                             u: torch.Tensor, need_x: bool, need_gate_up: bool,
                             need_down: bool
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx (FP8: dz Wd with the SwiGLU derivative in its epilogue, then
    dAcc Wgu), dW_gate_up = dAcc^T x and dW_down = dz^T h (bf16), each where
    needed."""
    module, (adjoint,) = _kernels("swiglu_mlp_fp8", "swiglu_mlp_fp8_backward", "adjoint:gemm0")
    bf16, (gate_up_grad, down_grad) = _kernels("swiglu_mlp", "swiglu_mlp_backward",
                                               "grad:gemm0.rhs", "grad:gemm1.rhs")
    dz = dz.contiguous().to(torch.bfloat16)
    dx, dw_gate_up = _skipped_like(x, need_x), _skipped_like(w_gate_up, need_gate_up)
    if need_x or need_gate_up:
        dzq, sdz = quantize_rows(dz)
        wdtq, swdt = quantize_rows(w_down.t())
        dacc = x.new_empty(x.shape[0], w_gate_up.shape[0])
        _launch(module, adjoint, dzq, wdtq, sdz, swdt, g, u, dacc)
    if need_x:
        dq, sd = quantize_rows(dacc)
        wgutq, swgut = quantize_rows(w_gate_up.t())
        dx = _linear_fp8(module, dq, sd, wgutq, swgut)
    if need_gate_up:
        _launch(bf16, gate_up_grad, dacc, x.contiguous(), dw_gate_up)
    dw_down = _skipped_like(w_down, need_down)
    if need_down:
        _launch(bf16, down_grad, dz, h, dw_down)
    return dx, dw_gate_up, dw_down


_swiglu_mlp_fp8 = _Op("swiglu_mlp_fp8", _swiglu_mlp_fp8_forward, _swiglu_mlp_forward_fake,
                      _swiglu_mlp_fp8_backward, _swiglu_mlp_backward_fake, _mlp_setup_context,
                      _mlp_backward)


def swiglu_mlp_fp8(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor
                   ) -> torch.Tensor:
    """swiglu_mlp with its GEMMs in FP8, row-wise scaled (torchao's float8
    row-wise recipe, weight gradients in bf16): x, h, the output gradient
    and dAcc quantized per token, the weights per output row (and per
    column for the data gradients), e4m3, scales applied in the epilogues;
    the SwiGLU and its derivative run in the epilogues as in swiglu_mlp.
    bf16 in and out; H, F and H' multiples of 16."""
    return _swiglu_mlp_fp8(x, w_gate_up, w_down)[0]


def _check_target(name, x, target):
    if target.dtype != torch.int64 or target.shape != (x.shape[0],):
        raise ValueError(f"coda_torch.{name}: target must be int64 of shape ({x.shape[0]},), "
                         f"got {target.dtype} {tuple(target.shape)}")


def _cross_entropy(program, function, x, w, target, row_inputs=(), saved=()):
    """The LM head's forward kernels: per-token loss and log-sum-exp of the
    logits (the GEMM reading `row_inputs` before the target, writing the
    log-sum-exp partials, the target's logit and `saved`), never stored;
    targets outside [0, vocabulary) give 0."""
    module, (logits, finish) = _kernels(program, function, "forward:gemm0", "forward:finish0")
    vocab = w.shape[0]
    partials = _row_partials(x, vocab)
    picked = torch.zeros(x.shape[0], device=x.device, dtype=torch.float32)
    target = target.contiguous()
    _launch(module, logits, x.contiguous(), w.contiguous(), *row_inputs, target, partials,
            picked, *saved)
    lse = _finish_rows(module, finish, partials)
    return torch.where(_counted(target, vocab), lse - picked, 0.0), lse


def _counted(target, vocab):
    """The tokens whose target counts: those in [0, vocab)."""
    return (target >= 0) & (target < vocab)


def _loss_grad(dloss, target, vocab):
    """The per-token loss's gradient, 0 where the target is ignored."""
    return torch.where(_counted(target, vocab), dloss.float(), 0.0).contiguous()


def _linear_cross_entropy_forward(x: torch.Tensor, w: torch.Tensor,
                                  target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token loss and log-sum-exp of the logits x W^T, never stored."""
    _check("linear_cross_entropy", x=x, w=w)
    _check_target("linear_cross_entropy", x, target)
    return _cross_entropy("linear_cross_entropy", "linear_cross_entropy", x, w, target)


def _linear_cross_entropy_forward_fake(x, w, target):
    return x.new_empty(x.shape[0], dtype=torch.float32), x.new_empty(x.shape[0], dtype=torch.float32)


def _linear_cross_entropy_backward(dloss: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                                   target: torch.Tensor, lse: torch.Tensor, need_x: bool,
                                   need_w: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """dx, dW: the adjoint GEMM recomputes the logits and writes
    dloss (softmax - onehot(target)) as dAcc; then dx = dAcc W, dW = dAcc^T x
    where needed.
    (The derived backward program also recomputes the log-sum-exp, its
    forward:gemm0 and forward:finish0, which the forward saved: those are
    not run.)"""
    module, kernels = _kernels("linear_cross_entropy", "linear_cross_entropy_backward",
                              *_GEMM_BACKWARD)
    g = _loss_grad(dloss, target, w.shape[0])
    # The adjoint reads the target, d(log-sum-exp), log-sum-exp and
    # d(target logit) = -dloss.
    return _gemm_backward(module, kernels, x, w, target.contiguous(), g,
                          lse.contiguous(), -g, need_x=need_x, need_w=need_w)


def _ce_setup_context(ctx, inputs, output):
    x, w, target = inputs
    ctx.save_for_backward(x, w, target, output[1])


def _ce_backward(ctx, run, dloss, dlse):
    x, w, target, lse = ctx.saved_tensors
    need_x, need_w = ctx.needs_input_grad[:2]
    dx, dw = run(dloss, x, w, target, lse, need_x, need_w)
    return _needed(dx, need_x), _needed(dw, need_w), None


_linear_cross_entropy = _Op("linear_cross_entropy", _linear_cross_entropy_forward,
                            _linear_cross_entropy_forward_fake,
                            _linear_cross_entropy_backward, _operand_grads_fake,
                            _ce_setup_context, _ce_backward)


def linear_cross_entropy(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-token cross-entropy of the logits x W^T against `target` (like
    F.cross_entropy(x @ w.T, target, reduction="none"); targets outside
    [0, vocabulary), such as -100, give 0), without storing the logits in the
    forward. x: T x H, w: V x H, bf16; target: T, int64."""
    return _linear_cross_entropy(x, w, target)[0]


def _norm_ce_program(save_logits):
    """The norm-deferred LM head's program: its variant that keeps the
    logits for the backward, or the one that recomputes them."""
    return "linear_norm_cross_entropy" + (".saved" if save_logits else "")


def _linear_norm_cross_entropy_forward(x: torch.Tensor, rs: torch.Tensor, w: torch.Tensor,
                                       target: torch.Tensor, save_logits: bool
                                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token loss and log-sum-exp of the logits rs (x W^T), and with
    save_logits the accumulator x W^T in bf16 (else an empty tensor)."""
    _check("linear_norm_cross_entropy", x=x, w=w)
    _check_vector("linear_norm_cross_entropy", "rs", rs, torch.float32, x.shape[0])
    _check_target("linear_norm_cross_entropy", x, target)
    saved = x.new_empty(x.shape[0], w.shape[0]) if save_logits else x.new_empty(0)
    loss, lse = _cross_entropy(_norm_ce_program(save_logits), "linear_norm_cross_entropy", x, w,
                               target, (rs.contiguous(),), (saved,) if save_logits else ())
    return loss, lse, saved


def _linear_norm_cross_entropy_forward_fake(x, rs, w, target, save_logits):
    loss, lse = _linear_cross_entropy_forward_fake(x, w, target)
    return loss, lse, x.new_empty(x.shape[0], w.shape[0]) if save_logits else x.new_empty(0)


def _linear_norm_cross_entropy_backward(dloss: torch.Tensor, x: torch.Tensor, rs: torch.Tensor,
                                        w: torch.Tensor, target: torch.Tensor, lse: torch.Tensor,
                                        saved: torch.Tensor, in_place: bool, need_x: bool,
                                        need_w: bool
                                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx, drs, dW (the derived backward): the adjoint, which recomputes the
    product (or reads the saved one, `saved` not empty: an epilogue-only
    pass), writes dAcc = rs dloss (softmax - onehot(target)) and reduces
    rs's gradient, sum_v dloss (softmax - onehot) (x W^T), as row partials;
    then dx = dAcc W, dW = dAcc^T x where needed. With `in_place` dAcc is
    written over the saved product, each tile after its own reads."""
    save_logits = saved.numel() > 0
    module, (*kernels, finish) = _kernels(
        _norm_ce_program(save_logits), "linear_norm_cross_entropy_backward", *_GEMM_BACKWARD,
        "grad:gemm0.input0")
    g = _loss_grad(dloss, target, w.shape[0])
    partials = _row_partials(x, w.shape[0])
    in_place = save_logits and in_place
    # The adjoint reads rs, the target, d(log-sum-exp), log-sum-exp,
    # d(target logit) = -dloss and the saved product.
    dx, dw = _gemm_backward(module, kernels, x, w, rs.contiguous(), target.contiguous(), g,
                            lse.contiguous(), -g, *((saved,) if save_logits else ()),
                            extra_outputs=(partials,), dacc=saved if in_place else None,
                            need_x=need_x, need_w=need_w)
    if in_place:
        # The saved product is gone: a second backward through this op
        # (retain_graph) raises PyTorch's in-place modification error
        # instead of reading gradients as logits.
        torch.autograd.graph.increment_version(saved)
    return dx, _finish_rows(module, finish, partials), dw


def _linear_norm_cross_entropy_backward_fake(dloss, x, rs, w, target, lse, saved, in_place,
                                             need_x, need_w):
    return _skipped_like(x, need_x), torch.empty_like(rs), _skipped_like(w, need_w)


def _norm_ce_setup_context(ctx, inputs, output):
    x, rs, w, target, _ = inputs
    ctx.save_for_backward(x, rs, w, target, output[1], output[2])
    # The log-sum-exp and the saved logits get no gradient: not zeros made
    # for them (the logits' would be tokens x vocabulary).
    ctx.set_materialize_grads(False)


def _norm_ce_backward(ctx, run, dloss, dlse, dsaved):
    if dloss is None:
        return None, None, None, None, None
    # In eager mode dAcc takes the saved logits' memory; the custom op
    # (torch.compile) declares no mutation, so there it gets its own.
    in_place = run is _linear_norm_cross_entropy_backward
    need_x, _, need_w = ctx.needs_input_grad[:3]
    dx, drs, dw = run(dloss, *ctx.saved_tensors, in_place, need_x, need_w)
    return _needed(dx, need_x), drs, _needed(dw, need_w), None, None


_linear_norm_cross_entropy = _Op("linear_norm_cross_entropy", _linear_norm_cross_entropy_forward,
                                 _linear_norm_cross_entropy_forward_fake,
                                 _linear_norm_cross_entropy_backward,
                                 _linear_norm_cross_entropy_backward_fake,
                                 _norm_ce_setup_context, _norm_ce_backward)


def linear_norm_cross_entropy(x: torch.Tensor, rs: torch.Tensor, w: torch.Tensor,
                              target: torch.Tensor, save_logits: bool = False) -> torch.Tensor:
    """linear_cross_entropy behind a deferred RMSNorm: per-token
    cross-entropy of the logits rs (x W^T), rs applied to the accumulator
    (x: T x H, the un-normalized residual stream, times the norm's weight if
    it has one; rs: T f32, the norm's row scale rsqrt(mean(x^2) + eps); w:
    V x H; target: T int64, outside [0, V) giving 0). The backward
    recomputes the logits, and reduces rs's gradient beside the adjoint;
    with `save_logits` the forward keeps x W^T in bf16 (2 bytes per logit,
    held until the backward, which writes the logits' gradient over them)
    and the backward reads it instead: one GEMM less."""
    return _linear_norm_cross_entropy(x, rs, w, target, save_logits)[0]


def _linear_qkv_rope(x: torch.Tensor, w: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     rotated: int, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """x W^T (+ bias) with rotary embeddings (rotate_half within heads of 64
    or 128) on its first `rotated` columns (Q and K, stacked before V).
    x: T x H, w: N x H bf16 (N a multiple of the head size); cos, sin:
    T x head size bf16 (what Hugging Face's rotary embedding returns for a
    bf16 model), whose width sets the head size; rotated: a multiple of the
    head size, at most N; bias: None or N bf16 (Qwen2's Q/K/V biases),
    added before the rotation."""
    _check("linear_qkv_rope", x=x, w=w)
    tokens, n = x.shape[0], w.shape[0]
    program, head_dim = _check_rope("linear_qkv_rope", tokens, n, cos, sin, rotated)
    _check_vector("linear_qkv_rope", "bias", bias, torch.bfloat16, n, optional=True)
    function, biases = _with_bias("linear_qkv_rope", bias)
    module, (forward,) = _kernels(program, function, "forward:gemm0")
    y = x.new_empty(tokens, n)
    _launch(module, forward, x.contiguous(), w.contiguous(), *biases, cos.contiguous(),
            sin.contiguous(), rotated // head_dim, y)
    return y


# The head sizes the RoPE programs rotate: the program (or its variant,
# `// coda-variant:` in the program) for each.
_ROPE_HEAD_PROGRAMS = {128: "", 64: ".head64"}


def _check_rope(name, tokens, n, cos, sin, rotated):
    """Checks a RoPE op's operands; returns the program that rotates heads
    of the tables' width, and that width."""
    head_dim = cos.shape[-1] if cos.dim() == 2 else None
    if head_dim not in _ROPE_HEAD_PROGRAMS:
        raise ValueError(f"coda_torch.{name}: cos must be tokens x head size with a head "
                         f"size in {sorted(_ROPE_HEAD_PROGRAMS)}, got {tuple(cos.shape)}")
    if n % head_dim:
        raise ValueError(f"coda_torch.{name}: w needs whole heads of {head_dim} rows, got {n}")
    for table_name, table in (("cos", cos), ("sin", sin)):
        if table.dtype != torch.bfloat16 or table.shape != (tokens, head_dim):
            raise ValueError(f"coda_torch.{name}: {table_name} must be bf16 of shape "
                             f"({tokens}, {head_dim}), got {table.dtype} {tuple(table.shape)}")
    if rotated % head_dim or not 0 <= rotated <= n:
        raise ValueError(f"coda_torch.{name}: rotated must be a multiple of {head_dim} "
                         f"in [0, {n}], got {rotated}")
    return _rope_program(name, cos)


def _with_bias(function, bias):
    """The RoPE program's `function`, or its form with a bias added before
    the rotation (`<function>_bias`), and the bias as a launch argument."""
    return (function, ()) if bias is None else (function + "_bias", (bias.contiguous(),))


def _rope_program(name, cos):
    """The program of RoPE op `name` for heads of cos's width, and the width."""
    return name + _ROPE_HEAD_PROGRAMS[cos.shape[1]], cos.shape[1]


def _linear_qkv_rope_fake(x, w, cos, sin, rotated, bias):
    return x.new_empty(x.shape[0], w.shape[0])


def _linear_qkv_rope_backward(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                              cos: torch.Tensor, sin: torch.Tensor, rotated: int,
                              biased: bool, need_x: bool, need_w: bool
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx, dW (where needed) and (biased) db: the adjoint applies the
    transposed rotation to dy (dAcc; reading no product), reducing db as
    column partials; then dx = dAcc W and dW = dAcc^T x. An empty db
    without a bias."""
    return _rope_backward_parts([(w.shape[0], dy)], x, w, cos, sin, rotated, biased, need_x,
                                need_w)


def _rope_backward_parts(parts, x, w, cos, sin, rotated, biased, need_x, need_w):
    """_linear_qkv_rope_backward with dy given as consecutive column
    segments (_rope_adjoint_segments)."""
    program, head_dim = _rope_program("linear_qkv_rope", cos)
    function = "linear_qkv_rope_bias_backward" if biased else "linear_qkv_rope_backward"
    module, (adjoint, data_grad, weight_grad, *bias_finish) = _kernels(
        program, function, *_GEMM_BACKWARD, *(("grad:gemm0.input0",) if biased else ()))
    x, w, cos, sin = x.contiguous(), w.contiguous(), cos.contiguous(), sin.contiguous()
    dacc, bias_partials = _rope_adjoint_segments(
        "linear_qkv_rope", module, adjoint, parts, x, w.shape[0], head_dim, rotated, biased,
        lambda start, end: (x, w[start:end], cos, sin))
    dx, dw = _operand_grads(module, data_grad, weight_grad, dacc, x, w, need_x, need_w)
    db = (_finish_cols(module, bias_finish[0], bias_partials).to(torch.bfloat16) if biased
          else x.new_empty(0))
    return dx, dw, db


def _linear_qkv_rope_backward_fake(dy, x, w, cos, sin, rotated, biased, need_x, need_w):
    return (_skipped_like(x, need_x), _skipped_like(w, need_w),
            x.new_empty(w.shape[0] if biased else 0))


def _rope_save(ctx, inputs, output):
    x, w, cos, sin, ctx.rotated, bias = inputs
    ctx.biased = bias is not None
    ctx.save_for_backward(x, w, cos, sin)


def _rope_grads(ctx, dx, dw, db):
    """The gradients of linear_qkv_rope's inputs (x, w, cos, sin, rotated,
    bias): None for those that need none."""
    need_x, need_w = ctx.needs_input_grad[:2]
    return _needed(dx, need_x), _needed(dw, need_w), None, None, None, db if ctx.biased else None


def _rope_backward(ctx, run, dy):
    x, w, cos, sin = ctx.saved_tensors
    return _rope_grads(ctx, *run(dy, x, w, cos, sin, ctx.rotated, ctx.biased,
                                 *ctx.needs_input_grad[:2]))


_linear_qkv_rope_op = _Op("linear_qkv_rope", _linear_qkv_rope, _linear_qkv_rope_fake,
                          _linear_qkv_rope_backward, _linear_qkv_rope_backward_fake,
                          _rope_save, _rope_backward)


class _Segments(torch.autograd.Function):
    """The eager path of a Q/K/V + RoPE op called with `split`: its output
    returned as column segments (views), each segment's gradient reaching
    the backward as the attention leaves it, never concatenated.
    apply(*inputs, op, split), `op` with forward(ctx, *inputs) (the op's
    output, its context saved) and backward(ctx, parts) (the inputs'
    gradients from the segments' [(columns, gradient or None)])."""

    @staticmethod
    def forward(ctx, *args):
        *inputs, ctx.op, ctx.split = args
        ctx.input_count = len(inputs)
        # A segment nobody differentiates (K's, unused) gets None, not zeros.
        ctx.set_materialize_grads(False)
        return tuple(ctx.op.forward(ctx, *inputs).split(ctx.split, dim=1))

    @staticmethod
    def backward(ctx, *dys):
        if all(dy is None for dy in dys):
            return (None,) * (ctx.input_count + 2)
        return *ctx.op.backward(ctx, list(zip(ctx.split, dys))), None, None


def _segments(name, op, segments, inputs, split, n, head_dim):
    """An op's output as the column segments `split` (each a whole number of
    heads): in eager mode through _Segments; while torch.compile traces, as
    torch.split's views of the op's output, whose backward Inductor fuses
    into one kernel."""
    split = [int(columns) for columns in split]
    if (sum(split) != n or any(columns <= 0 for columns in split)
            or any(sum(split[:i]) % head_dim for i in range(len(split)))):
        raise ValueError(f"{name}: split must be positive column counts summing to {n}, each "
                         f"segment starting on a head of {head_dim} columns, got {split}")
    if torch.compiler.is_compiling():
        return tuple(op(*inputs).split(split, dim=1))
    return _Segments.apply(*inputs, segments, split)


class _RopeSegments:
    """linear_qkv_rope through _Segments."""

    @staticmethod
    def forward(ctx, x, w, cos, sin, rotated, bias):
        y = _linear_qkv_rope(x, w, cos, sin, rotated, bias)
        _rope_save(ctx, (x, w, cos, sin, rotated, bias), y)
        return y

    @staticmethod
    def backward(ctx, parts):
        return _rope_grads(ctx, *_rope_backward_parts(parts, *ctx.saved_tensors, ctx.rotated,
                                                      ctx.biased, *ctx.needs_input_grad[:2]))


def linear_qkv_rope(x: torch.Tensor, w: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                    rotated: int, bias: Optional[torch.Tensor] = None,
                    split: Optional[list[int]] = None):
    if split is None:
        return _linear_qkv_rope_op(x, w, cos, sin, rotated, bias)
    return _segments("linear_qkv_rope", _linear_qkv_rope_op, _RopeSegments,
                     (x, w, cos, sin, rotated, bias), split, w.shape[0], cos.shape[-1])


linear_qkv_rope.__doc__ = _linear_qkv_rope.__doc__ + """

    With `split` (column counts, e.g. Q's, K's and V's, each a whole number
    of heads), returns the output's column segments as views, as
    torch.split would; in eager mode their gradients are then read where
    the attention leaves them, without being concatenated."""


def _linear_residual_norm(x: torch.Tensor, w: torch.Tensor,
                         residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x W^T + residual (bf16) and, for the next RMSNorm, the row sums of
    squares of h (f32, of h before its rounding), in one GEMM. x: T x H,
    w: N x H, residual: T x N."""
    _check("linear_residual_norm", x=x, w=w, residual=residual)
    tokens, n = x.shape[0], w.shape[0]
    if residual.shape != (tokens, n):
        raise ValueError(f"coda_torch.linear_residual_norm: residual must be ({tokens}, {n}), "
                         f"got {tuple(residual.shape)}")
    module, (forward, finish) = _kernels("linear_residual_norm", "linear_residual_norm",
                                        "forward:gemm0", "forward:finish0")
    h = x.new_empty(tokens, n)
    partials = _row_partials(h, n)
    _launch(module, forward, x.contiguous(), w.contiguous(), residual.contiguous(), h, partials)
    return h, _finish_rows(module, finish, partials)


def _linear_residual_norm_fake(x, w, residual):
    return x.new_empty(x.shape[0], w.shape[0]), x.new_empty(x.shape[0], dtype=torch.float32)


def _linear_residual_norm_backward(dh: torch.Tensor, dsum_sq: torch.Tensor, x: torch.Tensor,
                                   w: torch.Tensor, h: torch.Tensor, need_x: bool, need_w: bool
                                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx, dW, dresidual: the adjoint forms dAcc = dh + 2 h dsum_sq from the
    saved h (reading no product), which is also the residual's gradient;
    then dx = dAcc W and dW = dAcc^T x where needed."""
    module, (adjoint, data_grad, weight_grad) = _kernels(
        "linear_residual_norm", "linear_residual_norm_backward", *_GEMM_BACKWARD)
    x, w = x.contiguous(), w.contiguous()
    dacc = x.new_empty(x.shape[0], w.shape[0])
    _launch(module, adjoint, x, w, dh.contiguous().to(torch.bfloat16),
            dsum_sq.contiguous().float(), h, dacc)
    dx, dw = _operand_grads(module, data_grad, weight_grad, dacc, x, w, need_x, need_w)
    return dx, dw, dacc


def _linear_residual_norm_backward_fake(dh, dsum_sq, x, w, h, need_x, need_w):
    return _skipped_like(x, need_x), _skipped_like(w, need_w), torch.empty_like(h)


def _norm_setup_context(ctx, inputs, output):
    x, w, _ = inputs
    ctx.save_for_backward(x, w, output[0])
    # One of h and its sums of squares may be unused: zeros made here only.
    ctx.set_materialize_grads(False)


def _zeros_if_none(grad, *shape, dtype, like):
    if grad is not None:
        return grad
    return torch.zeros(*shape, device=like.device, dtype=dtype)


def _norm_backward(ctx, run, dh, dsum_sq):
    x, w, h = ctx.saved_tensors
    dh = _zeros_if_none(dh, *h.shape, dtype=torch.bfloat16, like=h)
    dsum_sq = _zeros_if_none(dsum_sq, h.shape[0], dtype=torch.float32, like=h)
    need_x, need_w = ctx.needs_input_grad[:2]
    dx, dw, dresidual = run(dh, dsum_sq, x, w, h, need_x, need_w)
    return _needed(dx, need_x), _needed(dw, need_w), dresidual


linear_residual_norm = _Op("linear_residual_norm", _linear_residual_norm,
                           _linear_residual_norm_fake, _linear_residual_norm_backward,
                           _linear_residual_norm_backward_fake, _norm_setup_context,
                           _norm_backward)


_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float32: "float32"}


def _check_vector(name, arg, t, dtype, length, optional=False):
    """A vector operand (a row scale, a norm's gamma, a bias): a CUDA tensor
    of `dtype` and shape (length,); None too where `optional`."""
    if t is None and optional:
        return
    if t.dtype != dtype or not t.is_cuda or t.shape != (length,):
        raise ValueError(f"coda_torch.{name}: {arg} must be {'None or ' if optional else ''}a "
                         f"{_DTYPE_NAMES[dtype]} CUDA tensor of shape ({length},), got "
                         f"{t.dtype} {tuple(t.shape)} on {t.device}")


def _norm_weight_grad(dacc, x, w, gamma):
    """dW = (dAcc^T x) diag(gamma) and dgamma = sum_n (dAcc^T x)[n] * W[n] of
    a GEMM x (W diag(gamma))^T, in one GEMM (the norm_weight_grad program)."""
    module, (gemm, finish) = _kernels("norm_weight_grad", "norm_weight_grad",
                                      "forward:gemm0", "forward:finish0")
    w = w.contiguous()
    dw = torch.empty_like(w)
    partials = _col_partials(w.shape[0], w.shape[1], w.device)
    _launch(module, gemm, dacc, x, gamma.contiguous(), w, dw, partials)
    return dw, _finish_cols(module, finish, partials).to(gamma.dtype)


def _norm_swiglu_mlp_forward(x: torch.Tensor, rs: torch.Tensor, w_gate_up: torch.Tensor,
                             gamma: torch.Tensor, w_down: torch.Tensor
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                        torch.Tensor, torch.Tensor, torch.Tensor]:
    """z = x + swiglu((rs x) W'^T) W_down^T with W' = W_gate_up diag(gamma)
    and the row sums of squares of z, in two GEMMs; and what the backward
    reads: h, the gate and up accumulators (before the row scale) and W'."""
    _check("norm_swiglu_mlp", x=x, w_gate_up=w_gate_up, w_down=w_down)
    tokens, hidden = x.shape
    features = w_gate_up.shape[0] // 2
    _check_vector("norm_swiglu_mlp", "rs", rs, torch.float32, tokens)
    _check_vector("norm_swiglu_mlp", "gamma", gamma, torch.bfloat16, w_gate_up.shape[1])
    _check_gate_up("norm_swiglu_mlp", x, w_gate_up)
    if w_down.shape != (hidden, features):
        raise ValueError(f"coda_torch.norm_swiglu_mlp: w_down must be ({hidden}, {features}), "
                         f"got {tuple(w_down.shape)}")
    module, (gate_up, down, finish) = _kernels("norm_swiglu_mlp", "norm_swiglu_mlp",
                                               "forward:gemm0", "forward:gemm1",
                                               "forward:finish0")
    x, w_down = x.contiguous(), w_down.contiguous()
    folded = _scale_columns(w_gate_up, gamma)
    h, g, u = (x.new_empty(tokens, features) for _ in range(3))
    _launch(module, gate_up, x, folded, rs.contiguous(), h, g, u)
    z = torch.empty_like(x)
    partials = _row_partials(z, hidden)
    _launch(module, down, h, w_down, x, z, partials)
    return z, _finish_rows(module, finish, partials), h, g, u, folded


def _norm_swiglu_mlp_forward_fake(x, rs, w_gate_up, gamma, w_down):
    features = w_gate_up.shape[0] // 2
    return (torch.empty_like(x), rs.new_empty(x.shape[0]),
            *(x.new_empty(x.shape[0], features) for _ in range(3)), torch.empty_like(w_gate_up))


def _norm_swiglu_mlp_backward(dz: torch.Tensor, dsum_sq: torch.Tensor, x: torch.Tensor,
                              rs: torch.Tensor, w_gate_up: torch.Tensor, gamma: torch.Tensor,
                              w_down: torch.Tensor, h: torch.Tensor, g: torch.Tensor,
                              u: torch.Tensor, folded: torch.Tensor, z: torch.Tensor,
                              need_x: bool, need_gate_up: bool, need_down: bool
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                         torch.Tensor, torch.Tensor]:
    """dx, drs, dW_gate_up, dgamma, dW_down, recomputing no GEMM: dAcc_down =
    dz + 2 z dsum_sq from the saved z (no product); dAcc_down W_down with the
    SwiGLU and row-scale derivatives in its epilogue (dgate / dup
    interleaved, rs's gradient as row partials); dx = dAcc W' + dAcc_down;
    dW_gate_up with gamma's gradient in one GEMM (norm_weight_grad); dW_down.
    dx, dW_gate_up and dgamma, dW_down only where needed."""
    module, (adjoint, swiglu, finish, data_grad, down_grad) = _kernels(
        "norm_swiglu_mlp", "norm_swiglu_mlp_backward", "adjoint:gemm1", "adjoint:gemm0",
        "grad:gemm0.input0", "grad:gemm0.lhs", "grad:gemm1.rhs")
    x, w_down = x.contiguous(), w_down.contiguous()
    dacc_down = torch.empty_like(x)
    _launch(module, adjoint, h, w_down, dz.contiguous().to(torch.bfloat16),
            dsum_sq.contiguous().float(), z, dacc_down)
    dacc = x.new_empty(x.shape[0], w_gate_up.shape[0])
    partials = _row_partials(x, h.shape[1])
    _launch(module, swiglu, dacc_down, w_down, g, u, rs.contiguous(), dacc, partials)
    drs = _finish_rows(module, finish, partials)
    dx = _skipped_like(x, need_x)
    if need_x:
        _launch(module, data_grad, dacc, folded, dacc_down, dx)
    dw_gate_up, dgamma = (_norm_weight_grad(dacc, x, w_gate_up, gamma) if need_gate_up
                          else (w_gate_up.new_empty(0), gamma.new_empty(0)))
    dw_down = _skipped_like(w_down, need_down)
    if need_down:
        _launch(module, down_grad, dacc_down, h, dw_down)
    return dx, drs, dw_gate_up, dgamma, dw_down


def _norm_swiglu_mlp_backward_fake(dz, dsum_sq, x, rs, w_gate_up, gamma, w_down, h, g, u,
                                   folded, z, need_x, need_gate_up, need_down):
    return (_skipped_like(x, need_x), torch.empty_like(rs),
            _skipped_like(w_gate_up, need_gate_up), _skipped_like(gamma, need_gate_up),
            _skipped_like(w_down, need_down))


def _norm_mlp_setup_context(ctx, inputs, output):
    z, _, h, g, u, folded = output
    ctx.save_for_backward(*inputs, h, g, u, folded, z)
    ctx.set_materialize_grads(False)


def _norm_mlp_backward(ctx, run, dz, dsum_sq, dh, dg, du, dfolded):
    x = ctx.saved_tensors[0]
    if dz is None and dsum_sq is None:
        return None, None, None, None, None
    dz = _zeros_if_none(dz, *x.shape, dtype=torch.bfloat16, like=x)
    dsum_sq = _zeros_if_none(dsum_sq, x.shape[0], dtype=torch.float32, like=x)
    need = ctx.needs_input_grad
    need_gate_up = need[2] or need[3]
    dx, drs, dw_gate_up, dgamma, dw_down = run(dz, dsum_sq, *ctx.saved_tensors, need[0],
                                               need_gate_up, need[4])
    return (_needed(dx, need[0]), drs, _needed(dw_gate_up, need[2]), _needed(dgamma, need[3]),
            _needed(dw_down, need[4]))


_norm_swiglu_mlp = _Op("norm_swiglu_mlp", _norm_swiglu_mlp_forward,
                       _norm_swiglu_mlp_forward_fake, _norm_swiglu_mlp_backward,
                       _norm_swiglu_mlp_backward_fake, _norm_mlp_setup_context,
                       _norm_mlp_backward)


def norm_swiglu_mlp(x: torch.Tensor, rs: torch.Tensor, w_gate_up: torch.Tensor,
                    gamma: torch.Tensor, w_down: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """A Llama MLP block with its RMSNorm deferred and its residual:
    z = x + (silu(rs x Wg^T) * (rs x Wu^T)) W_down^T, and the row sums of
    squares of z (f32, for the next norm). x: T x H, the un-normalized
    residual stream; rs: T f32, the norm's row scale rsqrt(mean(x^2) + eps);
    w_gate_up: 2F x H (rows interleave gate and up); gamma: H, the norm's
    weight, folded into w_gate_up for the GEMM and differentiated in the
    weight gradient's epilogue; w_down: H x F; bf16. The backward recomputes
    no GEMM."""
    z, sum_sq = _norm_swiglu_mlp(x, rs, w_gate_up, gamma, w_down)[:2]
    return z, sum_sq


def _linear_norm_qkv_rope(x: torch.Tensor, rs: torch.Tensor, w: torch.Tensor,
                          gamma: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                          rotated: int, bias: Optional[torch.Tensor]
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """rs (x (W diag(gamma))^T) (+ bias) with rotary embeddings on its first
    `rotated` columns, and the folded weight W' = W diag(gamma) the backward
    reads."""
    _check("linear_norm_qkv_rope", x=x, w=w)
    tokens, n = x.shape[0], w.shape[0]
    _check_vector("linear_norm_qkv_rope", "rs", rs, torch.float32, tokens)
    _check_vector("linear_norm_qkv_rope", "gamma", gamma, torch.bfloat16, w.shape[1])
    program, head_dim = _check_rope("linear_norm_qkv_rope", tokens, n, cos, sin, rotated)
    _check_vector("linear_norm_qkv_rope", "bias", bias, torch.bfloat16, n, optional=True)
    function, biases = _with_bias("linear_norm_qkv_rope", bias)
    module, (forward,) = _kernels(program, function, "forward:gemm0")
    folded = _scale_columns(w, gamma)
    y = x.new_empty(tokens, n)
    _launch(module, forward, x.contiguous(), folded, rs.contiguous(), *biases,
            cos.contiguous(), sin.contiguous(), rotated // head_dim, y)
    return y, folded


def _linear_norm_qkv_rope_fake(x, rs, w, gamma, cos, sin, rotated, bias):
    return x.new_empty(x.shape[0], w.shape[0]), torch.empty_like(w)


def _linear_norm_qkv_rope_backward(dy: torch.Tensor, x: torch.Tensor, rs: torch.Tensor,
                                   w: torch.Tensor, gamma: torch.Tensor, cos: torch.Tensor,
                                   sin: torch.Tensor, folded: torch.Tensor, rotated: int,
                                   biased: bool, need_x: bool, need_w: bool
                                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                              torch.Tensor, torch.Tensor]:
    """dx, drs, dW, dgamma and (biased) db (the program's backward, written
    in it): the adjoint (epilogue only) applies the transposed rotation and
    rs to dy (dAcc), reducing db as column partials; dx = dAcc W' reduces
    x * dx as row partials, whose sums over rs are rs's gradient; dW =
    (dAcc^T x) diag(gamma) with gamma's gradient in one GEMM
    (norm_weight_grad). An empty db without a bias; dx and drs only with
    need_x, dW and dgamma only with need_w."""
    return _norm_rope_backward_parts([(w.shape[0], dy)], x, rs, w, gamma, cos, sin, folded,
                                     rotated, biased, need_x, need_w)


def _rope_adjoint_segments(name, module, adjoint, parts, x, n, head_dim, rotated, biased,
                           operands):
    """dAcc (T x n) of a Q/K/V + RoPE op's backward and, `biased`, its bias's
    column partials, from dy given as consecutive column segments, `parts`
    = [(columns, gradient or None for zero)], each gradient T x columns and
    each segment starting on a head: the adjoint (epilogue only) runs once
    per segment, reading its gradient where it is and writing its columns
    of dAcc, so that the attention's Q, K and V gradients are never
    concatenated. `operands(start, end)`: the adjoint's arguments before
    the segment's rotated head count."""
    if sum(columns for columns, _ in parts) != n:
        raise ValueError(f"{name}: the gradient's segments have "
                         f"{[columns for columns, _ in parts]} columns, not {n} in all")
    starts = [sum(columns for columns, _ in parts[:i]) for i in range(len(parts))]
    for start, (columns, dy) in zip(starts, parts):
        if start % head_dim or (dy is not None and tuple(dy.shape) != (x.shape[0], columns)):
            raise ValueError(f"{name}: a gradient segment must start on a head "
                             f"(of {head_dim} columns) and be ({x.shape[0]}, {columns}), got "
                             f"columns {start}..{start + columns}"
                             + ("" if dy is None else f" and shape {tuple(dy.shape)}"))
    dacc = x.new_empty(x.shape[0], n)
    bias_partials = _col_partials(x.shape[0], n, x.device) if biased else None
    for start, (columns, dy) in zip(starts, parts):
        end = start + columns
        outputs = [dacc[:, start:end]] + ([bias_partials[:, start:end]] if biased else [])
        if dy is None:
            for out in outputs:
                out.zero_()
            continue
        # Strided rows are read as they are; the elements must be adjacent.
        dy = dy.to(torch.bfloat16)
        if dy.stride(1) != 1:
            dy = dy.contiguous()
        # The segment's rotated heads, counted from its first column.
        heads = max(0, min(rotated - start, columns)) // head_dim
        _launch(module, adjoint, *operands(start, end), heads, dy, *outputs)
    return dacc, bias_partials


def _norm_rope_backward_parts(parts, x, rs, w, gamma, cos, sin, folded, rotated, biased,
                              need_x, need_w):
    """_linear_norm_qkv_rope_backward with dy given as consecutive column
    segments (_rope_adjoint_segments)."""
    program, head_dim = _rope_program("linear_norm_qkv_rope", cos)
    function = "linear_norm_qkv_rope_bias_backward" if biased else "linear_norm_qkv_rope_backward"
    module, (adjoint, data_grad, finish, *bias_finish) = _kernels(
        program, function, "adjoint:gemm0", "grad:gemm0.lhs", "grad:gemm0.input0",
        *(("grad:gemm0.input1",) if biased else ()))
    x, rs, cos, sin = x.contiguous(), rs.contiguous(), cos.contiguous(), sin.contiguous()
    dacc, bias_partials = _rope_adjoint_segments(
        "linear_norm_qkv_rope", module, adjoint, parts, x, w.shape[0], head_dim, rotated, biased,
        lambda start, end: (x, folded[start:end], rs, cos, sin))
    dx, drs = _skipped_like(x, need_x), _skipped_like(rs, need_x)
    if need_x:
        partials = _row_partials(x, x.shape[1])
        _launch(module, data_grad, dacc, folded, x, dx, partials)
        drs = _finish_rows(module, finish, partials) / rs
    dw, dgamma = (_norm_weight_grad(dacc, x, w, gamma) if need_w
                  else (w.new_empty(0), gamma.new_empty(0)))
    db = (_finish_cols(module, bias_finish[0], bias_partials).to(torch.bfloat16) if biased
          else x.new_empty(0))
    return dx, drs, dw, dgamma, db


def _linear_norm_qkv_rope_backward_fake(dy, x, rs, w, gamma, cos, sin, folded, rotated, biased,
                                        need_x, need_w):
    return (_skipped_like(x, need_x), _skipped_like(rs, need_x), _skipped_like(w, need_w),
            _skipped_like(gamma, need_w), x.new_empty(w.shape[0] if biased else 0))


def _norm_rope_save(ctx, inputs, output):
    x, rs, w, gamma, cos, sin, ctx.rotated, bias = inputs
    ctx.biased = bias is not None
    ctx.save_for_backward(x, rs, w, gamma, cos, sin, output[1])
    ctx.set_materialize_grads(False)


def _norm_rope_needs(ctx):
    """Whether the backward forms dx and drs (the data-gradient GEMM), and
    dW and dgamma (the weight gradient's)."""
    need = ctx.needs_input_grad
    return need[0] or need[1], need[2] or need[3]


def _norm_rope_grads(ctx, dx, drs, dw, dgamma, db):
    """The gradients of linear_norm_qkv_rope's inputs (x, rs, w, gamma, cos,
    sin, rotated, bias): None for those that need none."""
    need = ctx.needs_input_grad
    return (_needed(dx, need[0]), _needed(drs, need[1]), _needed(dw, need[2]),
            _needed(dgamma, need[3]), None, None, None, db if ctx.biased else None)


def _norm_rope_backward(ctx, run, dy, dfolded):
    if dy is None:
        return None, None, None, None, None, None, None, None
    return _norm_rope_grads(ctx, *run(dy, *ctx.saved_tensors, ctx.rotated, ctx.biased,
                                      *_norm_rope_needs(ctx)))


_linear_norm_qkv_rope_op = _Op("linear_norm_qkv_rope", _linear_norm_qkv_rope,
                               _linear_norm_qkv_rope_fake, _linear_norm_qkv_rope_backward,
                               _linear_norm_qkv_rope_backward_fake, _norm_rope_save,
                               _norm_rope_backward)


class _NormRopeSegments:
    """linear_norm_qkv_rope through _Segments."""

    @staticmethod
    def forward(ctx, x, rs, w, gamma, cos, sin, rotated, bias):
        y, folded = _linear_norm_qkv_rope(x, rs, w, gamma, cos, sin, rotated, bias)
        _norm_rope_save(ctx, (x, rs, w, gamma, cos, sin, rotated, bias), (y, folded))
        return y

    @staticmethod
    def backward(ctx, parts):
        return _norm_rope_grads(ctx, *_norm_rope_backward_parts(
            parts, *ctx.saved_tensors, ctx.rotated, ctx.biased, *_norm_rope_needs(ctx)))


def linear_norm_qkv_rope(x: torch.Tensor, rs: torch.Tensor, w: torch.Tensor,
                         gamma: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         rotated: int, bias: Optional[torch.Tensor] = None,
                         split: Optional[list[int]] = None):
    """The Q/K/V projection with its RMSNorm deferred: rs (x (W
    diag(gamma))^T) (+ bias), rotated as linear_qkv_rope rotates. x: T x H,
    the un-normalized residual stream; rs: T f32, the norm's row scale;
    w: N x H; gamma: H, the norm's weight (bf16), folded into w for the GEMM
    and differentiated in the weight gradient's epilogue; bias: None or N
    bf16, added before the rotation. Keeps the folded weight for the
    backward, which reduces rs's gradient from the input side (nothing of
    the product saved).

    With `split` (column counts, e.g. Q's, K's and V's, each a whole number
    of heads), returns the output's column segments as views, as
    torch.split would; in eager mode their gradients are then read where
    the attention leaves them, without being concatenated."""
    if split is None:
        return _linear_norm_qkv_rope_op(x, rs, w, gamma, cos, sin, rotated, bias)[0]
    return _segments("linear_norm_qkv_rope", lambda *inputs: _linear_norm_qkv_rope_op(*inputs)[0],
                     _NormRopeSegments, (x, rs, w, gamma, cos, sin, rotated, bias), split,
                     w.shape[0], cos.shape[-1])
