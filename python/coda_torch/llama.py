"""One call that swaps coda's ops into a Hugging Face Llama model.

    model = LlamaForCausalLM(config).cuda().bfloat16()
    coda_torch.llama.apply(model)   # every LlamaMLP: gate/up + SwiGLU by coda

Each LlamaMLP's gate_proj and up_proj become one parameter `gate_up` whose
rows interleave them (row 2j: gate j, row 2j + 1: up j), the layout
coda_torch.linear_swiglu reads; down_proj stays a torch Linear. The values
are the same as before, so a patched model computes what the original did.
"""

import torch
from torch import nn

from .ops import linear_swiglu


def _patch_mlp(mlp):
    gate, up = mlp.gate_proj, mlp.up_proj
    if gate.bias is not None or up.bias is not None:
        raise ValueError("coda_torch.llama: MLPs with biases are not supported")
    features, hidden = gate.weight.shape
    interleaved = torch.stack([gate.weight.data, up.weight.data], dim=1)
    mlp.gate_up = nn.Parameter(interleaved.reshape(2 * features, hidden))
    del mlp.gate_proj, mlp.up_proj

    def forward(x):
        h = linear_swiglu(x.reshape(-1, hidden), mlp.gate_up)
        return mlp.down_proj(h.reshape(*x.shape[:-1], features))

    mlp.forward = forward


def apply(model):
    """Patches every LlamaMLP of `model` in place (SiLU MLPs without bias);
    returns the number of MLPs patched."""
    patched = 0
    for module in model.modules():
        if type(module).__name__ != "LlamaMLP":
            continue
        act = getattr(module, "act_fn", None)
        if type(act).__name__ not in ("SiLU", "SiLUActivation"):
            raise ValueError("coda_torch.llama: the MLP activation must be SiLU, "
                             f"got {type(act).__name__}")
        _patch_mlp(module)
        patched += 1
    return patched
