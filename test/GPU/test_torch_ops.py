"""coda_torch's autograd ops against float32 PyTorch autograd: outputs and
gradients of linear + SwiGLU, in eager and under torch.compile (the op stays
opaque; its fake implementation traces it). Kernels from
scripts/build-torch-kernels ($CODA_TORCH_KERNELS, default
build/torch-kernels). bf16 results are compared with a tolerance of a few
bf16 roundings relative to the largest reference value, as in test_kernels.py.
"""

import os
import sys

import pytest
import torch

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import coda_torch  # noqa: E402

KERNELS = os.environ.get("CODA_TORCH_KERNELS", os.path.join(ROOT, "build", "torch-kernels"))

# (tokens, hidden, features): ragged, and Llama-like.
SHAPES = [(200, 256, 384), (1000, 512, 768), (4096, 2048, 5632)]


@pytest.fixture(scope="module", autouse=True)
def kernels():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.empty(1, device="cuda")
    coda_torch.load(KERNELS)


def reference(x, w):
    g, u = x @ w[0::2].T, x @ w[1::2].T
    return torch.nn.functional.silu(g) * u


def close(got, want, rtol=2e-2):
    scale = want.abs().max().item()
    torch.testing.assert_close(got.float(), want, rtol=rtol, atol=rtol * scale)


