"""Whole compiled functions run by the runtime's launch_function: the shipped
Llama blocks (examples/llama-block-h2048.mlir, -h4096.mlir, and one at 1000
tokens, which no tile divides; scripts/build-gpu-tests compiles them) with
attention as a host callback, against the same block in PyTorch; a CUDA
graph capture of the block, replayed on new inputs; and device memory over
a training-length loop of launches whose tensors move.

Tolerance: coda's block rounds to bf16 where the linalg block does (q, k, v,
attention's output, h, the SwiGLU product, out). The reference is the block
in fp32 from the same bf16 weights; coda's error against it must stay
within 1.5x (plus a small floor) of PyTorch's own bf16 block, which rounds
at the same points: a fused kernel may not be less accurate than the
computation it replaces.
"""

import os

import coda_runtime
import pytest
import torch
import torch.nn.functional as F

BUILD = os.environ.get("CODA_GPU_TESTS", os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "gpu-tests"))

# (directory, tokens, hidden, heads, mlp). The last is small enough for
# compute-sanitizer, which instruments every access of every kernel
# (scripts/run-gpu-hygiene runs the block tests on it, not on t1000).
BLOCKS = [("llama-block-h2048", 16384, 2048, 16, 5632),
          ("llama-block-h4096", 16384, 4096, 32, 11008),
          ("llama-block-t1000", 1000, 2048, 16, 5632),
          ("llama-block-t200", 200, 256, 4, 704)]
# The blocks the function-level tests (callbacks, argument checks, CUDA
# graphs) run.
SMALL_BLOCKS = pytest.mark.parametrize("block", BLOCKS[2:], ids=lambda b: b[0])


def causal_attention(q, k, v, heads):
    t, d = q.shape
    hd = d // heads
    split = [x.view(t, heads, hd).transpose(0, 1)[None] for x in (q, k, v)]
    o = F.scaled_dot_product_attention(*split, is_causal=True)
    return o[0].transpose(0, 1).reshape(t, d)


def make_inputs(tokens, hidden, heads, mlp, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device="cuda") * scale).bfloat16()

    hd = hidden // heads
    pos = torch.arange(tokens, device="cuda", dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, hd, 2, device="cuda") / hd)
    ang = torch.cat([pos * inv, pos * inv], dim=1)
    return [randn(tokens, hidden), 1 + randn(hidden, scale=0.1),
            randn(hidden, hidden, scale=hidden ** -0.5),
            randn(hidden, hidden, scale=hidden ** -0.5),
            randn(hidden, hidden, scale=hidden ** -0.5),
            ang.cos().contiguous(), ang.sin().contiguous(),
            randn(hidden, hidden, scale=hidden ** -0.5),
            1 + randn(hidden, scale=0.1),
            randn(mlp, hidden, scale=hidden ** -0.5),
            randn(mlp, hidden, scale=hidden ** -0.5),
            randn(hidden, mlp, scale=mlp ** -0.5)]


