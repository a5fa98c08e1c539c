"""One call that swaps coda's ops into a Hugging Face model of the Llama
family (Llama, Qwen2, Mistral: FAMILIES; below, Llama's class names stand
for each family's).

    model = LlamaForCausalLM(config).cuda().bfloat16()
    coda_torch.llama.apply(model)

- every LlamaMLP: gate_proj and up_proj become one parameter `gate_up`
  whose rows interleave them (row 2j: gate j, row 2j + 1: up j); the MLP
  runs as coda_torch.swiglu_mlp with down_proj's weight (the SwiGLU backward
  is computed in the epilogue of the GEMM producing its gradient);
- every LlamaAttention: q_proj, k_proj and v_proj become one parameter `qkv`
  (Q, K, V rows stacked; their biases, Qwen2's, one parameter `qkv_bias`)
  projected by coda_torch.linear_qkv_rope, which rotates Q and K
  (rotate_half, heads of 64 or 128) in the GEMM's epilogue; the attention
  itself is Hugging Face's (with the layer's sliding window, if any);
- every LlamaDecoderLayer (with both of the above): the layer runs as coda's
  ops alone around the attention: the input RMSNorm deferred into the Q/K/V
  GEMM (coda_torch.linear_norm_qkv_rope: its row scale on the accumulator,
  gamma folded into the weight), o_proj + residual + the next norm's sums of
  squares (coda_torch.linear_residual_norm), the post-attention norm
  deferred into gate/up and the down projection + residual + sums of
  squares (coda_torch.norm_swiglu_mlp); each layer hands its sums of
  squares to the next, so no norm runs apart from a GEMM but the first
  layer's input statistic;
- a LlamaForCausalLM given labels: the LM head and the shifted cross-entropy
  run as coda_torch.linear_norm_cross_entropy with the final RMSNorm
  deferred into it (its row scale on the accumulator, from the last layer's
  sums of squares; gamma scaling the LM head's input), so the logits are
  never stored and the final norm runs apart from no GEMM (the output then
  has no logits; without labels the original forward runs, the final norm
  included; where the model returns its hidden states, or while
  torch.compile traces it, the norm runs and the LM head is
  coda_torch.linear_cross_entropy); while its forward runs on the
  positions Hugging Face derives (no position_ids given), the mask builder's
  packed-sequence check, a device-to-host read, is skipped (it could find
  none), so the forward never waits for the GPU;
- with fp8=True the MLPs run as coda_torch.swiglu_mlp_fp8 (their GEMMs in
  FP8, row-wise scaled; the weight gradients bf16) and the decoder layers
  stay Hugging Face's around the patched modules.

The values are the same as before, so a patched model computes what the
original did, up to rounding (with fp8=True, up to FP8's rounding of the
MLPs' GEMM operands). The patched model keeps Hugging Face's
parameter names where they leave it: `state_dict()` (so `save_pretrained`)
writes gate_proj/up_proj and q_proj/k_proj/v_proj weights (and biases)
taken from the fused parameters, and `load_state_dict()` takes them back
into those; `unapply` restores the original modules. Projections must be
plain `nn.Linear` (merge PEFT/LoRA adapters first), without bias but on
Q/K/V; without an sm_90 GPU, `apply` warns and changes nothing.
"""

import contextvars
import types
import warnings
import weakref

import torch
from torch import nn

from .ops import (_ROPE_HEAD_PROGRAMS, linear_cross_entropy, linear_norm_cross_entropy,
                  linear_norm_qkv_rope, linear_qkv_rope, linear_residual_norm, norm_swiglu_mlp,
                  scale_columns, sum_squares, swiglu_mlp, swiglu_mlp_fp8)


def _plain(*linears):
    for linear in linears:
        if type(linear) is not nn.Linear:
            raise ValueError(
                f"coda_torch.llama: a projection is a {type(linear).__module__}."
                f"{type(linear).__name__}, not a plain nn.Linear (an adapter such as "
                "PEFT's LoRA?); coda's ops read the weight alone, so merge the adapters "
                "into the weights first (PEFT: merge_and_unload())")


