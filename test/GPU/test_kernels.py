"""GPU correctness suite: every epilogue primitive against fp32/fp64 PyTorch.

Runs on an sm_90a GPU with kernels compiled ahead of time by
`scripts/build-gpu-tests` and launched through the coda runtime's Python
bindings (see docs/Testing.md). Shapes include ones no tile
divides (M, N and K tails), a single row, and a benchmark-sized GEMM.

Every kernel runs twice on the same inputs and both results must be
bitwise equal (`run_twice`).

Tolerances: references are computed in float64 from the same bf16/f16
inputs. f32 outputs differ from them only by f32 accumulation order
(relative ~1e-6 of the dot products' magnitude): rtol 1e-4 and atol 1e-4 of the
output's scale. bf16 outputs add one rounding to bf16 (at most 2^-9 relative
for round-to-nearest, 2^-8 near binade edges): rtol 8e-3.
"""

import json
import math
import os
import threading

import coda_runtime
import pytest
import torch

BUILD = os.environ.get("CODA_GPU_TESTS", os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "gpu-tests"))

# Tails, one row, several k-tiles; and more tiles than an H100 has SMs with
# one k-tile each, so that persistent CTAs hand over several tiles quickly.
SHAPES = [(128, 128, 64), (200, 328, 200), (1, 136, 64), (300, 512, 1000),
          (16896, 512, 64)]
# K beyond 4096: GEMMs the selection dispatches by K (SwiGLU, log-sum-exp)
# run their cooperative variant there, their ping-pong one at SHAPES' K.
LONG_K_SHAPES = [(200, 328, 4104), (300, 512, 8192)]
HEAD_SHAPES = [(128, 128, 64), (200, 384, 200), (1, 128, 64), (300, 512, 1000),
               (16896, 512, 64)]


@pytest.fixture(scope="module")
def prims():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.empty(1, device="cuda")  # the runtime uses torch's CUDA context
    return coda_runtime.Module(os.path.join(BUILD, "primitives"))


def kernel_spec(function):
    with open(os.path.join(BUILD, "primitives", "manifest.json")) as f:
        (kernel,) = [k for k in json.load(f)["kernels"] if k["function"] == function]
    return kernel


def rand(*shape, dtype=torch.bfloat16, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(dtype)


def check_f32(out, ref):
    scale = ref.abs().max().item() + 1e-30
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4 * scale)


def check_bf16(out, ref):
    scale = ref.abs().max().item() + 1e-30
    torch.testing.assert_close(out.double(), ref, rtol=8e-3, atol=1e-3 * scale)


def bits(t):
    """`t`'s bytes, to compare results bitwise (NaN included)."""
    return t.detach().reshape(-1).view(torch.uint8)