def inputs(t, h, f, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(2 * f, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
    dy = torch.randn(t, f, device="cuda", generator=gen).bfloat16()
    return x, w, dy


def mlp_inputs(t, h, f, seed):
    """inputs() and a down-projection weight and output gradient drawn from
    a generator seeded seed + 1, returned with it for further draws."""
    x, w, _ = inputs(t, h, f, seed=seed)
    gen = torch.Generator(device="cuda").manual_seed(seed + 1)
    wd = (torch.randn(h, f, device="cuda", generator=gen) / f ** 0.5).bfloat16()
    dz = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    return x, w, wd, dz, gen


def float_grads(x, w, dy):
    xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
    y = reference(xr, wr)
    y.backward(dy.float())
    return y.detach(), xr.grad, wr.grad


@pytest.mark.parametrize("t,h,f", SHAPES)
def test_linear_swiglu_eager(t, h, f):
    x, w, dy = inputs(t, h, f)
    want_y, want_dx, want_dw = float_grads(x, w, dy)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = coda_torch.linear_swiglu(xc, wc)
    y.backward(dy)
    close(y, want_y)
    close(xc.grad, want_dx)
    close(wc.grad, want_dw)


def test_linear_swiglu_compiled():
    x, w, dy = inputs(1000, 512, 768, seed=1)

    def block(x, w):
        return coda_torch.linear_swiglu(x, w) * 2.0

    compiled = torch.compile(block, fullgraph=True)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = compiled(xc, wc)
    y.backward(dy)
    want_y, want_dx, want_dw = float_grads(x, w, dy * 2)
    close(y, want_y * 2)
    close(xc.grad, want_dx)
    close(wc.grad, want_dw)


def test_eager_and_compiled_paths_agree():
    """Eager calls run the autograd.Function (no custom-op dispatch), traced
    calls the custom op; both launch the same kernels, so their results
    and gradients are bitwise equal."""
    x, w, dy = inputs(1000, 512, 768, seed=2)
    xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = coda_torch.linear_swiglu(xe, we)
    assert type(y.grad_fn).__name__ == "linear_swigluBackward", type(y.grad_fn).__name__
    y.backward(dy)
    compiled = torch.compile(lambda x, w: coda_torch.linear_swiglu(x, w), fullgraph=True)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    yc = compiled(xc, wc)
    yc.backward(dy)
    assert torch.equal(y, yc)
    assert torch.equal(xe.grad, xc.grad)
    assert torch.equal(we.grad, wc.grad)


def test_linear_swiglu_rejects_bad_inputs():
    x, w, _ = inputs(64, 128, 64)
    with pytest.raises(ValueError, match="bf16"):
        coda_torch.linear_swiglu(x.float(), w)
    with pytest.raises(ValueError, match="even number of rows"):
        coda_torch.linear_swiglu(x, w[:-1])


@pytest.mark.parametrize("t,h,f", SHAPES)
@pytest.mark.parametrize("compiled", [False, True])
def test_swiglu_mlp(t, h, f, compiled):
    # The whole MLP with saved pre-activations: the SwiGLU derivative runs in
    # the epilogue of the GEMM producing dh and writes dgate / dup
    # interleaved; against float32 autograd of the unfused MLP.
    x, w, wd, dz, _ = mlp_inputs(t, h, f, seed=6)
    xr, wr, wdr = (v.float().requires_grad_() for v in (x, w, wd))
    want = reference(xr, wr) @ wdr.T
    want.backward(dz.float())
    op = torch.compile(coda_torch.swiglu_mlp, fullgraph=True) if compiled else coda_torch.swiglu_mlp
    xc, wc, wdc = (v.clone().requires_grad_() for v in (x, w, wd))
    got = op(xc, wc, wdc)
    got.backward(dz)
    close(got, want.detach())
    close(xc.grad, xr.grad)
    close(wc.grad, wr.grad)
    close(wdc.grad, wdr.grad)


def test_swiglu_mlp_rejects_bad_inputs():
    x, w, _ = inputs(64, 128, 64)
    wd = torch.empty(128, 63, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="w_down must have 64 columns"):
        coda_torch.swiglu_mlp(x, w, wd)
    with pytest.raises(ValueError, match="2-D bf16"):
        coda_torch.swiglu_mlp(x, w, wd.float())


def fp8_rows(t):
    """The recipe's row-wise e4m3 quantization in float32 (what
    coda_torch.quantize_rows computes): the dequantized values."""
    scale = t.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0
    q = (t.float() / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.float() * scale


@pytest.mark.parametrize("rows,cols", [(1, 16), (200, 384), (1000, 11264), (64, 32768)])
@pytest.mark.parametrize("transposed", [False, True])
def test_quantize_rows(rows, cols, transposed):
    # The FP8 ops' row quantization against PyTorch's: the same scales and
    # e4m3 codes (both divide IEEE-rounded), a zero row giving zeros.
    gen = torch.Generator(device="cuda").manual_seed(rows + cols)
    t = (torch.randn(rows, cols, device="cuda", generator=gen) * 3).bfloat16()
    t[0] = 0
    if transposed:
        t = t.T.contiguous().T
    q, scale = coda_torch.quantize_rows(t)
    want_scale = t.float().abs().amax(dim=1).clamp(min=1e-12) / 448.0
    want = (t.float() / want_scale[:, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    assert q.is_contiguous() and q.dtype == torch.float8_e4m3fn
    assert torch.equal(scale, want_scale)
    assert torch.equal(q.view(torch.uint8), want.view(torch.uint8))
    assert not q[0].float().any()


@pytest.mark.parametrize("rows,cols", [(1, 8), (200, 384), (1000, 2050), (11264, 2048)])
def test_scale_columns(rows, cols):
    # gamma's product (a weight's fold, the LM head's input): PyTorch's
    # value bitwise, and its gradients (dx bitwise, dv within a bf16 sum's
    # rounding), ragged sizes included.
    gen = torch.Generator(device="cuda").manual_seed(rows + cols)
    x = torch.randn(rows, cols, device="cuda", generator=gen).bfloat16()
    v = (1 + torch.randn(cols, device="cuda", generator=gen)).bfloat16()
    g = torch.randn(rows, cols, device="cuda", generator=gen).bfloat16()
    grads = []
    for product in (coda_torch.scale_columns, torch.mul):
        xl, vl = x.clone().requires_grad_(), v.clone().requires_grad_()
        y = product(xl, vl)
        y.backward(g)
        grads.append((y, xl.grad, vl.grad))
    (y, dx, dv), (want_y, want_dx, want_dv) = grads
    assert torch.equal(y, want_y) and torch.equal(dx, want_dx)
    close(dv, want_dv.float())
    with pytest.raises(ValueError, match="v must be a bf16"):
        coda_torch.scale_columns(x, v[:-1])


@pytest.mark.parametrize("rows,cols", [(1, 8), (333, 2048), (8192, 4096), (64, 3000)])
def test_sum_squares(rows, cols):
    # A norm's statistic apart from a GEMM: x.float().square().sum(-1)
    # within f32 summation order, its gradient 2 g x bitwise PyTorch's.
    gen = torch.Generator(device="cuda").manual_seed(rows + cols)
    x = torch.randn(rows, cols, device="cuda", generator=gen).bfloat16()
    g = torch.randn(rows, device="cuda", generator=gen)
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    got = coda_torch.sum_squares(got_x)
    want = want_x.float().square().sum(dim=-1)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    got.backward(g)
    want.backward(g)
    assert torch.equal(got_x.grad, want_x.grad)
    with pytest.raises(ValueError, match="x must be a 2-D bf16"):
        coda_torch.sum_squares(x.float())


@pytest.mark.parametrize("t,h,f", SHAPES)
@pytest.mark.parametrize("compiled", [False, True])
def test_swiglu_mlp_fp8(t, h, f, compiled):
    # The MLP with FP8 GEMMs against the recipe computed in float32 from the
    # same quantized operands, stage by stage from the kernels' own
    # intermediates (h, g, u; dAcc through dW_gate_up = dAcc^T x, which has
    # no quantization): each within a few bf16 roundings. Where the
    # reference quantizes a tensor the kernels computed too (dAcc for dx) a
    # bf16 rounding apart can move an element to the next e4m3 code (1/16
    # of it) or a row's scale with its maximum: 5 % of the largest value.
    # Then against float32 autograd of the unquantized MLP within FP8's
    # error (3 mantissa bits: each operand element off by up to 1/16).
    from coda_torch import ops
    x, w, wd, dz, _ = mlp_inputs(t, h, f, seed=8)

    z1, h1, g1, u1 = ops._swiglu_mlp_fp8_forward(x, w, wd)
    acc = fp8_rows(x) @ fp8_rows(w).T
    close(g1, acc[:, 0::2])
    close(u1, acc[:, 1::2])
    close(h1, torch.nn.functional.silu(acc[:, 0::2]) * acc[:, 1::2])
    close(z1, fp8_rows(h1) @ fp8_rows(wd).T)

    op = (torch.compile(coda_torch.swiglu_mlp_fp8, fullgraph=True) if compiled
          else coda_torch.swiglu_mlp_fp8)
    xc, wc, wdc = (v.clone().requires_grad_() for v in (x, w, wd))
    got = op(xc, wc, wdc)
    got.backward(dz)
    assert torch.equal(got, z1)  # the op runs the same kernels
    dh = fp8_rows(dz) @ fp8_rows(wd.T).T
    gv, uv = g1.float(), u1.float()
    s = torch.sigmoid(gv)
    dacc = torch.stack([dh * uv * s * (1 + gv * (1 - s)), dh * gv * s], dim=2).view(t, 2 * f)
    close(wc.grad, dacc.T @ x.float())
    close(wdc.grad, dz.float().T @ h1.float())
    close(xc.grad, fp8_rows(dacc.bfloat16()) @ fp8_rows(w.T).T, rtol=5e-2)

    xr, wr, wdr = (v.float().requires_grad_() for v in (x, w, wd))
    want = reference(xr, wr) @ wdr.T
    want.backward(dz.float())
    close(got, want.detach(), rtol=0.1)
    close(xc.grad, xr.grad, rtol=0.1)
    close(wc.grad, wr.grad, rtol=0.1)
    close(wdc.grad, wdr.grad, rtol=0.1)


def test_swiglu_mlp_fp8_refuses_bad_inputs():
    x, w, _ = inputs(64, 136, 64)
    wd = torch.empty(136, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="hidden size must be a multiple of 16"):
        coda_torch.swiglu_mlp_fp8(x, w, wd)
    x, w, _ = inputs(64, 128, 64)
    with pytest.raises(ValueError, match="w_down must have 64 columns"):
        coda_torch.swiglu_mlp_fp8(x, w, wd[:128, :63])


def llama_pair(family="Llama", **overrides):
    """A small causal LM of `family` (Llama, Qwen2, Mistral) and a copy."""
    import copy
    transformers = pytest.importorskip("transformers")
    settings = dict(vocab_size=1000, hidden_size=512, intermediate_size=768,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    max_position_embeddings=128)
    settings.update(overrides)
    torch.manual_seed(0)
    config = getattr(transformers, f"{family}Config")(**settings)
    original = getattr(transformers, f"{family}ForCausalLM")(config)
    original = original.cuda().to(torch.bfloat16)
    # RMSNorm weights away from their initial ones, so that gamma's factor in
    # the gradients of the weights it is folded into shows; biases (Qwen2's
    # Q/K/V) away from their initial zeros.
    with torch.no_grad():
        for name, p in original.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.5 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.5 * torch.randn_like(p))
    return original, copy.deepcopy(original)


# Llama with heads of 128 and of 64 (Llama 3.2 1B's size), Qwen2 (biases on
# Q/K/V) and Mistral with a sliding window shorter than the sequence.
FAMILY_CASES = [("Llama", {}), ("Llama", {"num_attention_heads": 8}), ("Qwen2", {}),
                ("Mistral", {"num_attention_heads": 8, "sliding_window": 48})]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("family,overrides", FAMILY_CASES,
                         ids=["llama", "llama_head_dim64", "qwen2", "mistral_window"])
def test_llama_patch_matches_original(compiled, family, overrides):
    # A patched Hugging Face Llama (each decoder layer as coda's ops: norms
    # deferred into Q/K/V + RoPE with grouped K/V heads and into the MLP,
    # o_proj and down + residual + sums of squares; LM head +
    # cross-entropy) computes what the original does: the loss with ignored
    # labels, and every weight's gradient, the norms' gammas included; also
    # under torch.compile, which fuses the rest around coda's opaque ops.
    original, patched = llama_pair(family, **overrides)
    assert coda_torch.llama.apply(patched) == {"mlp": 2, "attention": 2, "layer": 2,
                                               "cross_entropy": 1}
    step = torch.compile(patched) if compiled else patched
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    labels = ids.clone()
    labels[0, :17] = -100
    want = original(input_ids=ids, labels=labels).loss
    got = step(input_ids=ids, labels=labels)
    assert got.logits is None  # the LM head's logits are never stored
    want.backward()
    got.loss.backward()
    torch.testing.assert_close(got.loss.float(), want.float(), rtol=1e-2, atol=1e-2)
    for a, b in zip(original.model.layers, patched.model.layers):
        stacked = torch.stack([a.mlp.gate_proj.weight.grad, a.mlp.up_proj.weight.grad], 1)
        close(b.mlp.gate_up.grad.view_as(stacked), stacked.float(), rtol=5e-2)
        close(b.mlp.down_proj.weight.grad, a.mlp.down_proj.weight.grad.float(), rtol=5e-2)
        qkv = torch.cat([a.self_attn.q_proj.weight.grad, a.self_attn.k_proj.weight.grad,
                         a.self_attn.v_proj.weight.grad])
        close(b.self_attn.qkv.grad, qkv.float(), rtol=5e-2)
        assert (b.self_attn.qkv_bias is None) == (a.self_attn.q_proj.bias is None)
        if b.self_attn.qkv_bias is not None:
            biases = torch.cat([a.self_attn.q_proj.bias.grad, a.self_attn.k_proj.bias.grad,
                                a.self_attn.v_proj.bias.grad])
            close(b.self_attn.qkv_bias.grad, biases.float(), rtol=5e-2)
        close(b.self_attn.o_proj.weight.grad, a.self_attn.o_proj.weight.grad.float(), rtol=5e-2)
        for norm in ("input_layernorm", "post_attention_layernorm"):
            close(getattr(b, norm).weight.grad, getattr(a, norm).weight.grad.float(), rtol=5e-2)
    close(patched.lm_head.weight.grad, original.lm_head.weight.grad.float(), rtol=5e-2)
    # The final norm, deferred into the LM head in eager mode.
    close(patched.model.norm.weight.grad, original.model.norm.weight.grad.float(), rtol=5e-2)
    close(patched.model.embed_tokens.weight.grad,
          original.model.embed_tokens.weight.grad.float(), rtol=5e-2)
    with torch.no_grad():
        # Without labels the original forward runs on the patched layers.
        close(patched(input_ids=ids).logits, original(input_ids=ids).logits.float())
        # Returning the hidden states, the final norm runs (the last one
        # normalized, as Hugging Face's) and the loss is the same.
        out = step(input_ids=ids, labels=labels, output_hidden_states=True)
        torch.testing.assert_close(out.loss.float(), want.float(), rtol=1e-2, atol=1e-2)
        close(out.hidden_states[-1],
              original(input_ids=ids, output_hidden_states=True).hidden_states[-1].float())


def train_both(original, patched, compiled):
    """One forward + backward of `original` and of `patched` (under
    torch.compile if `compiled`) on the same tokens: their losses."""
    step = torch.compile(patched) if compiled else patched
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    want = original(input_ids=ids, labels=ids).loss
    got = step(input_ids=ids, labels=ids).loss
    want.backward()
    got.backward()
    return want, got


@pytest.mark.parametrize("compiled", [False, True])
def test_llama_patch_ops_only_matches_original(compiled):
    # apply(layer=False): the MLP, Q/K/V + RoPE (its Q, K and V as column
    # segments) and LM head ops in Hugging Face's layers, whose norms,
    # residual adds and o_proj stay torch's: the loss and the Q/K/V, o_proj
    # and embedding gradients are the original's.
    original, patched = llama_pair()
    assert coda_torch.llama.apply(patched, layer=False) == {"mlp": 2, "attention": 2,
                                                            "cross_entropy": 1}
    want, got = train_both(original, patched, compiled)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)
    for a, b in zip(original.model.layers, patched.model.layers):
        qkv = torch.cat([a.self_attn.q_proj.weight.grad, a.self_attn.k_proj.weight.grad,
                         a.self_attn.v_proj.weight.grad])
        close(b.self_attn.qkv.grad, qkv.float(), rtol=5e-2)
        close(b.self_attn.o_proj.weight.grad, a.self_attn.o_proj.weight.grad.float(), rtol=5e-2)
    close(patched.model.embed_tokens.weight.grad,
          original.model.embed_tokens.weight.grad.float(), rtol=5e-2)


def test_llama_patch_reads_nothing_back():
    # A training step of the patched model never waits for the GPU: with
    # the positions Hugging Face derives, its mask builder's packed-sequence
    # check (a device-to-host read) is skipped; any synchronizing torch call
    # raises in the sync debug mode's "error". The original model's forward
    # does read (the check), so the mode catches it.
    # Without a KV cache (training's setting; with one the builder does not
    # look).
    original, patched = llama_pair("Llama", use_cache=False)
    coda_torch.llama.apply(patched)
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    patched(input_ids=ids, labels=ids).loss.backward()  # loads the kernels
    torch.cuda.set_sync_debug_mode("error")
    try:
        patched(input_ids=ids, labels=ids).loss.backward()
        with pytest.raises(RuntimeError, match="synchroniz"):
            original(input_ids=ids, labels=ids)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_llama_patch_dependent_launch():
    # With coda's kernels launched with programmatic stream serialization
    # (each waits for the kernel before it before touching memory), a
    # training step's loss and gradients are those of the plain launches,
    # bit for bit (Hugging Face's eager attention: cuDNN's backward
    # accumulates dQ in an order of its own).
    _, patched = llama_pair("Llama", use_cache=False, attn_implementation="eager")
    coda_torch.llama.apply(patched)
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    results = []
    try:
        for dependent in (False, True):
            coda_torch.set_dependent_launch(dependent)
            patched.zero_grad(set_to_none=True)
            loss = patched(input_ids=ids, labels=ids).loss
            loss.backward()
            results.append((loss.detach(), [p.grad.clone() for p in patched.parameters()]))
    finally:
        coda_torch.set_dependent_launch(True)
    assert torch.equal(results[0][0], results[1][0])
    for off, on in zip(results[0][1], results[1][1]):
        assert torch.equal(off, on)


def weight_gradient_kernels():
    """The names of the kernels that form a patched Llama's weight
    gradients (each GEMM's dW; gamma's with the Q/K/V and gate/up ones),
    each kernel's launch-time variants included."""
    roles = [("norm_weight_grad", "norm_weight_grad", "forward:gemm0"),
             ("linear_residual_norm", "linear_residual_norm_backward", "grad:gemm0.rhs"),
             ("norm_swiglu_mlp", "norm_swiglu_mlp_backward", "grad:gemm1.rhs")]
    roles += [(program, "linear_norm_cross_entropy_backward", "grad:gemm0.rhs")
              for program in ("linear_norm_cross_entropy", "linear_norm_cross_entropy.saved")]
    names = {}
    for program, function, role in roles:
        module, (name,) = coda_torch.ops._kernels(program, function, role)
        names[name] = [k for k in module.kernels if k == name or k.startswith(name + "_")]
    return names


@pytest.mark.parametrize("compiled", [False, True])
def test_llama_patch_skips_frozen_gradients(compiled):
    # Frozen weights (the first layer's, the LM head's) get no gradient and
    # no weight-gradient GEMM runs for them; every other gradient is what
    # the model with nothing frozen computes (bit for bit in eager mode, with
    # Hugging Face's eager attention: cuDNN's backward accumulates dQ in an
    # order of its own).
    _, trainable = llama_pair("Llama", use_cache=False, attn_implementation="eager")
    coda_torch.llama.apply(trainable)
    import copy
    frozen = copy.deepcopy(trainable)
    frozen.model.layers[0].requires_grad_(False)
    frozen.lm_head.requires_grad_(False)
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    kernels = weight_gradient_kernels()
    launched, losses = [], []
    for model in (trainable, frozen):
        step = torch.compile(model) if compiled else model
        step(input_ids=ids, labels=ids).loss.backward()  # compiled: traced here
        model.zero_grad(set_to_none=True)
        loss = step(input_ids=ids, labels=ids).loss
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            loss.backward()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events()
                 if e.device_type == torch.autograd.DeviceType.CUDA]
        launched.append({k: sum(n in variants for n in names)
                         for k, variants in kernels.items()})
        losses.append(loss.detach())
    # Two layers: Q/K/V's and gate/up's weight gradients (with gamma's), o_proj's,
    # down's; and the LM head's. Frozen, the first layer's and the LM head's
    # are not launched.
    assert sum(launched[0].values()) == 9, launched[0]
    assert sum(launched[1].values()) == 4, launched[1]
    if compiled:
        close(losses[1], losses[0].float())
    else:
        assert torch.equal(losses[1], losses[0])
    for (name, a), b in zip(trainable.named_parameters(), frozen.parameters()):
        if not b.requires_grad:
            assert b.grad is None, name
        elif compiled:
            close(b.grad, a.grad.float(), rtol=5e-2)
        else:
            assert torch.equal(a.grad, b.grad), name


def test_llama_patch_keeps_packed_sequences():
    # Given position ids (two sequences packed in each row), the mask
    # builder still finds the packing: the patched model masks attention
    # across the boundary as the original does, with labels (coda's loss)
    # and without. With a mask of ones the builder does not look, so the
    # same positions without the packing's mask give other logits: a
    # skipped check would show.
    original, patched = llama_pair("Llama", use_cache=False)
    coda_torch.llama.apply(patched)
    ids = torch.randint(0, 1000, (2, 128), device="cuda")
    positions = torch.cat([torch.arange(48), torch.arange(80)]).cuda().expand(2, -1)
    with torch.no_grad():
        want = original(input_ids=ids, position_ids=positions).logits.float()
        close(patched(input_ids=ids, position_ids=positions).logits, want)
        torch.testing.assert_close(
            patched(input_ids=ids, labels=ids, position_ids=positions).loss.float(),
            original(input_ids=ids, labels=ids, position_ids=positions).loss.float(),
            rtol=1e-2, atol=1e-2)
        unmasked = original(input_ids=ids, position_ids=positions,
                            attention_mask=torch.ones_like(ids)).logits.float()
    close(unmasked[:, :48], want[:, :48])
    with pytest.raises(AssertionError):
        close(unmasked[:, 48:], want[:, 48:])


@pytest.mark.parametrize("compiled", [False, True])
def test_llama_patch_fp8(compiled):
    # fp8=True: the MLPs in FP8, the layers Hugging Face's around the
    # patched modules; the loss and gradients within FP8's error of the
    # original's.
    original, patched = llama_pair()
    with pytest.raises(ValueError, match="fp8=True .* layer=False"):
        coda_torch.llama.apply(patched, fp8=True, layer=True)
    assert coda_torch.llama.apply(patched, fp8=True) == {"mlp": 2, "attention": 2,
                                                         "cross_entropy": 1}
    want, got = train_both(original, patched, compiled)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    for a, b in zip(original.model.layers, patched.model.layers):
        stacked = torch.stack([a.mlp.gate_proj.weight.grad, a.mlp.up_proj.weight.grad], 1)
        close(b.mlp.gate_up.grad.view_as(stacked), stacked.float(), rtol=0.1)
        close(b.mlp.down_proj.weight.grad, a.mlp.down_proj.weight.grad.float(), rtol=0.1)
    close(patched.model.embed_tokens.weight.grad,
          original.model.embed_tokens.weight.grad.float(), rtol=0.1)
    assert coda_torch.llama.unapply(patched) == {"mlp": 2, "attention": 2, "cross_entropy": 1}
    assert not hasattr(patched.model.layers[0].mlp, "_coda_fp8")


def test_llama_patch_rejects_unsupported_models():
    # Heads of 32 cannot run through the Q/K/V + RoPE op: a clear error, and
    # nothing is changed; attention=False patches the rest.
    _, model = llama_pair(hidden_size=256, num_attention_heads=8)
    with pytest.raises(ValueError, match="rotates heads of 64 or 128, got head_dim 32"):
        coda_torch.llama.apply(model)
    assert hasattr(model.model.layers[0].mlp, "gate_proj")
    with pytest.raises(ValueError, match="layer=True needs mlp=True and attention=True"):
        coda_torch.llama.apply(model, attention=False)
    assert coda_torch.llama.apply(model, attention=False, layer=False) == {
        "mlp": 2, "cross_entropy": 1}
    with pytest.raises(ValueError, match="is patched already"):
        coda_torch.llama.apply(model, attention=False, layer=False)
    # Biases: Llama's attention_bias puts one on o_proj too, which the
    # decoder-layer op cannot add (its Q/K/V ones it can); biases on some of
    # Q/K/V only are refused.
    _, model = llama_pair(attention_bias=True)
    with pytest.raises(ValueError, match="biases are supported on q_proj, k_proj and v_proj"):
        coda_torch.llama.apply(model)
    assert coda_torch.llama.apply(model, layer=False)["attention"] == 2
    _, model = llama_pair("Qwen2")
    model.model.layers[1].self_attn.k_proj.bias = None
    with pytest.raises(ValueError, match="must all have biases or none"):
        coda_torch.llama.apply(model)
    # A copy of a patched model runs on its own weights.
    import copy
    clone = copy.deepcopy(model)
    assert clone.model.layers[0].mlp.forward.__self__ is clone.model.layers[0].mlp
    assert clone.forward.__self__ is clone


@pytest.mark.parametrize("family", ["Llama", "Qwen2"])
def test_llama_patch_keeps_hugging_face_names(tmp_path, family):
    # state_dict() of a patched model has the original's names and values
    # (gate_proj/up_proj and q_proj/k_proj/v_proj, with Qwen2's biases, from
    # the fused parameters), loads strictly into an unpatched model and back
    # into a patched one, and save_pretrained / from_pretrained round-trips
    # it.
    transformers = pytest.importorskip("transformers")
    original, patched = llama_pair(family)
    coda_torch.llama.apply(patched)
    want, got = original.state_dict(), patched.state_dict()
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        assert torch.equal(got[name], value), name
    # Into a patched model: new values land in the fused parameters.
    _, other = llama_pair(family)
    coda_torch.llama.apply(other)
    changed = {name: value * 2 for name, value in want.items()}
    other.load_state_dict(changed, strict=True)
    for name, value in other.state_dict().items():
        assert torch.equal(value, changed[name]), name
    layer = other.model.layers[1]
    assert torch.equal(layer.self_attn.qkv[:512], changed["model.layers.1.self_attn.q_proj.weight"])
    assert torch.equal(layer.mlp.gate_up[1::2], changed["model.layers.1.mlp.up_proj.weight"])
    if family == "Qwen2":
        assert torch.equal(layer.self_attn.qkv_bias[-layer.self_attn.qkv_sizes[2]:],
                           changed["model.layers.1.self_attn.v_proj.bias"])
    # Into an unpatched model, strictly.
    plain, _ = llama_pair(family)
    plain.load_state_dict(got, strict=True)
    patched.save_pretrained(tmp_path)
    loaded = getattr(transformers, f"{family}ForCausalLM").from_pretrained(
        tmp_path, torch_dtype=torch.bfloat16)
    for name, value in loaded.state_dict().items():
        assert torch.equal(value.cuda(), want[name]), name


@pytest.mark.parametrize("family", ["Llama", "Qwen2"])
def test_llama_patch_decodes_with_a_kv_cache(family):
    # Inference as generate() runs it: a prompt filling Hugging Face's KV
    # cache, then one token at a time against it (two rows of one token
    # each through the patched layers' GEMMs); the logits of every step
    # against the original model's.
    original, patched = llama_pair(family)
    coda_torch.llama.apply(patched)
    ids = torch.randint(0, 1000, (2, 67), device="cuda")
    with torch.no_grad():
        steps = []
        for model in (original, patched):
            out = model(input_ids=ids[:, :64], use_cache=True)
            logits = [out.logits[:, -1]]
            for t in range(64, 67):
                out = model(input_ids=ids[:, t:t + 1], past_key_values=out.past_key_values,
                            use_cache=True)
                logits.append(out.logits[:, -1])
            steps.append(logits)
    for want, got in zip(*steps):
        close(got, want.float(), rtol=3e-2)


@pytest.mark.parametrize("family", ["Llama", "Qwen2"])
def test_llama_unapply_restores_the_original_modules(family):
    original, patched = llama_pair(family)
    counts = coda_torch.llama.apply(patched)
    assert coda_torch.llama.unapply(patched) == counts
    modules = dict(patched.named_modules())
    assert sorted(modules) == sorted(dict(original.named_modules()))
    for name, module in original.named_modules():
        assert type(modules[name]) is type(module), name
        assert "forward" not in vars(modules[name]), name
    parameters = dict(patched.named_parameters())
    assert sorted(parameters) == sorted(dict(original.named_parameters()))
    for name, value in original.named_parameters():
        assert torch.equal(parameters[name], value), name
    ids = torch.randint(0, 1000, (2, 64), device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(patched(input_ids=ids).logits, original(input_ids=ids).logits)
    # It can be patched again.
    assert coda_torch.llama.apply(patched) == counts


def test_llama_patch_refuses_adapters_and_other_gpus(monkeypatch):
    # A projection that is not a plain nn.Linear (PEFT's LoRA layers wrap
    # or subclass it) is refused, not silently read without its adapter.
    class Adapted(torch.nn.Linear):
        pass

    _, model = llama_pair()
    q = model.model.layers[0].self_attn.q_proj
    adapted = Adapted(q.in_features, q.out_features, bias=False, device="cuda",
                      dtype=torch.bfloat16)
    model.model.layers[0].self_attn.q_proj = adapted
    with pytest.raises(ValueError, match="not a plain nn.Linear.*merge_and_unload"):
        coda_torch.llama.apply(model)
    assert hasattr(model.model.layers[0].mlp, "gate_proj")
    # Off an sm_90 GPU: a warning, and nothing changes.
    _, model = llama_pair()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: (8, 0))
    with pytest.warns(UserWarning, match="sm_90.*capability 8.0.*left unchanged"):
        counts = coda_torch.llama.apply(model)
    assert counts == {"mlp": 0, "attention": 0, "layer": 0, "cross_entropy": 0}
    assert hasattr(model.model.layers[0].self_attn, "q_proj")


@pytest.mark.parametrize("t,h,v", [(200, 256, 1000), (1000, 512, 32768)])
def test_linear_cross_entropy(t, h, v):
    gen = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(v, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
    target = torch.randint(0, v, (t,), device="cuda", generator=gen)
    target[::7] = -100  # ignored tokens: loss 0, no gradient
    dloss = torch.rand(t, device="cuda", generator=gen)
    xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
    want = torch.nn.functional.cross_entropy(xr @ wr.T, target, reduction="none")
    want.backward(dloss)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    got = coda_torch.linear_cross_entropy(xc, wc, target)
    got.backward(dloss)
    torch.testing.assert_close(got, want.detach(), rtol=1e-3, atol=1e-3)
    close(xc.grad, xr.grad)
    close(wc.grad, wr.grad)


def test_linear_cross_entropy_compiled():
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(512, 256, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(4096, 256, device="cuda", generator=gen) / 16).bfloat16()
    target = torch.randint(0, 4096, (512,), device="cuda", generator=gen)

    def loss_fn(x, w):
        return coda_torch.linear_cross_entropy(x, w, target).mean()

    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    torch.compile(loss_fn, fullgraph=True)(xc, wc).backward()
    xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
    torch.nn.functional.cross_entropy(xr @ wr.T, target).backward()
    close(xc.grad, xr.grad)
    close(wc.grad, wr.grad)


@pytest.mark.parametrize("t,h,v", [(200, 256, 1000), (1000, 512, 32768)])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("save_logits", [False, True], ids=["", "saved"])
def test_linear_norm_cross_entropy(t, h, v, compiled, save_logits):
    # The LM head + cross-entropy behind a deferred RMSNorm: the row scale
    # on the accumulator, its gradient reduced beside the adjoint, which
    # recomputes the product or reads the one the forward saved.
    gen = torch.Generator(device="cuda").manual_seed(4)
    x = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(v, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
    rs = (0.5 + torch.rand(t, device="cuda", generator=gen))
    target = torch.randint(0, v, (t,), device="cuda", generator=gen)
    target[::7] = -100  # ignored tokens: loss 0, no gradient
    dloss = torch.rand(t, device="cuda", generator=gen)
    xr, rr, wr = (a.float().detach().requires_grad_() for a in (x, rs, w))
    want = torch.nn.functional.cross_entropy(rr[:, None] * (xr @ wr.T), target,
                                             reduction="none")
    want.backward(dloss)
    op = (torch.compile(coda_torch.linear_norm_cross_entropy, fullgraph=True) if compiled
          else coda_torch.linear_norm_cross_entropy)
    xc, rc, wc = (a.detach().clone().requires_grad_() for a in (x, rs, w))
    got = op(xc, rc, wc, target, save_logits=save_logits)
    got.backward(dloss)
    torch.testing.assert_close(got, want.detach(), rtol=1e-3, atol=1e-3)
    close(xc.grad, xr.grad)
    close(rc.grad, rr.grad)
    close(wc.grad, wr.grad)


def test_linear_norm_cross_entropy_saved_logits_are_used_once():
    # In eager mode the saved logits' memory takes their gradient: a second
    # backward through the op is refused by PyTorch, not run on gradients.
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(256, 128, device="cuda", generator=gen).bfloat16().requires_grad_()
    w = (torch.randn(512, 128, device="cuda", generator=gen) / 12).bfloat16()
    rs = torch.ones(256, device="cuda")
    target = torch.randint(0, 512, (256,), device="cuda", generator=gen)
    loss = coda_torch.linear_norm_cross_entropy(x, rs, w, target, save_logits=True).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_linear_norm_cross_entropy_refuses_bad_arguments():
    x = torch.empty(64, 128, device="cuda", dtype=torch.bfloat16)
    w = torch.empty(256, 128, device="cuda", dtype=torch.bfloat16)
    target = torch.zeros(64, device="cuda", dtype=torch.int64)
    with pytest.raises(ValueError, match=r"rs must be a float32 CUDA tensor of shape \(64,\)"):
        coda_torch.linear_norm_cross_entropy(x, torch.ones(64, device="cuda").bfloat16(), w,
                                             target)
    with pytest.raises(ValueError, match=r"target must be int64 of shape \(64,\)"):
        coda_torch.linear_norm_cross_entropy(x, torch.ones(64, device="cuda"), w, target[:63])


def rope_reference(x, w, cos, sin, rotated, bias=None):
    return rotate(x @ w.T if bias is None else x @ w.T + bias, cos, sin, rotated)


def rotate(q, cos, sin, rotated):
    # rotate_half RoPE within each head (of the tables' width) on the first
    # `rotated` columns.
    head_dim = cos.shape[1]
    heads = q.view(q.shape[0], -1, head_dim)
    lo, hi = heads[..., :head_dim // 2], heads[..., head_dim // 2:]
    turned = torch.cat([-hi, lo], -1)
    rope = (heads * cos[:, None, :] + turned * sin[:, None, :]).view_as(q)
    return torch.cat([rope[:, :rotated], q[:, rotated:]], 1)


def rope_inputs(t, h, heads, seed, head_dim=128):
    """x, the stacked Q/K/V weight w (heads = (q, k, v) heads of head_dim),
    RoPE tables, the rotated column count (Q and K rotate, V does not) and
    dy."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    n = head_dim * sum(heads)
    x = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(n, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
    angles = torch.rand(t, head_dim // 2, device="cuda", generator=gen) * 6.28
    cos, sin = (torch.cat([f(angles)] * 2, 1).bfloat16() for f in (torch.cos, torch.sin))
    dy = torch.randn(t, n, device="cuda", generator=gen).bfloat16()
    return x, w, cos, sin, head_dim * (heads[0] + heads[1]), dy


# Heads of 128 and of 64 (the programs' head64 variants), ragged tokens,
# grouped K/V heads; with heads of 64 an odd head count leaves N off the
# tiles' multiples.
ROPE_CASES = [(200, 256, (2, 1, 1), 128), (1000, 512, (4, 2, 2), 128),
              (200, 256, (2, 1, 1), 64), (1000, 512, (8, 2, 2), 64), (333, 256, (3, 1, 1), 64)]


def rope_bias(n, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return (0.5 * torch.randn(n, device="cuda", generator=gen)).bfloat16()


@pytest.mark.parametrize("t,h,heads,head_dim", ROPE_CASES)
@pytest.mark.parametrize("biased", [False, True], ids=["", "bias"])
def test_linear_qkv_rope(t, h, heads, head_dim, biased):
    # With a bias (Qwen2's) added before the rotation: its gradient from the
    # adjoint's column partials.
    x, w, cos, sin, rotated, dy = rope_inputs(t, h, heads, seed=4, head_dim=head_dim)
    bias = rope_bias(w.shape[0], seed=5) if biased else None
    xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
    br = bias.float().requires_grad_() if biased else None
    want = rope_reference(xr, wr, cos.float(), sin.float(), rotated, br)
    want.backward(dy.float())
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    bc = bias.clone().requires_grad_() if biased else None
    got = coda_torch.linear_qkv_rope(xc, wc, cos, sin, rotated, bc)
    got.backward(dy)
    close(got, want.detach())
    close(xc.grad, xr.grad)
    close(wc.grad, wr.grad)
    if biased:
        close(bc.grad, br.grad)


def test_linear_qkv_rope_refuses_bad_arguments():
    x = torch.randn(64, 256, device="cuda").bfloat16()
    w = torch.randn(384, 256, device="cuda").bfloat16()
    cos = sin = torch.ones(64, 128, device="cuda").bfloat16()
    with pytest.raises(ValueError, match="cos must be bf16 of shape"):
        coda_torch.linear_qkv_rope(x, w, cos.float(), sin, 256)
    with pytest.raises(ValueError, match="rotated must be a multiple of 128 in \\[0, 384\\], got 200"):
        coda_torch.linear_qkv_rope(x, w, cos, sin, 200)
    with pytest.raises(ValueError, match="got 512"):
        coda_torch.linear_qkv_rope(x, w, cos, sin, 512)
    with pytest.raises(ValueError, match=r"head size in \[64, 128\], got \(64, 96\)"):
        coda_torch.linear_qkv_rope(x, w, cos[:, :96], sin[:, :96], 192)
    with pytest.raises(ValueError, match="rotated must be a multiple of 64 in \\[0, 384\\], got 96"):
        coda_torch.linear_qkv_rope(x, w, cos[:, :64], sin[:, :64], 96)
    with pytest.raises(ValueError, match=r"bias must be None or a bf16 CUDA tensor of shape \(384,\)"):
        coda_torch.linear_qkv_rope(x, w, cos, sin, 256, torch.zeros(383, device="cuda").bfloat16())


@pytest.mark.parametrize("t,h,n", [(200, 256, 320), (1000, 512, 2048)])
def test_linear_residual_norm(t, h, n):
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(n, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
    res = torch.randn(t, n, device="cuda", generator=gen).bfloat16()
    dh = torch.randn(t, n, device="cuda", generator=gen).bfloat16()
    ds = torch.randn(t, device="cuda", generator=gen) / n
    xr, wr, rr = (v.float().requires_grad_() for v in (x, w, res))
    hr = xr @ wr.T + rr
    want_ss = (hr * hr).sum(1)
    torch.autograd.backward([hr, want_ss], [dh.float(), ds])
    xc, wc, rc = (v.clone().requires_grad_() for v in (x, w, res))
    got_h, got_ss = coda_torch.linear_residual_norm(xc, wc, rc)
    torch.autograd.backward([got_h, got_ss], [dh, ds])
    close(got_h, hr.detach())
    close(got_ss, want_ss.detach(), rtol=1e-3)
    close(xc.grad, xr.grad)
    close(wc.grad, wr.grad)
    close(rc.grad, rr.grad)


def row_scale(x, eps=1e-5):
    return torch.rsqrt(x.float().square().mean(1) + eps)


def norm_gamma(h, gen):
    """An RMSNorm weight away from its initial ones, so that a gradient
    missing gamma's factor shows."""
    return (1 + 0.5 * torch.randn(h, device="cuda", generator=gen)).bfloat16()


@pytest.mark.parametrize("t,h,f", SHAPES)
@pytest.mark.parametrize("compiled", [False, True])
def test_norm_swiglu_mlp(t, h, f, compiled):
    # The MLP block with its norm deferred (row scale on the gate/up
    # accumulator, gamma folded into the weight) and its residual, with the
    # next norm's sums of squares; the backward recomputes no GEMM. Against
    # float32 autograd, the row scale's and gamma's gradients included.
    x, w, wd, dz, gen = mlp_inputs(t, h, f, seed=8)
    rs = row_scale(x)
    gamma = norm_gamma(h, gen)
    dss = torch.randn(t, device="cuda", generator=gen) / h
    xr, rr, wr, gr, wdr = (v.float().detach().requires_grad_() for v in (x, rs, w, gamma, wd))
    # bf16 W * gamma, as the op folds it.
    folded = wr * gr + ((w * gamma).float() - wr * gr).detach()
    want = xr + reference(xr * rr[:, None], folded) @ wdr.T
    want_ss = want.square().sum(1)
    torch.autograd.backward([want, want_ss], [dz.float(), dss])
    op = (torch.compile(coda_torch.norm_swiglu_mlp, fullgraph=True) if compiled
          else coda_torch.norm_swiglu_mlp)
    xc, rc, wc, gc, wdc = (v.detach().clone().requires_grad_() for v in (x, rs, w, gamma, wd))
    got, got_ss = op(xc, rc, wc, gc, wdc)
    torch.autograd.backward([got, got_ss], [dz, dss])
    close(got, want.detach())
    close(got_ss, want_ss.detach(), rtol=1e-2)
    for got_grad, want_grad in ((xc, xr), (rc, rr), (wc, wr), (gc, gr), (wdc, wdr)):
        close(got_grad.grad, want_grad.grad)


def test_norm_swiglu_mlp_refuses_bad_arguments():
    x, w, _ = inputs(64, 128, 64)
    wd = torch.empty(128, 64, device="cuda", dtype=torch.bfloat16)
    gamma = torch.ones(128, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"rs must be a float32 CUDA tensor of shape \(64,\)"):
        coda_torch.norm_swiglu_mlp(x, torch.ones(63, device="cuda"), w, gamma, wd)
    with pytest.raises(ValueError, match=r"w_down must be \(128, 64\)"):
        coda_torch.norm_swiglu_mlp(x, row_scale(x), w, gamma, wd[:, :63])
    with pytest.raises(ValueError, match=r"gamma must be a bf16 CUDA tensor of shape \(128,\)"):
        coda_torch.norm_swiglu_mlp(x, row_scale(x), w, gamma[:64], wd)
    with pytest.raises(ValueError, match=r"gamma must be a bf16 CUDA tensor of shape \(128,\)"):
        coda_torch.norm_swiglu_mlp(x, row_scale(x), w, gamma.float(), wd)


@pytest.mark.parametrize("t,h,heads,head_dim", ROPE_CASES)
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("biased", [False, True], ids=["", "bias"])
def test_linear_norm_qkv_rope(t, h, heads, head_dim, compiled, biased):
    # Q/K/V + RoPE with the input norm's row scale on the accumulator and
    # gamma folded into the weight; the backward reduces the row scale's
    # gradient from the input side and forms gamma's in the weight gradient;
    # with a bias added before the rotation, its gradient as the adjoint's
    # column partials.
    x, w, cos, sin, rotated, dy = rope_inputs(t, h, heads, seed=10, head_dim=head_dim)
    rs = row_scale(x)
    gamma = norm_gamma(h, torch.Generator(device="cuda").manual_seed(11))
    bias = rope_bias(w.shape[0], seed=12) if biased else None
    xr, rr, wr, gr = (v.float().detach().requires_grad_() for v in (x, rs, w, gamma))
    br = bias.float().requires_grad_() if biased else None
    folded = wr * gr + ((w * gamma).float() - wr * gr).detach()
    q = rr[:, None] * (xr @ folded.T)
    want = rotate(q if br is None else q + br, cos.float(), sin.float(), rotated)
    want.backward(dy.float())
    op = (torch.compile(coda_torch.linear_norm_qkv_rope, fullgraph=True) if compiled
          else coda_torch.linear_norm_qkv_rope)
    xc, rc, wc, gc = (v.detach().clone().requires_grad_() for v in (x, rs, w, gamma))
    bc = bias.clone().requires_grad_() if biased else None
    got = op(xc, rc, wc, gc, cos, sin, rotated, bc)
    got.backward(dy)
    close(got, want.detach())
    pairs = [(xc, xr), (rc, rr), (wc, wr), (gc, gr)] + ([(bc, br)] if biased else [])
    for got_grad, want_grad in pairs:
        close(got_grad.grad, want_grad.grad)


@pytest.mark.parametrize("t,h,heads,head_dim", ROPE_CASES)
@pytest.mark.parametrize("biased", [False, True], ids=["", "bias"])
@pytest.mark.parametrize("unused", [None, 1], ids=["", "k_unused"])
@pytest.mark.parametrize("normed", [True, False], ids=["norm", "plain"])
def test_linear_qkv_rope_segments(t, h, heads, head_dim, biased, unused, normed):
    # Split into Q, K and V (split=), the output is the unsplit op's, and the
    # backward, fed each segment's gradient where it lies (K's, strided,
    # from a wider tensor; none at all for an unused segment), gives the
    # unsplit op's gradients from the concatenated (zero-filled) dy, bit
    # for bit: the adjoint runs per segment on the same elements. Both
    # linear_norm_qkv_rope and linear_qkv_rope.
    x, w, cos, sin, rotated, dy = rope_inputs(t, h, heads, seed=14, head_dim=head_dim)
    rs = row_scale(x)
    gamma = norm_gamma(h, torch.Generator(device="cuda").manual_seed(15))
    bias = rope_bias(w.shape[0], seed=16) if biased else None
    op = coda_torch.linear_norm_qkv_rope if normed else coda_torch.linear_qkv_rope
    operands = (x, rs, w, gamma) if normed else (x, w)
    sizes = [head_dim * count for count in heads]
    wide = torch.randn(t, sizes[1] + 64, device="cuda").bfloat16()
    dys = [dy[:, :sizes[0]].contiguous(), wide[:, 64:], dy[:, sizes[0] + sizes[1]:].contiguous()]
    dys[1].copy_(dy[:, sizes[0]:sizes[0] + sizes[1]])
    if unused is not None:
        dys[unused] = None
    stacked = torch.cat([torch.zeros(t, n, device="cuda").bfloat16() if d is None else d
                         for d, n in zip(dys, sizes)], 1)
    grads = []
    for split in (None, sizes):
        leaves = [v.detach().clone().requires_grad_() for v in operands]
        bc = bias.clone().requires_grad_() if biased else None
        got = op(*leaves, cos, sin, rotated, bc, split=split)
        if split is None:
            got.backward(stacked)
            grads.append((got.detach(), [v.grad for v in leaves + ([bc] if biased else [])]))
            continue
        assert isinstance(got, tuple) and [g.shape[1] for g in got] == sizes
        torch.autograd.backward([g for g, d in zip(got, dys) if d is not None],
                                [d for d in dys if d is not None])
        grads.append((torch.cat(got, 1).detach(),
                      [v.grad for v in leaves + ([bc] if biased else [])]))
    assert torch.equal(grads[0][0], grads[1][0])
    for want, got in zip(grads[0][1], grads[1][1]):
        assert torch.equal(want, got)
    assert grads[1][1][0].abs().max() > 0


def test_linear_norm_qkv_rope_segments_refused():
    # Segments that miss the weight's rows or a head boundary are refused
    # before anything runs: a split when the op is called, gradient
    # segments in the backward.
    from coda_torch import ops
    x, w, cos, sin, rotated, dy = rope_inputs(64, 256, (2, 1, 1), seed=17)
    rs, gamma = row_scale(x), torch.ones(256, device="cuda").bfloat16()
    for split in ([256, 128], [192, 320], [512, 0]):
        with pytest.raises(ValueError, match=r"split must be positive column counts summing "
                                             r"to 512, each segment starting on a head of 128"):
            coda_torch.linear_norm_qkv_rope(x, rs, w, gamma, cos, sin, rotated, split=split)
        with pytest.raises(ValueError, match=r"linear_qkv_rope: split must be positive"):
            coda_torch.linear_qkv_rope(x, w, cos, sin, rotated, split=split)
    with pytest.raises(ValueError, match=r"linear_qkv_rope: the gradient's segments have"):
        ops._rope_backward_parts([(256, dy[:, :256]), (128, None)], x, w, cos, sin, rotated,
                                 False, True, True)
    folded = w * gamma
    with pytest.raises(ValueError, match=r"segments have \[256, 128\] columns, not 512"):
        ops._norm_rope_backward_parts([(256, dy[:, :256]), (128, None)], x, rs, w, gamma,
                                      cos, sin, folded, rotated, False, True, True)
    with pytest.raises(ValueError, match="must start on a head"):
        ops._norm_rope_backward_parts([(192, dy[:, :192]), (320, dy[:, 192:])], x, rs, w,
                                      gamma, cos, sin, folded, rotated, False, True, True)
    with pytest.raises(ValueError, match=r"and shape \(32, 128\)"):
        ops._norm_rope_backward_parts([(384, dy[:, :384]), (128, dy[:32, 384:])],
                                      x, rs, w, gamma, cos, sin, folded, rotated, False, True, True)


def kernels_launched(run, names):
    """How many kernels named in `names` (each with its launch-time
    variants: name_k4096, name_w1, ...) `run` launches."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return sum(any(e.name == n or e.name.startswith(n + "_") for n in names)
               for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def frozen_case(name):
    """An op's inputs, which of them are its data input and its weights, and
    the roles of its data- and weight-gradient kernels (program, function,
    role), for test_ops_skip_frozen_gradients."""
    t, h, f = 200, 256, 384
    x, w, wd, _, gen = mlp_inputs(t, h, f, seed=3)
    if name in ("swiglu_mlp", "swiglu_mlp_fp8"):
        fn = getattr(coda_torch, name)
        bf16 = ("swiglu_mlp", "swiglu_mlp_backward")
        data = None if name.endswith("fp8") else (*bf16, "grad:gemm0.lhs")
        return fn, (x, w, wd), 0, (1, 2), data, [(*bf16, "grad:gemm0.rhs"),
                                                 (*bf16, "grad:gemm1.rhs")]
    if name == "linear_swiglu":
        roles = ("linear_swiglu", "linear_swiglu_backward")
        return (coda_torch.linear_swiglu, (x, w), 0, (1,), (*roles, "grad:gemm0.lhs"),
                [(*roles, "grad:gemm0.rhs")])
    if name == "linear_cross_entropy":
        target = torch.randint(0, 2 * f, (t,), device="cuda", generator=gen)
        roles = ("linear_cross_entropy", "linear_cross_entropy_backward")
        return (coda_torch.linear_cross_entropy, (x, w, target), 0, (1,),
                (*roles, "grad:gemm0.lhs"), [(*roles, "grad:gemm0.rhs")])
    if name == "linear_qkv_rope":
        x, w, cos, sin, rotated, _ = rope_inputs(t, h, (2, 1, 1), seed=3)
        roles = ("linear_qkv_rope", "linear_qkv_rope_backward")
        return (coda_torch.linear_qkv_rope, (x, w, cos, sin, rotated), 0, (1,),
                (*roles, "grad:gemm0.lhs"), [(*roles, "grad:gemm0.rhs")])
    assert name == "linear_residual_norm"
    res = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    wo = (torch.randn(h, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
    roles = ("linear_residual_norm", "linear_residual_norm_backward")
    return (coda_torch.linear_residual_norm, (x, wo, res), 0, (1,), (*roles, "grad:gemm0.lhs"),
            [(*roles, "grad:gemm0.rhs")])


@pytest.mark.parametrize("name", ["linear_swiglu", "swiglu_mlp", "swiglu_mlp_fp8",
                                  "linear_cross_entropy", "linear_qkv_rope",
                                  "linear_residual_norm"])
def test_ops_skip_frozen_gradients(name):
    # An input that does not require a gradient gets none, and the GEMM that
    # would form it does not run: frozen weights (no dW GEMM) or a frozen
    # data input (no dX GEMM); the other gradients are those of the op with
    # nothing frozen, bit for bit.
    fn, args, data, weights, data_role, weight_roles = frozen_case(name)
    names = lambda roles: [coda_torch.ops._kernels(p, f, r)[1][0] for p, f, r in roles]
    gen = torch.Generator(device="cuda").manual_seed(4)

    def run(trained):
        leaves = [a.detach().clone().requires_grad_(i in trained) if i in (data, *weights)
                  else a for i, a in enumerate(args)]
        out = fn(*leaves)
        out = out[0] if isinstance(out, tuple) else out
        g = torch.randn(out.shape, device="cuda", generator=gen.manual_seed(4))
        loss = (out.float() * g).sum()
        return leaves, lambda: loss.backward()

    full, backward = run((data, *weights))
    backward()
    frozen, backward = run((data,))
    assert kernels_launched(backward, names(weight_roles)) == 0
    assert torch.equal(frozen[data].grad, full[data].grad)
    assert all(frozen[i].grad is None for i in weights)
    fixed, backward = run(weights)
    if data_role is not None:
        assert kernels_launched(backward, names([data_role])) == 0
    else:
        backward()
    assert fixed[data].grad is None
    for i in weights:
        assert torch.equal(fixed[i].grad, full[i].grad)


@pytest.mark.parametrize("t,n,h", [(200, 384, 256), (1000, 3072, 2048)])
def test_norm_weight_grad_each_variant(t, n, h):
    # The weight gradient with gamma's (norm_weight_grad) is dispatched by
    # waves between a 128 x 256 kernel and a 128 x 128 one: each runs here
    # by its own name against float32, whichever the launch would pick.
    from coda_torch import ops
    module, (gemm, finish) = ops._kernels("norm_weight_grad", "norm_weight_grad",
                                          "forward:gemm0", "forward:finish0")
    gen = torch.Generator(device="cuda").manual_seed(13)
    dacc = (torch.randn(t, n, device="cuda", generator=gen) / t ** 0.5).bfloat16()
    x = torch.randn(t, h, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(n, h, device="cuda", generator=gen) / h ** 0.5).bfloat16()
    gamma = norm_gamma(h, gen)
    dwf = dacc.float().T @ x.float()
    want_dw, want_dg = dwf * gamma.float(), (dwf * w.float()).sum(0)
    for name in (gemm, gemm + "_w1"):
        dw = torch.full_like(w, float("nan"))
        partials = torch.full(((n + 127) // 128, h), float("nan"), device="cuda")
        ops._launch(module, name, dacc, x, gamma, w, dw, partials)
        dg = torch.empty(h, device="cuda")
        ops._launch(module, finish, partials, dg)
        close(dw, want_dw)
        close(dg, want_dg)