def _no_bias(*linears):
    _plain(*linears)
    for linear in linears:
        if linear.bias is not None:
            raise ValueError("coda_torch.llama: biases are supported on q_proj, k_proj and "
                             "v_proj only (Qwen2's); this model has one on another "
                             "projection")


# Hugging Face's names in state dicts: a fused parameter is written as the
# weights it replaced (copies) and read back from them.


def _split_state(names, split):
    """A state-dict hook writing the fused parameter `names[0]` as the
    weights `names[1:]` (split(fused) gives them in that order)."""
    def hook(module, state, prefix, local_metadata):
        fused = state.pop(prefix + names[0])
        for name, part in zip(names[1:], split(module, fused)):
            state[prefix + name] = part.detach().clone()
    return hook


def _join_state(names, join):
    """A load-state-dict pre-hook reading the weights `names[1:]` into the
    fused parameter `names[0]` (join(module, parts))."""
    def hook(module, state, prefix, local_metadata, strict, missing, unexpected, errors):
        keys = [prefix + name for name in names[1:]]
        if all(key in state for key in keys):
            state[prefix + names[0]] = join(module, [state.pop(key) for key in keys])
    return hook


def _keep_hf_names(module, names, split, join):
    # register_state_dict_post_hook where torch has it (2.5 on).
    register = getattr(module, "register_state_dict_post_hook", None) or \
        module._register_state_dict_hook
    module._coda_hooks = getattr(module, "_coda_hooks", []) + [
        register(_split_state(names, split)),
        module.register_load_state_dict_pre_hook(_join_state(names, join)),
    ]


_MLP_NAMES = ("gate_up", "gate_proj.weight", "up_proj.weight")
_QKV_NAMES = ("qkv", "q_proj.weight", "k_proj.weight", "v_proj.weight")
_QKV_BIAS_NAMES = ("qkv_bias", "q_proj.bias", "k_proj.bias", "v_proj.bias")


def _split_gate_up(mlp, fused):
    pairs = fused.view(-1, 2, fused.shape[-1])
    return pairs[:, 0], pairs[:, 1]


def _join_gate_up(mlp, parts):
    return torch.stack(parts, dim=1).reshape(-1, parts[0].shape[-1])


def _split_qkv(attn, fused):
    return torch.split(fused, attn.qkv_sizes)


def _join_qkv(attn, parts):
    return torch.cat(parts)


# The patched forwards are methods bound to their module (types.MethodType),
# so that copy.deepcopy of a patched model binds them to the copy.


def _mlp_forward(mlp, x):
    op = swiglu_mlp_fp8 if mlp._coda_fp8 else swiglu_mlp
    z = op(x.reshape(-1, x.shape[-1]), mlp.gate_up, mlp.down_proj.weight)
    return z.view(*x.shape[:-1], z.shape[-1])


def _patch_mlp(mlp):
    gate, up = mlp.gate_proj, mlp.up_proj
    features, hidden = gate.weight.shape
    interleaved = torch.stack([gate.weight.data, up.weight.data], dim=1)
    mlp.gate_up = nn.Parameter(interleaved.reshape(2 * features, hidden),
                               requires_grad=gate.weight.requires_grad)
    del mlp.gate_proj, mlp.up_proj
    mlp.forward = types.MethodType(_mlp_forward, mlp)
    _keep_hf_names(mlp, _MLP_NAMES, _split_gate_up, _join_gate_up)


# The tables of the last call and what they were made from: every layer of a
# forward gets the same Hugging Face tables, which each layer would
# otherwise expand and copy again.
_last_tables = (None, None)