def run_twice(launch, args):
    """Calls `launch()` twice and asserts that both calls leave every tensor
    among `args` bitwise the same: every kernel's results (partial
    reductions included) must not depend on scheduling. coda's kernels
    write their outputs whole and never their inputs, so the second call
    starts from the same inputs; the first call's outputs start as NaN in
    the tests, so an element a kernel forgets fails there."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    launch()
    torch.cuda.synchronize()
    first = [t.clone() for t in tensors]
    launch()
    torch.cuda.synchronize()
    for i, (t, f) in enumerate(zip(tensors, first)):
        assert torch.equal(bits(t), bits(f)), f"argument {i} differs between two runs"


def run(prims, function, *args):
    (kernel,) = prims.kernels_of(function)
    run_twice(lambda: prims.launch(kernel, list(args), torch.cuda.current_stream().cuda_stream),
              args)


def poison(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


@pytest.mark.parametrize("m,n,k", SHAPES + [(16384, 4096, 4096)])
def test_plain_nt(prims, m, n, k):
    a, b = rand(m, k), rand(n, k)
    y = poison(m, n, dtype=torch.bfloat16)
    run(prims, "plain_nt", a, b, y)
    check_bf16(y, a.double() @ b.double().T)


# A transposed lhs is K x M, so TMA needs M * 2 bytes to be a multiple of 16.
TRANSPOSED_LHS_SHAPES = [(128, 128, 64), (200, 328, 200), (8, 136, 64),
                         (304, 512, 1000), (16896, 512, 64), (4096, 4096, 16384)]


@pytest.mark.parametrize("m,n,k", TRANSPOSED_LHS_SHAPES)
def test_plain_tn(prims, m, n, k):
    a, b = rand(k, m), rand(k, n)
    out = poison(m, n, dtype=torch.bfloat16)
    run(prims, "plain_tn", a, b, out)
    check_bf16(out, a.double().T @ b.double())


def variants_of(function):
    """`function`'s GEMM kernels in the primitives' manifest: every variant
    of a GEMM dispatched by K or by waves."""
    with open(os.path.join(BUILD, "primitives", "manifest.json")) as f:
        return [k for k in json.load(f)["kernels"] if k["function"] == function]


# A weight gradient is dispatched by waves (128 x 256 tiles in clusters of
# two, or 128 x 128) where the selector chose its kernel: the launch by name
# picks one per shape, so each variant also runs by its own name at every
# shape. A build that forces one schedule (scripts/build-gpu-variants) has
# the one kernel.
@pytest.mark.parametrize("m,n,k", TRANSPOSED_LHS_SHAPES[:-1] + [(3072, 2048, 1024)])
def test_plain_tn_each_variant(prims, m, n, k):
    kernels = variants_of("plain_tn")
    by_waves = any("wave_cost" in kernel for kernel in kernels)
    assert len(kernels) == (2 if by_waves else 1), kernels
    names = [kernel["name"] for kernel in kernels]
    a, b = rand(k, m), rand(k, n)
    for name in names:
        out = poison(m, n, dtype=torch.bfloat16)
        run_twice(lambda: prims.launch(name, [a, b, out],
                                       torch.cuda.current_stream().cuda_stream), [a, b, out])
        check_bf16(out, a.double().T @ b.double())


@pytest.mark.parametrize("m,n,k", TRANSPOSED_LHS_SHAPES[:-1])
def test_plain_tt(prims, m, n, k):
    a, b = rand(k, m, dtype=torch.float16), rand(n, k, dtype=torch.float16)
    out = poison(m, n)
    run(prims, "plain_tt", a, b, out)
    check_f32(out, a.double().T @ b.double().T)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_plain_nn(prims, m, n, k):
    a, b = rand(m, k, dtype=torch.float16), rand(k, n, dtype=torch.float16)
    y = poison(m, n)
    run(prims, "plain_nn", a, b, y)
    check_f32(y, a.double() @ b.double())


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_residual_norm(prims, m, n, k):
    a, b, res = rand(m, k), rand(n, k), rand(m, n)
    scale, bias = torch.rand(m, device="cuda") + 0.5, torch.randn(n, device="cuda")
    s = 0.75
    h = poison(m, n, dtype=torch.bfloat16)
    hf = poison(m, n)
    ss = poison(m, math.ceil(n / 128))
    run(prims, "residual_norm", a, b, res, scale, bias, s, h, hf, ss)
    x = ((a.double() @ b.double().T) * scale.double()[:, None] + bias.double()) * s + res.double()
    check_f32(hf, x)
    check_bf16(h, x)
    pad = torch.zeros(m, ss.shape[1] * 128 - n, device="cuda", dtype=torch.float64)
    ref = torch.cat([hf.double() ** 2, pad], 1).view(m, -1, 128).sum(-1)
    check_f32(ss, ref)


@pytest.mark.parametrize("m,n,k", SHAPES + LONG_K_SHAPES)
def test_swiglu(prims, m, n, k):
    a, b = rand(m, k), rand(n, k)
    r = torch.rand(m, device="cuda") + 0.5
    out = poison(m, n // 2, dtype=torch.bfloat16)
    run(prims, "swiglu", a, b, r, out)
    x = (a.double() @ b.double().T) * r.double()[:, None]
    g, u = x[:, 0::2], x[:, 1::2]
    check_bf16(out, torch.nn.functional.silu(g) * u)


@pytest.mark.parametrize("function", ["rope", "rope_static_period"])
@pytest.mark.parametrize("m,n,k", HEAD_SHAPES)
def test_rope_rotate_half(prims, m, n, k, function):
    a, b = rand(m, k), rand(n, k)
    angle = torch.rand(m, 128, device="cuda") * 6.28
    cos, sin = angle.cos(), angle.sin()
    q = poison(m, n, dtype=torch.bfloat16)
    run(prims, function, a, b, cos, sin, q)
    x = (a.double() @ b.double().T).view(m, n // 128, 2, 64)
    c = cos.double().view(m, 1, 2, 64)
    s = sin.double().view(m, 1, 2, 64)
    lo, hi = x[:, :, 0], x[:, :, 1]
    y0 = lo * c[:, :, 0] - hi * s[:, :, 0]
    y1 = hi * c[:, :, 1] + lo * s[:, :, 1]
    check_bf16(q, torch.stack([y0, y1], 2).reshape(m, n))


@pytest.mark.parametrize("m,n,k", HEAD_SHAPES)
def test_rope_adjoint_reads_no_operand(prims, m, n, k):
    # The epilogue does not read the accumulator: operands of NaN must not
    # reach the output, which is the transposed rotation of dy alone.
    a = poison(m, k, dtype=torch.bfloat16)
    b = poison(n, k, dtype=torch.bfloat16)
    angle = torch.rand(m, 128, device="cuda") * 6.28
    cos, sin = angle.cos(), angle.sin()
    dy = rand(m, n)
    dx = poison(m, n, dtype=torch.bfloat16)
    run(prims, "rope_adjoint", a, b, cos, sin, dy, dx)
    d = dy.double().view(m, n // 128, 2, 64)
    c = cos.double().view(m, 1, 2, 64)
    s = sin.double().view(m, 1, 2, 64)
    d0, d1 = d[:, :, 0], d[:, :, 1]
    g0 = d0 * c[:, :, 0] + d1 * s[:, :, 1]
    g1 = d1 * c[:, :, 1] - d0 * s[:, :, 0]
    check_bf16(dx, torch.stack([g0, g1], 2).reshape(m, n))


@pytest.mark.parametrize("m,n,k", SHAPES + LONG_K_SHAPES)
def test_cross_entropy(prims, m, n, k):
    a, b = rand(m, k), rand(n, k)
    t = torch.randint(0, n, (m,), device="cuda")
    t[::3] = -100  # ignored rows keep the destination's value
    tiles = math.ceil(n / 128)
    lse, mx = poison(m, tiles), poison(m, tiles)
    pick = torch.full((m,), 7.0, device="cuda")
    run(prims, "cross_entropy", a, b, t, lse, mx, pick)
    logits = a.double() @ b.double().T
    pad = torch.full((m, tiles * 128 - n), -math.inf, device="cuda", dtype=torch.float64)
    blocks = torch.cat([logits, pad], 1).view(m, tiles, 128)
    check_f32(lse, torch.logsumexp(blocks, -1))
    check_f32(mx, blocks.amax(-1))
    valid = t >= 0
    expect = torch.full((m,), 7.0, device="cuda", dtype=torch.float64)
    expect[valid] = logits[valid, t[valid]]
    check_f32(pick, expect)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_positions_colsum(prims, m, n, k):
    a, b = rand(m, k), rand(k, n)
    tiles = math.ceil(m / 128)
    g, cs = poison(m, n), poison(tiles, n)
    cm = poison(tiles, n, dtype=torch.bfloat16)
    run(prims, "positions_colsum", a, b, g, cs, cm)
    acc = a.double() @ b.double()
    rows = torch.arange(m, device="cuda")[:, None]
    cols = torch.arange(n, device="cuda")[None, :]
    x = torch.where(cols <= rows, acc, torch.zeros_like(acc))
    sw = torch.empty_like(x)
    sw[:, 0::2] = x[:, 1::2]
    sw[:, 1::2] = x[:, 0::2] - x[:, 1::2]
    check_f32(g, sw)
    pad = torch.zeros(tiles * 128 - m, n, device="cuda", dtype=torch.float64)
    check_f32(cs, torch.cat([g.double(), pad]).view(tiles, 128, n).sum(1))
    ninf = torch.full((tiles * 128 - m, n), -math.inf, device="cuda", dtype=torch.float64)
    swb = g.to(torch.bfloat16).double()
    check_bf16(cm, torch.cat([swb, ninf]).view(tiles, 128, n).amax(1))


def test_launch_from_a_fresh_thread(prims):
    # A thread that has made no CUDA call has no current context (PyTorch's
    # autograd thread running a custom op's backward can be one): the
    # runtime makes the module's context current for the launch, and
    # encodes the kernel's TMA descriptors on that thread.
    (kernel,) = prims.kernels_of("plain_nt")
    a, b = rand(200, 136), rand(72, 136)
    y = poison(200, 72, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    failures = []

    def launch():
        try:
            prims.launch(kernel, [a, b, y], 0)
        except Exception as e:  # reported below, on the test's thread
            failures.append(e)

    worker = threading.Thread(target=launch)
    worker.start()
    worker.join()
    assert not failures, failures
    torch.cuda.synchronize()
    check_bf16(y, a.double() @ b.double().T)


def test_launch_in_cuda_graph(prims):
    # A launch passes its TMA descriptors by value: it can be captured into a
    # CUDA graph, and each replay reads the captured tensors' current values
    # (and, a persistent kernel, its own SM-sized grid). Two kernels, one
    # with a TMA-stored output, one with a residual and row partials.
    a, b = rand(300, 1000), rand(512, 1000)
    y = poison(300, 512, dtype=torch.bfloat16)
    res = rand(300, 512)
    scale, bias = torch.rand(300, device="cuda") + 0.5, torch.randn(512, device="cuda")
    h, hf, ss = poison(300, 512, dtype=torch.bfloat16), poison(300, 512), poison(300, 4)
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        graph.capture_begin()
        for function, args in [("plain_nt", [a, b, y]),
                               ("residual_norm", [a, b, res, scale, bias, 1.0, h, hf, ss])]:
            (kernel,) = prims.kernels_of(function)
            prims.launch(kernel, args, stream.cuda_stream)
        graph.capture_end()
    for _ in range(2):
        a.copy_(rand(300, 1000))
        res.copy_(rand(300, 512))
        for out in (y, h, hf, ss):
            out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        acc = a.double() @ b.double().T
        check_bf16(y, acc)
        x = acc * scale.double()[:, None] + bias.double() + res.double()
        check_f32(hf, x)
        check_bf16(h, x)
        check_f32(ss, (hf.double() ** 2).view(300, 4, 128).sum(-1))


def test_launches_at_new_addresses_keep_device_memory_flat(prims):
    # Every launch at a new tensor address once allocated and copied a
    # device-memory descriptor that lived as long as the module; now the
    # descriptors are launch parameters. 4000 launches, each with operands
    # at addresses no earlier launch used (views into one buffer), leave
    # the device's free memory as it was.
    (kernel,) = prims.kernels_of("plain_nt")
    pool = rand(4000 * 8 + 64 * 64)
    b = rand(64, 64)
    y = poison(64, 64, dtype=torch.bfloat16)
    stream = torch.cuda.current_stream().cuda_stream
    prims.launch(kernel, [pool[:64 * 64].view(64, 64), b, y], stream)
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    for i in range(4000):
        a = pool[8 * i:8 * i + 64 * 64].view(64, 64)  # 16-byte steps
        prims.launch(kernel, [a, b, y], stream)
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    assert free_after == free_before, (free_before - free_after)
    check_bf16(y, a.double() @ b.double().T)


def test_rejects_bad_arguments(prims):
    (kernel,) = prims.kernels_of("plain_nt")
    a, b, y = rand(64, 64), rand(64, 64), poison(64, 64, dtype=torch.bfloat16)
    with pytest.raises(coda_runtime.Error, match="lhs, argument 0 must be bf16, got f32"):
        prims.launch(kernel, [a.float(), b, y])
    with pytest.raises(coda_runtime.Error, match="TMA needs a multiple of 16"):
        prims.launch(kernel, [rand(64, 70)[:, :64], b, y])
    with pytest.raises(coda_runtime.Error, match="host memory"):
        prims.launch(kernel, [a, b, y.cpu()])
    with pytest.raises(coda_runtime.Error, match=r"must have shape \[64, 64\]"):
        prims.launch(kernel, [a, b, y[:, :32]])
    # launch_kernel takes the kernel's own parameters, no more.
    with pytest.raises(coda_runtime.Error, match="it takes 3 arguments, got 4"):
        prims.launch_kernel(kernel, [a, b, y, y], torch.cuda.current_stream().cuda_stream)
    # A role the compiler did not give is refused with the roles there are.
    with pytest.raises(coda_runtime.Error, match="no kernel of plain_nt has the role"):
        prims.kernel_for("plain_nt", "adjoint:gemm0")


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_wide_tile(prims, m, n, k):
    assert kernel_spec("wide_tile")["tile"][1] == 256  # the reduction's tile
    a, b = rand(m, k), rand(n, k)
    tiles = math.ceil(n / 256)
    y, rs = poison(m, n, dtype=torch.bfloat16), poison(m, tiles)
    run(prims, "wide_tile", a, b, y, rs)
    acc = a.double() @ b.double().T
    check_bf16(y, acc)
    pad = torch.zeros(m, tiles * 256 - n, device="cuda", dtype=torch.float64)
    check_f32(rs, torch.cat([acc, pad], 1).view(m, tiles, 256).sum(-1))


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_short_tile(prims, m, n, k):
    assert kernel_spec("short_tile")["tile"][0] == 64  # the reduction's tile
    a, b = rand(m, k), rand(n, k)
    tiles = math.ceil(m / 64)
    cs = poison(tiles, n)
    run(prims, "short_tile", a, b, cs)
    acc = a.double() @ b.double().T
    pad = torch.zeros(tiles * 64 - m, n, device="cuda", dtype=torch.float64)
    check_f32(cs, torch.cat([acc, pad]).view(tiles, 64, n).sum(1))


@pytest.mark.parametrize("m,n,k", [(200, 328, 200), (64, 136, 64)])
def test_unaligned_epilogue_tensors(prims, m, n, k):
    """Tile inputs and outputs whose rows are not 16-byte aligned take the
    element-by-element path."""
    a, b = rand(m, k), rand(n, k)
    res = rand(m, n + 1)[:, 1:]
    scale, bias = torch.rand(m, device="cuda") + 0.5, torch.randn(n, device="cuda")
    h = poison(m, n + 3, dtype=torch.bfloat16)[:, 3:]
    hf = poison(m, n + 1)[:, 1:]
    ss = poison(m, math.ceil(n / 128))
    run(prims, "residual_norm", a, b, res, scale, bias, 1.0, h, hf, ss)
    x = (a.double() @ b.double().T) * scale.double()[:, None] + bias.double() + res.double()
    check_f32(hf, x)
    check_bf16(h, x)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_swiglu_backward_adjoint(prims, m, n, k):
    # Against float64 torch autograd of the forward: the gradients of the
    # accumulator (bf16, one rounding) and of the row scale (the partials'
    # sum, f32).
    a, b = rand(m, k), rand(n, k)
    r = torch.rand(m, device="cuda") + 0.5
    dy = rand(m, n // 2)
    dacc = poison(m, n, dtype=torch.bfloat16)
    partials = poison(m, math.ceil(n / 128))
    run(prims, "swiglu_backward_adjoint", a, b, r, dy, dacc, partials)
    acc = (a.double() @ b.double().T).requires_grad_()
    scale = r.double().requires_grad_()
    x = acc * scale[:, None]
    h = torch.nn.functional.silu(x[:, 0::2]) * x[:, 1::2]
    h.backward(dy.double())
    check_bf16(dacc, acc.grad)
    check_f32(partials.sum(1), scale.grad)


# FP8 (cases/fp8.mlir). K is a multiple of 16: TMA needs rows of 16-byte
# multiples, 16 elements of one byte. References are float64 products of
# the dequantized 8-bit values. coda's FP8 kernels accumulate in WGMMA's
# FP8 accumulator over the whole K, which keeps fewer bits than f32 (about
# 14, DeepSeek-V3's report): the error grows with K. cuBLAS does the same
# with fast accumulation (torch._scaled_mm(use_fast_accum=True)), so coda's
# error must stay within 1.5x of cuBLAS's in that mode on the same operands
# with the same output rounding.
FP8_SHAPES = [(128, 128, 128), (200, 328, 208), (1, 136, 64), (300, 512, 1008),
              (16896, 512, 128), (2048, 4096, 4096)]


@pytest.fixture(scope="module")
def fp8():
    torch.empty(1, device="cuda")
    return coda_runtime.Module(os.path.join(BUILD, "fp8"))


def quantize_rows(x, dtype=torch.float8_e4m3fn):
    """x as `dtype` with one f32 scale per row (x ~ q * s)."""
    top = torch.finfo(dtype).max
    scale = x.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / top
    return (x / scale).to(dtype), scale.float()


def check_fp8(out, ref, fast_accum):
    """out's largest error against ref within 1.5x of cuBLAS's
    fast-accumulation result's (`fast_accum`, rounded to the same output
    type), plus 1e-4 of the scale."""
    scale = ref.abs().max().item() + 1e-30
    err = (out.double() - ref).abs().max().item() / scale
    vendor = (fast_accum.double() - ref).abs().max().item() / scale
    print(f"fp8 error / scale: coda {err:.2e}, cuBLAS fast accumulation {vendor:.2e}")
    assert not out.isnan().any()
    assert err <= 1.5 * vendor + 1e-4


def scaled_mm_fast(a8, w8, sa, sw):
    """torch._scaled_mm with fast accumulation, bf16 out. cuBLASLt needs N
    a multiple of 16: the weight's rows are padded with zeros, which changes
    no sum, and the padding's columns dropped."""
    n = w8.shape[0]
    pad = -n % 16
    if pad:
        w8 = torch.cat([w8, torch.zeros(pad, w8.shape[1], device="cuda", dtype=w8.dtype)])
        if sw.numel() > 1:
            sw = torch.cat([sw, torch.ones(1, pad, device="cuda")], dim=1)
    out = torch._scaled_mm(a8, w8.T, scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16,
                           use_fast_accum=True)
    return out[:, :n]