def reference(inputs, heads, dtype):
    """The block in `dtype` (fp32: the reference; bf16: PyTorch's own
    computation, rounding where the linalg block does)."""
    x, an, wq, wk, wv, cos, sin, wo, mn, wg, wu, wd = [
        t.to(dtype) if t.dtype == torch.bfloat16 else t for t in inputs]
    r = lambda t: t.to(dtype)  # noqa: E731

    def rms(h, gamma):
        hf = h.float()
        n = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-5)
        return gamma * r(n)

    def rope(t):
        tokens, d = t.shape
        hd = d // heads
        t3 = t.view(tokens, heads, hd)
        rot = torch.cat([-t3[..., hd // 2:], t3[..., :hd // 2]], dim=-1)
        y = t3.float() * cos[:, None] + rot.float() * sin[:, None]
        return r(y).reshape(tokens, d)

    xn = rms(x, an)
    q, k, v = xn @ wq.T, xn @ wk.T, xn @ wv.T
    attn = causal_attention(rope(q), rope(k), v, heads)
    h = attn @ wo.T + x
    hn = rms(h, mn)
    act = r(F.silu(r(hn @ wg.T).float())) * r(hn @ wu.T)
    out = act @ wd.T + h
    return out.float(), out.float().pow(2).sum(-1, keepdim=True)


def attention_callback(heads):
    def run(args, stream):
        q, k, v, out = [coda_runtime.to_torch(a) for a in args]
        out.copy_(causal_attention(q, k, v, heads))
    return run


def run_block(module, inputs, tokens, hidden, workspace=None):
    out = torch.full((tokens, hidden), float("nan"), device="cuda",
                     dtype=torch.bfloat16)
    ss = torch.full((tokens, 1), float("nan"), device="cuda")
    module.launch_function("block", inputs + [out, ss],
                           torch.cuda.current_stream().cuda_stream, workspace)
    return out, ss


def relative_error(a, b):
    return ((a.float() - b).norm() / b.norm()).item()


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b[0])
def test_block_matches_pytorch(block):
    name, tokens, hidden, heads, mlp = block
    module = coda_runtime.Module(os.path.join(BUILD, name))
    module.set_callback("attention", attention_callback(heads))
    inputs = make_inputs(tokens, hidden, heads, mlp)
    # Every temporary starts as NaN (bytes 0xff are a NaN in f32 and bf16):
    # an element a kernel reads before any kernel wrote it reaches the output.
    workspace = torch.full((module.workspace_bytes("block"),), 255, device="cuda",
                           dtype=torch.uint8)
    out, ss = run_block(module, inputs, tokens, hidden, workspace)
    torch.cuda.synchronize()
    ref_out, ref_ss = reference(inputs, heads, torch.float32)
    bf_out, bf_ss = reference(inputs, heads, torch.bfloat16)
    assert not out.isnan().any() and not ss.isnan().any()
    for got, ref, torch_bf16 in ((out, ref_out, bf_out), (ss, ref_ss, bf_ss)):
        coda_error = relative_error(got, ref)
        torch_error = relative_error(torch_bf16, ref)
        print(f"{name}: coda {coda_error:.2e}, torch bf16 {torch_error:.2e}")
        assert coda_error <= 1.5 * torch_error + 1e-3


@SMALL_BLOCKS
def test_block_without_its_callback_is_refused(block):
    name, tokens, hidden, heads, mlp = block
    module = coda_runtime.Module(os.path.join(BUILD, name))
    with pytest.raises(coda_runtime.Error, match="register a callback"):
        run_block(module, make_inputs(tokens, hidden, heads, mlp), tokens, hidden)


@SMALL_BLOCKS
def test_block_arguments_are_checked(block):
    name, tokens, hidden, heads, mlp = block
    module = coda_runtime.Module(os.path.join(BUILD, name))
    module.set_callback("attention", attention_callback(heads))
    inputs = make_inputs(tokens, hidden, heads, mlp)
    inputs[2] = inputs[2].t()  # a transposed view of wq
    with pytest.raises(coda_runtime.Error, match="argument 2 must be contiguous"):
        run_block(module, inputs, tokens, hidden)
    strided = torch.empty(2 * module.workspace_bytes("block"), device="cuda",
                          dtype=torch.uint8)[::2]
    with pytest.raises(coda_runtime.Error, match="must be a contiguous tensor"):
        run_block(module, make_inputs(tokens, hidden, heads, mlp), tokens,
                  hidden, workspace=strided)
    small = torch.empty(module.workspace_bytes("block") // 2, device="cuda",
                        dtype=torch.uint8)
    with pytest.raises(coda_runtime.Error, match="needs a workspace of"):
        run_block(module, make_inputs(tokens, hidden, heads, mlp), tokens,
                  hidden, workspace=small)


@SMALL_BLOCKS
@pytest.mark.parametrize("dependent", [False, True], ids=["", "dependent_launch"])
def test_block_replays_in_a_cuda_graph(block, dependent):
    # Also with the kernels launched with programmatic stream serialization
    # (dependent_launch): captured, the graph keeps their dependencies.
    name, tokens, hidden, heads, mlp = block
    module = coda_runtime.Module(os.path.join(BUILD, name))
    module.dependent_launch = dependent
    module.set_callback("attention", attention_callback(heads))
    inputs = make_inputs(tokens, hidden, heads, mlp, seed=1)
    # NaN temporaries, as in test_block_matches_pytorch: an element read
    # before any kernel wrote it makes the replay differ from itself.
    workspace = torch.full((module.workspace_bytes("block"),), 255, device="cuda",
                           dtype=torch.uint8)
    out = torch.empty(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    ss = torch.empty(tokens, 1, device="cuda")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture
        module.launch_function("block", inputs + [out, ss], side.cuda_stream,
                               workspace)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        module.launch_function("block", inputs + [out, ss],
                               torch.cuda.current_stream().cuda_stream,
                               workspace)
    fresh = make_inputs(tokens, hidden, heads, mlp, seed=2)
    for buffer, value in zip(inputs, fresh):
        buffer.copy_(value)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    eager_out, eager_ss = run_block(module, fresh, tokens, hidden, workspace)
    torch.cuda.synchronize()
    assert torch.equal(out, eager_out)
    assert torch.equal(ss, eager_ss)


def test_device_memory_stays_flat_over_a_training_length_loop():
    name, tokens, hidden, heads, mlp = BLOCKS[2]
    module = coda_runtime.Module(os.path.join(BUILD, name))
    module.set_callback("attention", attention_callback(heads))
    weights = make_inputs(tokens, hidden, heads, mlp)[1:]

    def outside_torch():
        free, total = torch.cuda.mem_get_info()
        return total - free - torch.cuda.memory_reserved()

    def step():
        # New tensors every step: their addresses change, as in training.
        x = torch.randn(tokens, hidden, device="cuda").bfloat16()
        run_block(module, [x] + weights, tokens, hidden)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    before = outside_torch()
    for _ in range(500):
        step()
    torch.cuda.synchronize()
    after = outside_torch()
    print(f"device memory outside torch: {before} -> {after} bytes")
    assert after - before <= 2 ** 20