def _rope_tables(position_embeddings, input_shape):
    # Hugging Face's tables are batch (or 1) x sequence x head_dim in the
    # model's dtype; the kernels read one bf16 row per token.
    global _last_tables
    compiling = torch.compiler.is_compiling()
    if not compiling:
        made_from, tables = _last_tables
        if made_from is not None and made_from[2] == tuple(input_shape) and all(
                ref() is t and version == t._version
                for ref, version, t in zip(made_from[0], made_from[1], position_embeddings)):
            return tables
    tables = tuple(t.expand(*input_shape, t.shape[-1]).reshape(-1, t.shape[-1])
                   .to(torch.bfloat16) for t in position_embeddings)
    if not compiling:
        _last_tables = (([weakref.ref(t) for t in position_embeddings],
                         [t._version for t in position_embeddings], tuple(input_shape)), tables)
    return tables


def _attention_forward(attn, hidden_states, position_embeddings=None, attention_mask=None,
                       past_key_values=None, **kwargs):
    input_shape = hidden_states.shape[:-1]
    cos, sin = _rope_tables(position_embeddings, input_shape)
    # Q and K, stacked before V, rotate; Q, K and V as the projection's
    # column segments: their gradients from the attention go to the backward
    # as they are, not concatenated.
    qkv = linear_qkv_rope(hidden_states.reshape(-1, hidden_states.shape[-1]), attn.qkv,
                          cos, sin, attn.qkv_sizes[0] + attn.qkv_sizes[1], attn.qkv_bias,
                          split=attn.qkv_sizes)
    out, weights = _attend(attn, qkv, input_shape, attention_mask, past_key_values, **kwargs)
    return attn.o_proj(out).view(*input_shape, -1), weights


def _heads(parts, input_shape, head_dim):
    """Q, K and V as batch x heads x sequence x head_dim views of the
    projection's three column segments."""
    return tuple(t.view(*input_shape, -1, head_dim).transpose(1, 2) for t in parts)


def _attend(attn, qkv, input_shape, attention_mask, past_key_values, **kwargs):
    """Hugging Face's attention over the Q/K/V projection's Q, K and V column
    segments: the output as tokens x (heads x head_dim), and the attention
    weights."""
    from transformers.models.llama import modeling_llama as hf

    query, key, value = _heads(qkv, input_shape, attn.head_dim)
    if past_key_values is not None:
        key, value = past_key_values.update(key, value, attn.layer_idx)
    interface = hf.ALL_ATTENTION_FUNCTIONS.get_interface(
        attn.config._attn_implementation, hf.eager_attention_forward)
    # Qwen2's and Mistral's attention pass their sliding window (the layer's,
    # else the model's; None for Llama), which some interfaces apply.
    sliding_window = getattr(attn, "sliding_window",
                             getattr(attn.config, "sliding_window", None))
    out, weights = interface(attn, query, key, value, attention_mask,
                             dropout=attn.attention_dropout if attn.training else 0.0,
                             scaling=attn.scaling, sliding_window=sliding_window, **kwargs)
    return out.reshape(-1, out.shape[-2] * out.shape[-1]).contiguous(), weights


def _patch_attention(attn):
    q, k, v = attn.q_proj, attn.k_proj, attn.v_proj
    attn.qkv_sizes = [q.weight.shape[0], k.weight.shape[0], v.weight.shape[0]]
    attn.qkv = nn.Parameter(torch.cat([q.weight.data, k.weight.data, v.weight.data]),
                            requires_grad=q.weight.requires_grad)
    # Q/K/V biases (Qwen2's) stacked the same way, added before the rotation.
    attn.qkv_bias = None
    if q.bias is not None:
        attn.qkv_bias = nn.Parameter(torch.cat([q.bias.data, k.bias.data, v.bias.data]),
                                     requires_grad=q.bias.requires_grad)
        _keep_hf_names(attn, _QKV_BIAS_NAMES, _split_qkv, _join_qkv)
    del attn.q_proj, attn.k_proj, attn.v_proj
    attn.forward = types.MethodType(_attention_forward, attn)
    _keep_hf_names(attn, _QKV_NAMES, _split_qkv, _join_qkv)