@pytest.mark.parametrize("m,n,k", FP8_SHAPES)
def test_fp8_rowwise(fp8, m, n, k):
    a8, sa = quantize_rows(torch.randn(m, k, device="cuda"))
    w8, sw = quantize_rows(torch.randn(n, k, device="cuda"))
    y = poison(m, n, dtype=torch.bfloat16)
    run(fp8, "fp8_rowwise", a8, w8, sa.view(m), sw.view(n), y)
    ref = (a8.double() @ w8.double().T) * sa.double() * sw.double().T
    check_fp8(y, ref, scaled_mm_fast(a8, w8, sa, sw.T.contiguous()))


@pytest.mark.parametrize("m,n,k", FP8_SHAPES)
def test_fp8_tensorwise(fp8, m, n, k):
    a8 = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w8 = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    y = poison(m, n, dtype=torch.bfloat16)
    run(fp8, "fp8_tensorwise", a8, w8, 0.125, y)
    ref = (a8.double() @ w8.double().T) * 0.125
    eighth, one = (torch.tensor(v, device="cuda") for v in (0.125, 1.0))
    check_fp8(y, ref, scaled_mm_fast(a8, w8, eighth, one))


@pytest.mark.parametrize("m,n,k", FP8_SHAPES)
def test_fp8_e5m2(fp8, m, n, k):
    torch.manual_seed(k)
    a8 = torch.randn(m, k, device="cuda").to(torch.float8_e5m2)
    w8 = torch.randn(n, k, device="cuda").to(torch.float8_e5m2)
    y = poison(m, n)
    run(fp8, "fp8_e5m2", a8, w8, 0.5, y)
    # cuBLAS has no e5m2 x e5m2 kernel to compare with. The products are
    # exact in f32 and go through WGMMA's FP8 accumulator, which keeps about
    # 14 significant bits (cuBLAS's fast accumulation is the same path): K
    # roundings of the running sum grow like sqrt(K) 2^-14 of its magnitude.
    # The bound is 3x that (e4m3 at K = 4096 measured 2.8e-3 against 1.2e-2);
    # a wrong product or a lost k-tile is off by order 1.
    ref = (a8.double() @ w8.double().T) * 0.5
    scale = ref.abs().max().item() + 1e-30
    err = (y.double() - ref).abs().max().item() / scale
    bound = 3 * math.sqrt(k) * 2.0 ** -14 + 1e-4
    print(f"fp8 e5m2 error / scale: {err:.2e} (bound {bound:.2e})")
    assert not y.isnan().any() and err <= bound


