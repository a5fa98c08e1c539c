"""The configuration --coda-select-gemm-config chooses, checked against the
best one measured: for every epilogue primitive of test/GPU/cases/
epilogues.mlir and the plain GEMM, at every shape of a results file written
by benchmarks/epilogues.py --variant ... and benchmarks/gemm_configs.py
(benchmarks/results/h100-2026-11-24-schedules-by-shape.json), how much
slower the selected configuration measured than the fastest schedule.

  python3 benchmarks/check_selection.py \\
      benchmarks/results/h100-2026-11-24-schedules-by-shape.json

Runs on the CPU: it compiles epilogues.mlir and primitives.mlir with
coda-compile's defaults (the selection) and reads each kernel's schedule
from the manifest. Exits 1 if a choice measured more than --tolerance
slower than the best, or was not measured at all.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# How the results files name the schedules they timed: ping-pong 128 x 128,
# cooperative 128 x 256 alone and in clusters of two.
SCHEDULES = ("pp", "coop1", "coop2")


def schedule(kernel):
    """The results files' name of a manifest kernel's configuration."""
    tile, cluster = kernel["tile"][:2], kernel["cluster"][0]
    if not kernel["persistent"]:
        return "warp-specialized" if kernel["block"][0] == 384 else "one warpgroup"
    if tile == [128, 128] and kernel["block"][0] == 384 and cluster == 1:
        return "pp"
    if tile == [128, 256]:
        return "coop%d" % cluster
    return "other"


def selected(compiler, case):
    """GEMM kernel name -> its variants' (max_k, schedule) in dispatch order
    (max_k 0: every larger K), for test/GPU/cases/<case>.mlir."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([compiler, os.path.join(ROOT, "test", "GPU", "cases", case + ".mlir"),
                        "--format=isa", "-o", out], check=True, capture_output=True)
        manifest = json.load(open(os.path.join(out, "manifest.json")))
    variants = {}
    for k in manifest["kernels"]:
        if k["kind"] == "gemm":
            variants.setdefault(k.get("variant_of", k["name"]), []).append(
                (k.get("max_k", 0), schedule(k)))
    for v in variants.values():
        v.sort(key=lambda entry: entry[0] or float("inf"))
    return variants


def choice_at(variants, k):
    """The schedule the launch picks at K = k."""
    return next(s for max_k, s in variants if not max_k or k <= max_k)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results", nargs="+",
                        help="results files; a later file's measurement of a case replaces an "
                             "earlier one's")
    parser.add_argument("--compiler", default=os.path.join(ROOT, "build", "bin", "coda-compile"))
    parser.add_argument("--tolerance", type=float, default=0.02,
                        help="largest accepted slowdown against the best (0.02: 2 %%)")
    args = parser.parse_args()
    epilogue_choice = selected(args.compiler, "epilogues")
    plain_choice = selected(args.compiler, "primitives")["plain_nt_gemm0"]

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
                shape, times, choice_at(epilogue_choice[r["epilogue"] + "_gemm0"], shape["K"]))
        for r in doc.get("gemm_configs", {}).get("results", []):
            times = {v: t for v, t in r["coda_ms"].items() if v in SCHEDULES}
            # gemm_configs names cooperative in clusters of two by the selection
            # that built it ("sel").
            if "sel" in r["coda_ms"] and "coop2" not in times:
                times["coop2"] = r["coda_ms"]["sel"]
            shape = r["shape"]
            rows[("plain", shape["M"], shape["N"], shape["K"])] = (
                shape, times, choice_at(plain_choice, shape["K"]))

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