# The residual stream's row sums of squares, from the GEMM that wrote it, ride
# on the tensor a patched decoder layer returns, for the next layer's input
# norm (checked against the tensor's version: an in-place change drops
# them). Without them (the first layer, or while torch.compile traces) the
# layer computes them.
_SUM_SQ = "_coda_sum_sq"


def _hand_on_sum_sq(hidden_states, sum_sq):
    """Attaches the row sums of squares of `hidden_states` for the next
    patched layer's input norm (what a patched layer does with its output)."""
    setattr(hidden_states, _SUM_SQ, (sum_sq, hidden_states._version))


def _stream_sum_sq(hidden_states, x):
    if not torch.compiler.is_compiling():
        stashed = getattr(hidden_states, _SUM_SQ, None)
        if stashed is not None and stashed[1] == hidden_states._version:
            return stashed[0]
    return sum_squares(x)


def _row_scale(sum_sq, norm, hidden):
    """The RMSNorm's row scale rsqrt(mean(x^2) + eps) from the sums of squares."""
    return torch.rsqrt(sum_sq * (1.0 / hidden) + norm.variance_epsilon)


def _decoder_layer_forward(layer, hidden_states, attention_mask=None, position_ids=None,
                           past_key_values=None, use_cache=False, cache_position=None,
                           position_embeddings=None, **kwargs):
    attn, mlp = layer.self_attn, layer.mlp
    input_shape = hidden_states.shape[:-1]
    hidden = hidden_states.shape[-1]
    x = hidden_states.reshape(-1, hidden)
    # Input norm deferred into the Q/K/V GEMM: its row scale applied to the
    # accumulator, gamma folded into the weight (W diag(gamma)) by the op,
    # whose weight-gradient GEMM also forms gamma's gradient.
    rs = _row_scale(_stream_sum_sq(hidden_states, x), layer.input_layernorm, hidden)
    cos, sin = _rope_tables(position_embeddings, input_shape)
    # Q, K and V as the projection's column segments: their gradients from
    # the attention go to the backward as they are, not concatenated.
    qkv = linear_norm_qkv_rope(x, rs, attn.qkv, layer.input_layernorm.weight, cos, sin,
                               attn.qkv_sizes[0] + attn.qkv_sizes[1], attn.qkv_bias,
                               split=attn.qkv_sizes)
    out, _ = _attend(attn, qkv, input_shape, attention_mask, past_key_values,
                     position_ids=position_ids, use_cache=use_cache,
                     cache_position=cache_position, **kwargs)
    # o_proj + residual, with the sums of squares for the next norm.
    h, sum_sq = linear_residual_norm(out, attn.o_proj.weight, x)
    # Post-attention norm deferred into gate/up; down + residual + sums of
    # squares.
    rs = _row_scale(sum_sq, layer.post_attention_layernorm, hidden)
    z, sum_sq = norm_swiglu_mlp(h, rs, mlp.gate_up, layer.post_attention_layernorm.weight,
                                mlp.down_proj.weight)
    result = z.view(*input_shape, hidden)
    if not torch.compiler.is_compiling():
        _hand_on_sum_sq(result, sum_sq)
    return result


def _patch_decoder_layer(layer):
    layer.forward = types.MethodType(_decoder_layer_forward, layer)


# Set while a patched causal LM's forward runs with the positions Hugging
# Face derives itself (no position_ids or cache_position given): consecutive
# in every row, so no row packs several sequences.
_CONSECUTIVE_POSITIONS = contextvars.ContextVar("coda_consecutive_positions", default=False)


def _skip_packed_sequence_check():
    """Hugging Face's mask builder looks for packed sequences in the
    position ids of a forward without a mask or cache (masking_utils.
    find_packed_sequence_indices), and in eager mode reads its answer on the
    host: the host waits for the GPU to drain (the previous step's optimizer
    included), then the GPU for the host to launch the layers. Wraps it once
    per process: while a patched forward runs on consecutive positions it
    answers "none" (what it would find) without looking; otherwise it runs
    as before."""
    try:
        from transformers import masking_utils
    except ImportError:
        return
    find = getattr(masking_utils, "find_packed_sequence_indices", None)
    if find is None or getattr(find, "_coda_wraps", None) is not None:
        return

    def find_packed_sequence_indices(position_ids):
        if _CONSECUTIVE_POSITIONS.get():
            return None
        return find(position_ids)

    find_packed_sequence_indices._coda_wraps = find
    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices


