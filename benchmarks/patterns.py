"""The fused patterns of test/GPU/cases/patterns.mlir as workloads.

Each pattern makes its inputs for a shape, lists the arguments of its coda
function (outputs and temporaries allocated here), computes a float64
reference from the same inputs, and runs the same computation the way a
PyTorch user writes it (the eager baseline, also handed to torch.compile).
Shared by the GPU correctness suite and the benchmarks.
"""

import math

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16
EPS = 1e-5


def _randn(*shape, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(BF16)


def _empty(*shape, dtype=BF16):
    return torch.empty(*shape, device="cuda", dtype=dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Pattern:
    def written(self, t):
        """The tensors coda's function writes whole: the correctness suite
        fills them with NaN before the launch, so an element left unwritten
        fails the comparison."""
        return list(self.outputs(t).values())


class RMSNormGEMM(Pattern):
    """h = x Wo^T + res; y = RMSNorm(h) W^T (gamma folded into W for coda)."""
    name = "rmsnorm_gemm"
    function = "rmsnorm_gemm"

    def make(self, m, hidden, mlp, vocab):
        n = 2 * mlp
        t = dict(x=_randn(m, hidden), wo=_randn(hidden, hidden, scale=hidden ** -0.5),
                 res=_randn(m, hidden), gamma=(torch.rand(hidden, device="cuda") + 0.5).to(BF16),
                 w=_randn(n, hidden, scale=hidden ** -0.5))
        t["wfold"] = (t["w"].float() * t["gamma"].float()).to(BF16)
        t.update(h=_empty(m, hidden), ss_part=_empty(m, math.ceil(hidden / 128), dtype=torch.float32),
                 ss=_empty(m, dtype=torch.float32), y=_empty(m, n))
        return t

    def shape(self, m, hidden, mlp, vocab):
        return {"M": m, "hidden": hidden, "N": 2 * mlp}

    def coda_args(self, t):
        return [t["x"], t["wo"], t["res"], t["wfold"], 1.0 / t["x"].shape[1],
                t["h"], t["ss_part"], t["ss"], t["y"]]

    def outputs(self, t):
        return {"h": t["h"], "ss": t["ss"], "y": t["y"]}

    def eager(self, t):
        h = F.linear(t["x"], t["wo"]) + t["res"]
        return F.linear(F.rms_norm(h, (h.shape[1],), t["gamma"], EPS), t["w"])

    def reference(self, t):
        h = t["x"].double() @ t["wo"].double().T + t["res"].double()
        ss = (h * h).sum(-1)
        rstd = torch.rsqrt(ss / h.shape[1] + EPS)
        y = (h.to(BF16).double() @ t["wfold"].double().T) * rstd[:, None]
        return {"h": h, "ss": ss, "y": y}


class GateUpSwiGLU(Pattern):
    """silu(x Wg^T) * (x Wu^T); coda runs one GEMM over interleaved Wg/Wu."""
    name = "gate_up_swiglu"
    function = "gate_up_swiglu"

    def make(self, m, hidden, mlp, vocab):
        t = dict(x=_randn(m, hidden), wg=_randn(mlp, hidden, scale=hidden ** -0.5),
                 wu=_randn(mlp, hidden, scale=hidden ** -0.5))
        t["wgu"] = torch.stack([t["wg"], t["wu"]], 1).reshape(2 * mlp, hidden).contiguous()
        t["out"] = _empty(m, mlp)
        return t

    def shape(self, m, hidden, mlp, vocab):
        return {"M": m, "hidden": hidden, "mlp": mlp}

    def coda_args(self, t):
        return [t["x"], t["wgu"], t["out"]]

    def outputs(self, t):
        return {"out": t["out"]}

    def eager(self, t):
        return F.silu(F.linear(t["x"], t["wg"])) * F.linear(t["x"], t["wu"])

    def reference(self, t):
        x = t["x"].double()
        return {"out": F.silu(x @ t["wg"].double().T) * (x @ t["wu"].double().T)}


class DownResidualNorm(Pattern):
    """h = a Wd^T + res and the next norm's sum of squares per row."""
    name = "down_residual_norm"
    function = "down_residual_norm"

    def make(self, m, hidden, mlp, vocab):
        return dict(a=_randn(m, mlp), wd=_randn(hidden, mlp, scale=mlp ** -0.5), res=_randn(m, hidden),
                    h=_empty(m, hidden), ss_part=_empty(m, math.ceil(hidden / 128), dtype=torch.float32),
                    ss=_empty(m, dtype=torch.float32))

    def shape(self, m, hidden, mlp, vocab):
        return {"M": m, "hidden": hidden, "mlp": mlp}

    def coda_args(self, t):
        return [t["a"], t["wd"], t["res"], t["h"], t["ss_part"], t["ss"]]

    def outputs(self, t):
        return {"h": t["h"], "ss": t["ss"]}

    def eager(self, t):
        h = F.linear(t["a"], t["wd"]) + t["res"]
        return h, h.float().pow(2).sum(-1)

    def reference(self, t):
        h = t["a"].double() @ t["wd"].double().T + t["res"].double()
        return {"h": h, "ss": (h * h).sum(-1)}


class QKVRoPE(Pattern):
    """q, k, v projections with rotate_half RoPE on q and k (head dim 128)."""
    name = "qkv_rope"
    function = "qkv_rope"

    def make(self, m, hidden, mlp, vocab):
        t = dict(x=_randn(m, hidden), wq=_randn(hidden, hidden, scale=hidden ** -0.5),
                 wk=_randn(hidden, hidden, scale=hidden ** -0.5), wv=_randn(hidden, hidden, scale=hidden ** -0.5))
        t["wqkv"] = torch.cat([t["wq"], t["wk"], t["wv"]]).contiguous()
        pos = (torch.arange(m, device="cuda") % 2048).float()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, 128, 2, device="cuda").float() / 128))
        angle = torch.outer(pos, inv_freq)
        angle = torch.cat([angle, angle], -1)
        # bf16 tables, as Hugging Face's rotary embedding returns them for a
        # bf16 model; q and k (the first 2 * hidden / 128 heads) rotate.
        t["cos"], t["sin"] = angle.cos().to(BF16), angle.sin().to(BF16)
        t["qkv"] = _empty(m, 3 * hidden)
        return t

    def shape(self, m, hidden, mlp, vocab):
        return {"M": m, "hidden": hidden, "N": 3 * hidden}

    def coda_args(self, t):
        return [t["x"], t["wqkv"], t["cos"], t["sin"], 2 * t["x"].shape[1] // 128, t["qkv"]]

    def outputs(self, t):
        return {"qkv": t["qkv"]}

    def eager(self, t):
        m = t["x"].shape[0]
        cos = t["cos"][:, None, :]
        sin = t["sin"][:, None, :]
        q = F.linear(t["x"], t["wq"]).view(m, -1, 128)
        k = F.linear(t["x"], t["wk"]).view(m, -1, 128)
        v = F.linear(t["x"], t["wv"])
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        return q, k, v

    def reference(self, t):
        m, hidden = t["x"].shape
        x = t["x"].double()
        cos, sin = t["cos"].double()[:, None, :], t["sin"].double()[:, None, :]
        q = (x @ t["wq"].double().T).view(m, -1, 128)
        k = (x @ t["wk"].double().T).view(m, -1, 128)
        v = x @ t["wv"].double().T
        q = (q * cos + rotate_half(q) * sin).reshape(m, hidden)
        k = (k * cos + rotate_half(k) * sin).reshape(m, hidden)
        return {"qkv": torch.cat([q, k, v], 1)}


class LMHeadCE(Pattern):
    """Per-token cross-entropy of x W^T; coda never writes the logits."""
    name = "lm_head_ce"
    function = "lm_head_ce"

    def make(self, m, hidden, mlp, vocab):
        t = dict(x=_randn(m, hidden), w=_randn(vocab, hidden, scale=hidden ** -0.5),
                 t=torch.randint(0, vocab, (m,), device="cuda"))
        t["t"][::7] = -100
        t.update(lse_part=_empty(m, math.ceil(vocab / 128), dtype=torch.float32),
                 logit=torch.zeros(m, device="cuda"), lse=_empty(m, dtype=torch.float32))
        return t

    def shape(self, m, hidden, mlp, vocab):
        return {"M": m, "hidden": hidden, "vocab": vocab}

    def coda_args(self, t):
        return [t["x"], t["w"], t["t"], t["lse_part"], t["logit"], t["lse"]]

    def finish(self, t):
        """The loss from coda's outputs (one elementwise op on M values)."""
        return torch.where(t["t"] >= 0, t["lse"] - t["logit"], torch.zeros_like(t["lse"]))

    def outputs(self, t):
        return {"loss": self.finish(t)}

    def written(self, t):
        # The loss is computed from lse and logit after the launch; logit
        # starts at zero (rows whose target is ignored keep it).
        return [t["lse_part"], t["lse"]]

    def eager(self, t):
        return F.cross_entropy(F.linear(t["x"], t["w"]).float(), t["t"], reduction="none")

    def reference(self, t):
        logits = t["x"].double() @ t["w"].double().T
        return {"loss": F.cross_entropy(logits, t["t"], reduction="none")}


PATTERNS = [RMSNormGEMM(), GateUpSwiGLU(), DownResidualNorm(), QKVRoPE(), LMHeadCE()]