# Epilogues that produce FP8 (cases/fp8.mlir, quantize_*): coda rounds its
# f32 value of z to nearest even, NaN (e4m3) or the signed infinity (e5m2)
# beyond the range, as arith.truncf does; PyTorch's conversion of the
# float64 reference rounded to f32 is the reference. The two f32 values of z
# differ in their last bits (another summation order; FP8 operands
# accumulate in WGMMA's FP8 accumulator), so an element may take the
# neighbouring code where z lies that close to the boundary between them.
FP8_OUT_SHAPES = [(128, 128, 128), (200, 328, 208), (1, 136, 64), (300, 512, 1008),
                  (16896, 512, 128)]


def fp8_poison(m, n, dtype):
    return torch.full((m, n), 0x7F, device="cuda", dtype=torch.uint8).view(dtype)


def check_fp8_rounding(q, z, dtype, atol):
    """q is some z' within `atol` of z rounded to `dtype` (z' is coda's own
    f32 value of z, whose dot product rounds differently; its error scales
    with the terms summed, not with z, so `atol` is absolute). Rounding is
    monotonic: q lies between the roundings of z - atol and z + atol, NaN
    (e4m3's overflow) ordered as the infinity of its side. And q equals the
    rounding of z itself but for at most 2 % of the elements."""
    want = z.float().to(dtype)
    n = (bits(q) != bits(want)).sum().item()
    print(f"fp8 codes differing from the reference: {n} of {q.numel()}")
    assert n <= 0.02 * q.numel() + 1
    inf = float("inf")

    def ordered(v, side):
        return torch.where(v.isnan(), side.sign() * inf, v)

    lo, hi = z - atol, z + atol
    g = ordered(q.double(), z)
    lo_q = ordered(lo.float().to(dtype).double(), lo)
    hi_q = ordered(hi.float().to(dtype).double(), hi)
    ok = (lo_q <= g) & (g <= hi_q)
    assert bool(ok.all()), (f"codes beyond the rounding of z +- {atol:.2e}: coda "
                            f"{g[~ok][:5].tolist()}, z {z[~ok][:5].tolist()}")