def _causal_lm_forward(model, *args, **kwargs):
    # (input_ids and attention_mask may come positionally; position_ids is
    # the third argument.)
    consecutive = (len(args) <= 2 and kwargs.get("position_ids") is None
                   and kwargs.get("cache_position") is None
                   and not torch.compiler.is_compiling())
    token = _CONSECUTIVE_POSITIONS.set(consecutive)
    try:
        return _causal_lm_forward_positioned(model, *args, **kwargs)
    finally:
        _CONSECUTIVE_POSITIONS.reset(token)


def _causal_lm_forward_positioned(model, *args, labels=None, num_items_in_batch=None, **kwargs):
    from transformers.modeling_outputs import CausalLMOutputWithPast

    if labels is None:
        return type(model).forward(model, *args, **kwargs)
    # The final norm deferred into the LM head: the model returns the
    # un-normalized residual stream (the final norm's patched forward passes
    # it through), whose row scale the LM head's epilogue applies, gamma
    # scaling its input. Not while torch.compile traces (the flag would be
    # traced as a side effect) or where the model returns its hidden states.
    norm = _deferred_final_norm(model)
    hidden_states_out = kwargs.get("output_hidden_states")
    if hidden_states_out is None:
        hidden_states_out = model.config.output_hidden_states
    defer = norm is not None and not torch.compiler.is_compiling() and not hidden_states_out
    if defer:
        norm._coda_defer = True
    try:
        outputs = model.model(*args, **kwargs)
    finally:
        if defer:
            norm._coda_defer = False
    hidden = outputs.last_hidden_state
    # Hugging Face's causal-LM loss: token t predicts label t + 1; the last
    # position and labels of -100 count for nothing.
    shifted = nn.functional.pad(labels, (0, 1), value=-100)[..., 1:]
    shifted = shifted.reshape(-1).to(hidden.device)
    x = hidden.reshape(-1, hidden.shape[-1])
    if defer:
        rs = _row_scale(_stream_sum_sq(hidden, x), norm, x.shape[-1])
        losses = linear_norm_cross_entropy(scale_columns(x, norm.weight), rs,
                                           model.lm_head.weight, shifted,
                                           save_logits=model._coda_save_logits)
    else:
        losses = linear_cross_entropy(x, model.lm_head.weight, shifted)
    count = num_items_in_batch
    if count is None:
        count = (shifted != -100).sum()
    return CausalLMOutputWithPast(loss=losses.sum() / count,
                                  past_key_values=outputs.past_key_values,
                                  hidden_states=outputs.hidden_states,
                                  attentions=outputs.attentions)


def _final_norm_forward(norm, hidden_states):
    if norm._coda_defer:
        return hidden_states
    return type(norm).forward(norm, hidden_states)


def _final_norm(model):
    return getattr(getattr(model, "model", None), "norm", None)


def _deferred_final_norm(model):
    """The model's final RMSNorm if the causal-LM patch defers it, else None."""
    norm = _final_norm(model)
    return norm if hasattr(norm, "_coda_defer") else None


def _patch_causal_lm(model):
    model.forward = types.MethodType(_causal_lm_forward, model)
    _skip_packed_sequence_check()
    # The final norm, a family's RMSNorm (gamma times the normalized rows),
    # passes its input through while the patched forward defers it.
    norm = _final_norm(model)
    if _is_family_rms_norm(norm):
        norm._coda_defer = False
        norm.forward = types.MethodType(_final_norm_forward, norm)


