"""Renders a results file as a markdown table (stdout) and a PNG chart:
  plot.py results/<name>.json results/<name>.png
Ratios are baseline time / coda time: above 1 means coda is faster."""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

doc = json.load(open(sys.argv[1]))
rows = doc["results"]

print("| case | shape | coda ms | cuBLAS | torch eager | torch.compile | max-autotune |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    b = r["baselines"]
    shape = " ".join(f"{k}={v}" for k, v in r["shape"].items())

    def cell(key):
        if key not in b:
            return ""
        return f"{b[key]:.3f} ({b[key] / r['coda_ms']:.2f}x)"
    print(f"| {r['case']} | {shape} | {r['coda_ms']:.3f} | {cell('cublas')} | {cell('torch_eager')} "
          f"| {cell('torch_compile')} | {cell('torch_compile_max_autotune')} |")

# Each pattern against coda's own plain GEMM(s) of the same shapes: the cost of
# its epilogues and finishes.
gemm_ms = {(r["shape"]["M"], r["shape"]["N"], r["shape"]["K"]): r["coda_ms"]
           for r in rows if r["case"] == "gemm"}


def gemm_shapes(r):
    if r["case"] == "gemm":
        return []
    s, m = r["shape"], r["shape"]["M"]
    h = s.get("hidden", s.get("N"))
    return {"rmsnorm_gemm": [(m, h, h), (m, s.get("N", 0), h)],
            "gate_up_swiglu": [(m, 2 * s.get("mlp", 0), h)],
            "down_residual_norm": [(m, h, s.get("mlp", 0))],
            "qkv_rope": [(m, s.get("N", 0), h)],
            "lm_head_ce": [(m, s.get("vocab", 0), h)]}.get(r["case"], [])


print()
print("| pattern | hidden | coda ms | coda plain GEMM(s) ms | pattern / GEMM |")
print("|---|---|---|---|---|")
for r in rows:
    shapes = gemm_shapes(r)
    if not shapes or not all(x in gemm_ms for x in shapes):
        continue
    plain = sum(gemm_ms[x] for x in shapes)
    print(f"| {r['case']} | {r['shape'].get('hidden')} | {r['coda_ms']:.3f} | {plain:.3f} | "
          f"{r['coda_ms'] / plain:.2f}x |")

patterns = [r for r in rows if r["case"] != "gemm"]
gemms = [r for r in rows if r["case"] == "gemm"]
fig, axes = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [1, 2]})
labels = [f"{r['shape']['M']}x{r['shape']['N']}x{r['shape']['K']}" for r in gemms]
axes[0].barh(labels, [r["baselines"]["cublas"] / r["coda_ms"] for r in gemms], color="#4c72b0")
axes[0].axvline(1.0, color="black", linewidth=0.8)
axes[0].set_xlabel("cuBLAS time / coda time (>1: coda faster)")
axes[0].set_title("plain GEMM vs torch.matmul (cuBLAS)")
keys = [("torch_eager", "torch eager"), ("torch_compile", "torch.compile"),
        ("torch_compile_max_autotune", "max-autotune-no-cudagraphs")]
labels = [f"{r['case']} h{r['shape'].get('hidden', r['shape'].get('N'))}" for r in patterns]
width = 0.27
for i, (key, name) in enumerate(keys):
    axes[1].bar([x + (i - 1) * width for x in range(len(patterns))],
                [r["baselines"].get(key, 0) / r["coda_ms"] for r in patterns], width, label=name)
axes[1].axhline(1.0, color="black", linewidth=0.8)
axes[1].set_xticks(range(len(patterns)), labels, rotation=60, ha="right", fontsize=8)
axes[1].set_ylabel("baseline time / coda time (>1: coda faster)")
axes[1].set_title("fused patterns, M = 16384 tokens, bf16")
axes[1].legend()
fig.suptitle(f"coda on {doc['device']} ({doc['date']}, commit {doc['commit']})")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