@pytest.mark.parametrize("m,n,k", FP8_OUT_SHAPES)
def test_quantize_e4m3(fp8, m, n, k):
    torch.manual_seed(k)
    a, b = rand(m, k), rand(n, k)
    acc = a.double() @ b.double().T
    # About 1 % of the elements beyond e4m3's range: NaN there.
    s = 464.0 / acc.abs().reshape(-1)[:1 << 20].quantile(0.99).item()
    q = fp8_poison(m, n, torch.float8_e4m3fn)
    parts, amax = poison(m, math.ceil(n / 128)), poison(m)
    run_function(fp8, "quantize_e4m3", a, b, s, q, parts, amax)
    z = acc * torch.tensor(s, dtype=torch.float32).double()
    check_fp8_rounding(q, z, torch.float8_e4m3fn, 1e-5 * z.abs().max().item())
    assert q.float().isnan().any() or m * n < 1000
    pad = torch.zeros(m, parts.shape[1] * 128 - n, device="cuda", dtype=torch.float64)
    want = torch.cat([acc.abs(), pad], 1).view(m, -1, 128).amax(-1)
    check_f32(parts, want)
    check_f32(amax, want.amax(-1))


# FP8 training's token-major copies (cases/fp8.mlir, coda.transpose with
# 128 x 1 groups): small integer operands make every product and sum exact
# in f32 whatever the order, so codes and scales equal PyTorch's
# quantization of the exact values bit for bit. M = 1, 200 and 300 leave a
# ragged last column group and transposed rows not 16-byte aligned.
TRANSPOSED_SHAPES = FP8_OUT_SHAPES + [(2048, 4096, 4096)]