def _is_family_rms_norm(module):
    name = type(module).__name__
    return (name.endswith("RMSNorm") and name[:-len("RMSNorm")] in FAMILIES
            and isinstance(getattr(module, "weight", None), nn.Parameter)
            and hasattr(module, "variance_epsilon"))


def _unpatch_causal_lm(model):
    del model._coda_save_logits
    norm = _deferred_final_norm(model)
    if norm is not None:
        del norm.forward, norm._coda_defer


# The families whose modules the patches take (Hugging Face's class names
# are <family><module>): the same structure as Llama's, Qwen2 with biases
# on Q/K/V, Mistral with a sliding window its attention passes on.
FAMILIES = ("Llama", "Qwen2", "Mistral")
_PATCHES = {"mlp": ("MLP", _patch_mlp),
            "attention": ("Attention", _patch_attention),
            "layer": ("DecoderLayer", _patch_decoder_layer),
            "cross_entropy": ("ForCausalLM", _patch_causal_lm)}


def _patch_kind(module):
    """The patch that takes `module` (by its class name), or None."""
    name = type(module).__name__
    for kind, (suffix, _) in _PATCHES.items():
        if name.endswith(suffix) and name[:-len(suffix)] in FAMILIES:
            return kind
    return None


def apply(model, mlp=True, attention=True, layer=None, cross_entropy=True, fp8=False,
          save_logits=True):
    """Patches `model` (a LlamaForCausalLM, a LlamaModel, or any module
    holding Llama layers; or Qwen2's, Mistral's) in place; returns how many modules each patch
    changed, e.g. {"mlp": 2, "attention": 2, "layer": 2, "cross_entropy": 1}.
    `layer` (with mlp and attention) runs each decoder layer as coda's ops
    alone around the attention: both RMSNorms deferred into the next GEMM
    (row scale on the accumulator, gamma folded into its weight), o_proj and
    the down projection adding the residual and emitting the sums of squares
    the next norm needs. Raises ValueError, before changing anything, for
    what the ops cannot run (biases but on Q/K/V, an activation other than SiLU, heads
    other than 64 or 128, a layer whose forward is not Hugging Face's
    tensor-returning one) and for modules it patched before.

    `save_logits` (with cross_entropy): the LM head behind the deferred
    final norm keeps its logits in bf16 (2 bytes per token and vocabulary
    entry, held from the forward to the backward, which writes their
    gradient over them) instead of recomputing them in the backward: one
    GEMM of the size of the forward's less per step; False recomputes.
    (While torch.compile traces the model, the final norm runs and the LM
    head is coda_torch.linear_cross_entropy, which recomputes.)

    `fp8=True` runs the MLPs' GEMMs in FP8 (coda_torch.swiglu_mlp_fp8:
    row-wise scaled e4m3, weight gradients in bf16); the decoder-layer
    programs are bf16, so `layer` defaults to False with it (True is
    refused), the norms and residual adds staying torch's, the Q/K/V + RoPE
    projection and the LM head coda's bf16 ops."""
    if layer is None:
        layer = not fp8
    if fp8 and (layer or not mlp):
        raise ValueError("coda_torch.llama: fp8=True runs the MLPs in FP8 and needs mlp=True "
                         "and layer=False (the decoder-layer programs are bf16)")
    if layer and not (mlp and attention):
        raise ValueError("coda_torch.llama: layer=True needs mlp=True and attention=True")
    chosen = {"mlp": mlp, "attention": attention, "layer": layer,
              "cross_entropy": cross_entropy}
    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        found = "no CUDA GPU" if not torch.cuda.is_available() else (
            "a GPU of compute capability %d.%d" % torch.cuda.get_device_capability())
        warnings.warn(f"coda_torch.llama.apply: coda's kernels run on sm_90 (Hopper) GPUs "
                      f"and this process has {found}; the model is left unchanged",
                      stacklevel=2)
        return {kind: 0 for kind, on in chosen.items() if on}
    targets = [(kind, module) for module in model.modules()
               if (kind := _patch_kind(module)) is not None and chosen[kind]]
    for kind, module in targets:
        _check_supported(kind, module, fp8)
    counts = {kind: 0 for kind, on in chosen.items() if on}
    for kind, module in targets:
        if kind == "mlp":
            module._coda_fp8 = fp8
        elif kind == "cross_entropy":
            module._coda_save_logits = save_logits
        _PATCHES[kind][1](module)
        module._coda_patched = kind
        counts[kind] += 1
    return counts


