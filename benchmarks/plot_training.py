"""Loss curves of benchmarks/train_llama.py results, one chart.

  python3 benchmarks/plot_training.py OUT.png RUN.json [RUN.json ...]
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    out, files = sys.argv[1], sys.argv[2:]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for path in files:
        doc = json.load(open(path))
        gpus = doc.get("gpus", 1)
        device = doc["device"].replace("NVIDIA ", "")
        for mode, run in doc["runs"].items():
            ax.plot(run["losses"], label=f"{mode}, {gpus} x {device}", linewidth=1)
    c = doc["config"]  # the runs of one chart share the model
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(f"Llama, {c['layers']} layers, hidden {c['hidden']}, sequence {c['seq']}, "
                 f"vocabulary {c['vocab']} (bf16)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