def small_ints(*shape):
    return torch.randint(-4, 5, shape, device="cuda").bfloat16()


def quantize_groups(y, axis):
    """y's e4m3 codes and f32 scales over groups of 128 along `axis` (1: 1 x
    128 within rows, 0: 128 x 1 down the columns), as the epilogues compute
    them: scale = max(amax, 1e-12) / 448 (divided by a tensor: PyTorch
    divides by a Python number as a multiplication by its reciprocal), codes
    = y / scale clamped to +-448."""
    if axis == 0:
        codes, scale = quantize_groups(y.T, 1)
        return codes.T, scale.T
    m, n = y.shape
    g = math.ceil(n / 128)
    yp = torch.cat([y, torch.zeros(m, g * 128 - n, device="cuda")], 1).view(m, g, 128)
    amax = yp.abs().amax(-1)
    scale = torch.clamp(amax, min=1e-12) / torch.full_like(amax, 448.0)
    codes = (yp / scale[..., None]).clamp(-448, 448).view(m, -1)[:, :n]
    return codes.to(torch.float8_e4m3fn), scale


@pytest.mark.parametrize("m,n,k", TRANSPOSED_SHAPES)
def test_transposed_quantize(fp8, m, n, k):
    """Both FP8 copies of one GEMM output: row-major with 1 x 128 scales and
    token-major (N x M) with 128 x 1 scales; a zero row and a zero column
    take the floor's scale and zero codes."""
    torch.manual_seed(k)
    a, b = small_ints(m, k), small_ints(n, k)
    a[m // 2], b[n // 3] = 0, 0
    q, qt = fp8_poison(m, n, torch.float8_e4m3fn), fp8_poison(n, m, torch.float8_e4m3fn)
    s, st = poison(m, math.ceil(n / 128)), poison(math.ceil(m / 128), n)
    run(fp8, "transposed_quantize", a, b, q, s, qt, st)
    y = a.float() @ b.float().T
    codes, scale = quantize_groups(y, 1)
    assert torch.equal(s, scale)
    assert torch.equal(bits(q), bits(codes))
    tcodes, tscale = quantize_groups(y, 0)
    assert torch.equal(st, tscale)
    assert torch.equal(bits(qt), bits(tcodes.T.contiguous()))
    assert not qt[n // 3].view(torch.uint8).any()
    assert not qt[:, m // 2].view(torch.uint8).any()


@pytest.mark.parametrize("m,n,k", TRANSPOSED_SHAPES)
def test_residual_transposed_quantize(fp8, m, n, k):
    """The residual stream h = x W^T + r in bf16 and its token-major FP8 copy
    with 128 x 1 scales (a tile input read before the rows and by them)."""
    torch.manual_seed(k)
    a, b, r = small_ints(m, k), small_ints(n, k), small_ints(m, n)
    h = poison(m, n, dtype=torch.bfloat16)
    qt, st = fp8_poison(n, m, torch.float8_e4m3fn), poison(math.ceil(m / 128), n)
    run(fp8, "residual_transposed_quantize", a, b, r, h, qt, st)
    want = (a.float() @ b.float().T + r.float()).bfloat16()
    assert torch.equal(bits(h), bits(want))
    tcodes, tscale = quantize_groups(want.float(), 0)
    assert torch.equal(st, tscale)
    assert torch.equal(bits(qt), bits(tcodes.T.contiguous()))


@pytest.mark.parametrize("m,n,k", TRANSPOSED_SHAPES)
def test_transposed_column_softmax(fp8, m, n, k):
    """A bf16 output written transposed (16-bit staging) beside a softmax
    down each 128-row group of a column (its sum reads its maximum)."""
    torch.manual_seed(k)
    a, b = small_ints(m, k), small_ints(n, k)
    yt, p = poison(n, m, dtype=torch.bfloat16), poison(m, n)
    run(fp8, "transposed_column_softmax", a, b, yt, p)
    y = a.double() @ b.double().T
    assert torch.equal(bits(yt), bits(y.T.bfloat16().contiguous()))
    g = math.ceil(m / 128)
    yp = torch.cat([y, torch.full((g * 128 - m, n), -math.inf, device="cuda",
                                  dtype=torch.float64)]).view(g, 128, n)
    want = torch.softmax(yp, 1).view(-1, n)[:m]
    torch.testing.assert_close(p.double(), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("m,n,k", FP8_OUT_SHAPES + [(200, 328, 4104), (300, 512, 8192)])
def test_fp8_copy_rowmax(fp8, m, n, k):
    """The residual stream in bf16 and its e4m3 copy under a per-row scale
    (half the rows' largest elements clamp to +-448), with its row maxima,
    at K where the selection runs ping-pong and beyond (cooperative)."""
    torch.manual_seed(k)
    a, b, res = rand(m, k), rand(n, k), rand(m, n)
    v = a.double() @ b.double().T + res.double()
    rs = 448.0 / (0.5 * v.abs().amax(1).float().clamp(min=1e-6))
    y, q = poison(m, n, dtype=torch.bfloat16), fp8_poison(m, n, torch.float8_e4m3fn)
    parts = poison(m, math.ceil(n / 128))
    run(fp8, "fp8_copy_rowmax", a, b, res, rs, y, q, parts)
    check_bf16(y, v)
    z = (v * rs.double()[:, None]).clamp(-448, 448)
    check_fp8_rounding(q, z, torch.float8_e4m3fn, 1e-5 * z.abs().max().item())
    pad = torch.zeros(m, parts.shape[1] * 128 - n, device="cuda", dtype=torch.float64)
    check_f32(parts, torch.cat([v.abs(), pad], 1).view(m, -1, 128).amax(-1))


@pytest.mark.parametrize("m,n,k", FP8_OUT_SHAPES)
def test_quantize_e5m2(fp8, m, n, k):
    torch.manual_seed(k)
    a, b = rand(m, k, dtype=torch.float16), rand(n, k, dtype=torch.float16)
    acc = a.double() @ b.double().T
    s = 61440.0 / acc.abs().reshape(-1)[:1 << 20].quantile(0.99).item()
    q = fp8_poison(m, n, torch.float8_e5m2)
    run(fp8, "quantize_e5m2", a, b, s, q)
    z = acc * torch.tensor(s, dtype=torch.float32).double()
    check_fp8_rounding(q, z, torch.float8_e5m2, 1e-5 * z.abs().max().item())
    assert q.float().isinf().any() or m * n < 1000


@pytest.mark.parametrize("m,n,k", FP8_OUT_SHAPES)
def test_fp8_rowwise_quantize(fp8, m, n, k):
    torch.manual_seed(k)
    a8, sa = quantize_rows(torch.randn(m, k, device="cuda"))
    w8, sw = quantize_rows(torch.randn(n, k, device="cuda"))
    y = (a8.double() @ w8.double().T) * sa.double() * sw.double().T
    # The next GEMM's scale from a smaller amax than this output's: the
    # largest elements clamp to +-448.
    qs = 448.0 / (0.5 * y.abs().max().item())
    q = fp8_poison(m, n, torch.float8_e4m3fn)
    parts = poison(m, math.ceil(n / 128))
    run(fp8, "fp8_rowwise_quantize", a8, w8, sa.view(m), sw.view(n), qs, q, parts)
    z = (y * torch.tensor(qs, dtype=torch.float32).double()).clamp(-448, 448)
    # WGMMA's FP8 accumulator keeps about 14 bits (test_fp8_e5m2's bound).
    bound = 3 * math.sqrt(k) * 2.0 ** -14 * (y.abs().max().item() * qs)
    check_fp8_rounding(q, z, torch.float8_e4m3fn, bound)
    assert q.float().isfinite().all()
    pad = torch.zeros(m, parts.shape[1] * 128 - n, device="cuda", dtype=torch.float64)
    want = torch.cat([y.abs(), pad], 1).view(m, -1, 128).amax(-1)
    scale = want.max().item()
    err = (parts.double() - want).abs().max().item() / scale
    assert err <= 3 * math.sqrt(k) * 2.0 ** -14 + 1e-6


def test_fp8_refuses_mismatched_operands(fp8):
    a8 = torch.randn(64, 64, device="cuda").to(torch.float8_e4m3fn)
    wb = torch.randn(64, 64, device="cuda").bfloat16()
    y = poison(64, 64, dtype=torch.bfloat16)
    (kernel,) = fp8.kernels_of("fp8_tensorwise")
    with pytest.raises(coda_runtime.Error, match="f8E4M3FN"):
        fp8.launch(kernel, [a8, wb, 1.0, y], torch.cuda.current_stream().cuda_stream)


# Batched GEMMs (test/GPU/cases/batched.mlir): (B, M, N, K) with tails in
# every dimension, one row per batch, and more tiles than SMs.
BATCHED_SHAPES = [(2, 128, 128, 64), (3, 200, 328, 200), (4, 1, 136, 64),
                  (2, 300, 512, 1000), (5, 2000, 512, 64)]


@pytest.fixture(scope="module")
def batched():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.empty(1, device="cuda")
    return coda_runtime.Module(os.path.join(BUILD, "batched"))


def run_function(module, function, *args):
    run_twice(lambda: module.launch_function(
        function, list(args), torch.cuda.current_stream().cuda_stream), args)


@pytest.mark.parametrize("bs,m,n,k", BATCHED_SHAPES)
def test_batched_residual_norm(batched, bs, m, n, k):
    torch.manual_seed(0)
    a, b, res = rand(bs, m, k), rand(bs, n, k), rand(bs, m, n)
    scale = torch.rand(bs, m, device="cuda") + 0.5
    bias = torch.randn(n, device="cuda")
    s = 0.75
    h, hf = poison(bs, m, n, dtype=torch.bfloat16), poison(bs, m, n)
    ss_part, ss = poison(bs, m, math.ceil(n / 128)), poison(bs, m)
    run_function(batched, "bmm_residual_norm", a, b, res, scale, bias, s, h, hf,
                 ss_part, ss)
    x = ((a.double() @ b.double().transpose(1, 2)) * scale.double()[..., None]
         + bias.double()) * s + res.double()
    check_f32(hf, x)
    check_bf16(h, x)
    pad = torch.zeros(bs, m, ss_part.shape[2] * 128 - n, device="cuda",
                      dtype=torch.float64)
    parts = torch.cat([hf.double() ** 2, pad], 2).view(bs, m, -1, 128).sum(-1)
    check_f32(ss_part, parts)
    check_f32(ss, parts.sum(-1))


@pytest.mark.parametrize("bs,m,n,k", BATCHED_SHAPES)
def test_batched_shared_rhs(batched, bs, m, n, k):
    torch.manual_seed(0)
    a, b = rand(bs, m, k, dtype=torch.float16), rand(k, n, dtype=torch.float16)
    tiles = math.ceil(m / 128)
    y, cs_part, cs = poison(bs, m, n), poison(bs, tiles, n), poison(bs, n)
    run_function(batched, "bmm_shared_nn", a, b, y, cs_part, cs)
    ref = a.double() @ b.double()
    check_f32(y, ref)
    pad = torch.zeros(bs, tiles * 128 - m, n, device="cuda", dtype=torch.float64)
    parts = torch.cat([ref, pad], 1).view(bs, tiles, 128, n).sum(2)
    check_f32(cs_part, parts)
    check_f32(cs, parts.sum(1))


@pytest.mark.parametrize("bs,m,n,k", [(2, 128, 128, 64), (3, 200, 328, 200),
                                      (4, 8, 136, 64), (2, 304, 512, 1000),
                                      (5, 2000, 512, 64)])
def test_batched_transposed_lhs(batched, bs, m, n, k):
    torch.manual_seed(0)
    a, b = rand(bs, k, m), rand(bs, k, n)
    y = poison(bs, m, n, dtype=torch.bfloat16)
    run_function(batched, "bmm_tn", a, b, y)
    check_bf16(y, a.double().transpose(1, 2) @ b.double())


def test_batched_rejects_bad_arguments(batched):
    (kernel,) = batched.kernels_of("bmm_tn")
    a, b = rand(2, 64, 64), rand(2, 64, 64)
    y = poison(2, 64, 64, dtype=torch.bfloat16)
    with pytest.raises(coda_runtime.Error, match="lhs has 2 batches but rhs has 3"):
        batched.launch(kernel, [a, rand(3, 64, 64), y])
    with pytest.raises(coda_runtime.Error, match="lhs, argument 0 must have rank 3, got 2"):
        batched.launch(kernel, [a[0], b, y])
    with pytest.raises(coda_runtime.Error,
                       match=r"must have shape \[2, 64, 64\] for B=2, M=64, N=64"):
        batched.launch(kernel, [a, b, y[:1]])
    with pytest.raises(coda_runtime.Error, match="batch stride is 8200 bytes"):
        batched.launch(kernel, [rand(2 * 4100).as_strided((2, 64, 64), (4100, 64, 1)), b, y])


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_group_statistics(prims, m, n, k):
    """1 x 128 FP8 quantization, per-head RMSNorm and per-group argmax in one
    epilogue: the codes and scales equal PyTorch's quantization of the
    kernel's own f32 values exactly, the norm matches f64 within bf16, and
    the argmax is torch.argmax's first maximum."""
    a, b = rand(m, k), rand(n, k)
    g128, g64 = math.ceil(n / 128), math.ceil(n / 64)
    q = torch.zeros(m, n, device="cuda", dtype=torch.float8_e4m3fn)
    s, y = poison(m, g128), poison(m, n)
    nrm = poison(m, n, dtype=torch.bfloat16)
    am = torch.full((m, g64), -1, device="cuda", dtype=torch.int64)
    run(prims, "group_statistics", a, b, q, s, y, nrm, am)
    check_f32(y, a.double() @ b.double().T)
    # Groups padded with zeros (which change no amax, sum of squares or
    # maximum of a group that has a value > 0; argmax is checked on the
    # values alone).
    yp = torch.cat([y, torch.zeros(m, g128 * 128 - n, device="cuda")], 1)
    amax = yp.view(m, g128, 128).abs().amax(-1)
    # Divided by a tensor: PyTorch divides by a Python number as a
    # multiplication by its reciprocal, one rounding off the kernel's
    # division.
    scale = torch.clamp(amax, min=1e-12) / torch.full_like(amax, 448.0)
    assert torch.equal(s, scale)
    codes = (yp.view(m, g128, 128) / scale[..., None]).clamp(-448, 448).view(m, -1)[:, :n]
    assert torch.equal(q.view(torch.uint8), codes.to(torch.float8_e4m3fn).view(torch.uint8))
    y64 = torch.cat([y.double(), torch.zeros(m, g64 * 64 - n, device="cuda",
                                             dtype=torch.float64)], 1).view(m, g64, 64)
    r = torch.rsqrt((y64 * y64).sum(-1) / 64 + 1e-6)
    check_bf16(nrm, (y64 * r[..., None]).view(m, -1)[:, :n])
    fl = torch.cat([y.floor(), torch.full((m, g64 * 64 - n), -math.inf, device="cuda")], 1)
    first = fl.view(m, g64, 64).argmax(-1) + torch.arange(g64, device="cuda") * 64
    assert torch.equal(am, first)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_group_quantize(prims, m, n, k):
    """The 1 x 128 FP8 quantization alone (the selection's ping-pong kernel,
    codes stored with TMA): small integer operands make every product and
    sum exact in f32 whatever the order, so the codes and scales equal
    PyTorch's quantization of the exact product bit for bit; a zero row
    takes the floor's scale and zero codes."""
    a = torch.randint(-4, 5, (m, k), device="cuda").bfloat16()
    b = torch.randint(-4, 5, (n, k), device="cuda").bfloat16()
    a[m // 2] = 0
    g = math.ceil(n / 128)
    q = torch.full((m, n), 1.0, device="cuda").to(torch.float8_e4m3fn)
    s = poison(m, g)
    run(prims, "group_quantize", a, b, q, s)
    y = a.float() @ b.float().T
    yp = torch.cat([y, torch.zeros(m, g * 128 - n, device="cuda")], 1).view(m, g, 128)
    amax = yp.abs().amax(-1)
    scale = torch.clamp(amax, min=1e-12) / torch.full_like(amax, 448.0)
    assert torch.equal(s, scale)
    codes = (yp / scale[..., None]).clamp(-448, 448).view(m, -1)[:, :n]
    assert torch.equal(q.view(torch.uint8), codes.to(torch.float8_e4m3fn).view(torch.uint8))
    assert not q[m // 2].view(torch.uint8).any()