def unapply(model):
    """Undoes apply on every module of `model` it patched: the original
    projections come back as nn.Linear modules holding the fused
    parameters' values (new parameters: an optimizer built on the patched
    model must be rebuilt), and the modules' own forwards run again.
    Returns how many modules of each kind were restored."""
    counts = {}
    for module in model.modules():
        kind = getattr(module, "_coda_patched", None)
        if not kind:
            continue
        for handle in module.__dict__.pop("_coda_hooks", []):
            handle.remove()
        if kind == "mlp":
            _restore_linears(module, _MLP_NAMES, _split_gate_up(module, module.gate_up))
            del module._coda_fp8
        elif kind == "attention":
            biases = None
            if module.qkv_bias is not None:
                biases = _split_qkv(module, module.qkv_bias)
            _restore_linears(module, _QKV_NAMES, _split_qkv(module, module.qkv), biases)
            del module.qkv_sizes, module.qkv_bias
        elif kind == "cross_entropy":
            _unpatch_causal_lm(module)
        del module.forward
        del module._coda_patched
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _restore_linears(module, names, parts, biases=None):
    fused = getattr(module, names[0])
    for i, (name, part) in enumerate(zip(names[1:], parts)):
        linear = nn.Linear(part.shape[1], part.shape[0], bias=biases is not None,
                           device=part.device, dtype=part.dtype)
        linear.weight = nn.Parameter(part.detach().contiguous(),
                                     requires_grad=fused.requires_grad)
        if biases is not None:
            linear.bias = nn.Parameter(biases[i].detach().contiguous(),
                                       requires_grad=module.qkv_bias.requires_grad)
        setattr(module, name.removesuffix(".weight"), linear)
    delattr(module, names[0])


def _check_supported(kind, module, fp8=False):
    if getattr(module, "_coda_patched", False):
        raise ValueError(f"coda_torch.llama: a {type(module).__name__} is patched already")
    if kind == "mlp":
        act = type(getattr(module, "act_fn", None)).__name__
        if act not in ("SiLU", "SiLUActivation"):
            raise ValueError(f"coda_torch.llama: the MLP activation must be SiLU, got {act}")
        _no_bias(module.gate_proj, module.up_proj, module.down_proj)
        sizes = (*module.gate_proj.weight.shape, module.down_proj.weight.shape[0])
        if fp8 and any(size % 16 for size in sizes):
            raise ValueError(f"coda_torch.llama: FP8 GEMMs need the MLP's sizes to be multiples "
                             f"of 16, got {sizes}")
    elif kind == "attention":
        if module.head_dim not in _ROPE_HEAD_PROGRAMS:
            raise ValueError(f"coda_torch.llama: the Q/K/V + RoPE op rotates heads of "
                             f"{' or '.join(map(str, sorted(_ROPE_HEAD_PROGRAMS)))}, got "
                             f"head_dim {module.head_dim}; pass attention=False to keep torch's")
        projections = (module.q_proj, module.k_proj, module.v_proj)
        _plain(*projections)
        if len({p.bias is None for p in projections}) > 1:
            raise ValueError("coda_torch.llama: q_proj, k_proj and v_proj must all have "
                             "biases or none")
    elif kind == "layer":
        import inspect

        returns = inspect.signature(type(module).forward).return_annotation
        if returns is not torch.Tensor and returns != "torch.Tensor":
            raise ValueError("coda_torch.llama: a LlamaDecoderLayer whose forward returns "
                             f"{returns} (this transformers version's); pass layer=False")
        _no_bias(module.self_attn.o_proj)
    else:
        _no_bias(module.lm_head)
