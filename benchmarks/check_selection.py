"""The configuration --coda-select-gemm-config chooses, checked against the
best one measured: for every epilogue primitive of test/GPU/cases/
epilogues.mlir and the plain GEMM, at every shape of a results file written
by benchmarks/epilogues.py --variant ... and benchmarks/gemm_configs.py
(benchmarks/results/h100-2026-11-24-schedules-by-shape.json), and for the
plain weight gradient (primitives.mlir's plain_tn) at every shape of a file
of `gemm_configs.py --layout tn` (--weight-grads), how much slower the
selected configuration measured than the fastest schedule.

  python3 benchmarks/check_selection.py \\
      benchmarks/results/h100-2026-11-24-schedules-by-shape.json \\
      --weight-grads benchmarks/results/h100-2026-11-26-weight-grad-waves-tn.json

Runs on the CPU: it compiles epilogues.mlir and primitives.mlir with
coda-compile's defaults (the selection) and reads each kernel's schedule
from the manifest; a GEMM dispatched by K takes the variant for the shape's
K, one dispatched by waves the variant whose waves on an H100's 132 SMs
weigh least. Exits 1 if a choice measured more than --tolerance slower than
the best, or was not measured at all.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# How the results files name the schedules they timed: ping-pong 128 x 128,
# cooperative 128 x 256 alone and in clusters of two, cooperative 128 x 128.
SCHEDULES = ("pp", "coop1", "coop2", "c128")
# The SMs whose waves a GEMM dispatched by waves counts (an H100 SXM).
SMS = 132


def schedule(kernel):
    """The results files' name of a manifest kernel's configuration."""
    tile_n, cluster = kernel["tile"][1], kernel["cluster"][0]
    names = {("ping_pong", 128, 1): "pp", ("cooperative", 256, 1): "coop1",
             ("cooperative", 256, 2): "coop2", ("cooperative", 128, 1): "c128",
             ("warp_specialized", 256, 1): "warp-specialized",
             ("single", 128, 1): "one warpgroup"}
    return names.get((kernel["schedule"], tile_n, cluster), "other")


def selected(compiler, case):
    """GEMM kernel name -> its variants in dispatch order (by K: max_k
    ascending, 0 last for every larger K), for test/GPU/cases/<case>.mlir."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([compiler, os.path.join(ROOT, "test", "GPU", "cases", case + ".mlir"),
                        "--format=isa", "-o", out], check=True, capture_output=True)
        manifest = json.load(open(os.path.join(out, "manifest.json")))
    variants = {}
    for k in manifest["kernels"]:
        if k["kind"] == "gemm":
            variants.setdefault(k.get("variant_of", k["name"]), []).append(k)
    for v in variants.values():
        v.sort(key=lambda k: k.get("max_k", 0) or float("inf"))
    return variants


def choice_at(variants, shape):
    """The schedule the launch picks for `shape` (M, N, K)."""
    if variants[0].get("wave_cost"):
        def weight(k):
            cluster = k["cluster"][0]
            tiles = (-(-shape["N"] // k["tile"][1]) *
                     -(-shape["M"] // (k["tile"][0] * cluster)))
            return -(-tiles // (SMS // cluster)) * k["wave_cost"]
        return schedule(min(variants, key=weight))
    return next(schedule(k) for k in variants
                if not k.get("max_k") or shape["K"] <= k["max_k"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results", nargs="+",
                        help="results files; a later file's measurement of a case replaces an "
                             "earlier one's")
    parser.add_argument("--weight-grads", nargs="*", default=[],
                        help="results files of benchmarks/gemm_configs.py --layout tn "
                             "(variants named as SCHEDULES)")
    parser.add_argument("--compiler", default=os.path.join(ROOT, "build", "bin", "coda-compile"))
    parser.add_argument("--tolerance", type=float, default=0.02,
                        help="largest accepted slowdown against the best (0.02: 2 %%)")
    args = parser.parse_args()
    epilogue_choice = selected(args.compiler, "epilogues")
    primitives = selected(args.compiler, "primitives")
    plain_choice = primitives["plain_nt_gemm0"]

    # (what, M, N, K) -> (shape, {schedule: ms}, the schedule selected now)
    rows = {}
    for path in args.results:
        doc = json.load(open(path))
        epilogue_rows = [r for key in ("epilogues", "epilogues_block_shapes")
                         for r in doc.get(key, {}).get("results", [])]
        # benchmarks/epilogues.py's own output: its rows at the top level.
        epilogue_rows += [r for r in doc.get("results", []) if r.get("case") == "epilogue"]
        for r in epilogue_rows:
            times = {v: t["ms"] for v, t in r["variants"].items() if v in SCHEDULES}
            shape = r["shape"]
            rows[(r["epilogue"], shape["M"], shape["N"], shape["K"])] = (
                shape, times, choice_at(epilogue_choice[r["epilogue"] + "_gemm0"], shape))
        for r in doc.get("gemm_configs", {}).get("results", []):
            times = {v: t for v, t in r["coda_ms"].items() if v in SCHEDULES}
            # gemm_configs names cooperative in clusters of two by the selection
            # that built it ("sel").
            if "sel" in r["coda_ms"] and "coop2" not in times:
                times["coop2"] = r["coda_ms"]["sel"]
            shape = r["shape"]
            rows[("plain", shape["M"], shape["N"], shape["K"])] = (
                shape, times, choice_at(plain_choice, shape))
    # Weight gradients: the files' `sel` is the selection the file was
    # measured with, not necessarily today's, so only pinned schedules count.
    for path in args.weight_grads:
        for r in json.load(open(path))["results"]:
            times = {v: t for v, t in r["coda_ms"].items() if v in SCHEDULES}
            shape = r["shape"]
            rows[("weight grad", shape["M"], shape["N"], shape["K"])] = (
                shape, times, choice_at(primitives["plain_tn_gemm0"], shape))

    worst, failed = 0.0, 0
    print(f"{'epilogue':14} {'M x N x K':>20}  {'selected':>8} {'best':>6}  slower")
    for (what, *_), (shape, times, choice) in rows.items():
        best = min(times, key=times.get)
        shape_text = "%dx%dx%d" % (shape["M"], shape["N"], shape["K"])
        if choice not in times:
            print(f"{what:14} {shape_text:>20}  {choice:>8} {best:>6}  not measured")
            failed += 1
            continue
        slower = times[choice] / times[best] - 1
        worst = max(worst, slower)
        mark = "  <-" if slower > args.tolerance else ""
        failed += slower > args.tolerance
        print(f"{what:14} {shape_text:>20}  {choice:>8} {best:>6}  {100 * slower:5.1f} %{mark}")
    print(f"check_selection: {len(rows)} cases, {failed} more than "
          f"{100 * args.tolerance:.0f} % slower than the best or not measured, "
          f"worst {100 * worst:.1f} %")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
