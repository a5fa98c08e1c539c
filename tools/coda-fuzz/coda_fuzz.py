#!/usr/bin/env python3
"""coda-fuzz: random valid coda programs, each checked against an independent
reference (tools/coda-fuzz/program.py generates and writes them).

Properties checked for every program, on the CPU:
  crash      no pass or pipeline crashes or asserts (a diagnostic is fine
             only where the program is outside what the stage takes: the GPU
             lowering's limits);
  epilogue   coda.gemm through the reference lowering equals the
             independently written linalg program on random inputs;
  fuse       `--coda-fuse` of that linalg program equals the program itself;
  derive     `--coda-derive-backward` of the program's differentiable form
             (f32, smooth ops, finished sum / log-sum-exp partials) agrees
             with central finite differences along random directions;
  gpu        (--gpu) every program `coda-compile` takes assembles with ptxas
             in its selected configuration with no kernel spilling more than
             two registers and no C75xx warning (a spill is a failure,
             shrunk like the others), except
             where coda-compile found every configuration to spill: those
             are counted (with --strict-spills, failures too).
A failure is shrunk to a small program that still fails the same way and
saved, with its seed, under --out.

  coda_fuzz.py --build build --seed 1 --count 1000 --jobs 2 --out fuzz-out
  coda_fuzz.py --build build --replay fuzz-out/failure-123.json
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program as prog  # noqa: E402

# Whether a program whose kernels spill in every configuration coda-compile
# tries fails (--strict-spills) rather than being counted.
STRICT_SPILLS = False

CRASH_MARKS = ("PLEASE submit a bug report", "Assertion", "LLVM ERROR",
               "Stack dump", "Segmentation fault", "UNREACHABLE")


class Tools:
    def __init__(self, build, llvm="/usr/lib/llvm-22"):
        self.opt = os.path.join(build, "bin", "coda-opt")
        self.compile = os.path.join(build, "bin", "coda-compile")
        # The ptxas and the spill allowance coda-compile uses, from the
        # compiler's Python module of the same build.
        sys.path.insert(0, os.path.join(build, "python"))
        import coda
        self.ptxas = coda.find_ptxas()
        self.spill_allowance = coda.SPILL_ALLOWANCE_BYTES
        libs = [f"{llvm}/lib/libmlir_runner_utils.so",
                f"{llvm}/lib/libmlir_c_runner_utils.so",
                f"{llvm}/lib/libmlir_apfloat_wrappers.so",
                os.path.join(build, "lib", "libcoda_test_runner_utils.so")]
        # -O0 and LLVM's fast instruction selection and register allocation:
        # the JIT's code generation is about half of a batch's time.
        self.runner = [f"{llvm}/bin/mlir-runner", "-O0", "--fast-isel", "--regalloc=fast",
                       "--disable-post-ra", "-e", "main",
                       "-entry-point-result=void", "-shared-libs=" + ",".join(libs)]


def _crashed(result):
    return result.returncode < 0 or any(m in result.stderr for m in CRASH_MARKS)


def _run(cmd, text, timeout=120):
    try:
        return subprocess.run(cmd, input=text, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, -9, "", "timed out")


def _differential(tools, text, options, outputs):
    """None if the differential run passes, else (kind, detail)."""
    main = _run([tools.opt, "-", f"--coda-test-differential-main={options}"], text)
    if _crashed(main):
        return "crash", "coda-test-differential-main: " + main.stderr[-2000:]
    if main.returncode:
        return "invalid", main.stderr[-2000:]
    lowered = _run([tools.opt, "--coda-to-llvm-cpu"], main.stdout)
    if _crashed(lowered):
        return "crash", "coda-to-llvm-cpu: " + lowered.stderr[-2000:]
    if lowered.returncode:
        return "lowering", lowered.stderr[-2000:]
    ran = _run(tools.runner, lowered.stdout)
    if _crashed(ran) and "coda-check" not in ran.stdout:
        return "crash", "mlir-runner: " + ran.stderr[-2000:]
    ok = ran.stdout.count("coda-check ok")
    if ran.returncode or ok != outputs:
        return "mismatch", ran.stdout[-2000:] + ran.stderr[-500:]
    return None


def _derive_module(tools, programs):
    """The module checking the derived backward of each program against finite
    differences, or a failure (kind, detail) of the derivation itself."""
    forwards = "".join(prog.emit_fused(prog.differentiable(p), f"forward_{k}", finish=True) + "\n"
                       for k, p in enumerate(programs))
    derived = _run([tools.opt, "-", "--coda-derive-backward"], forwards)
    if _crashed(derived):
        return None, ("crash", "coda-derive-backward: " + derived.stderr[-2000:])
    if derived.returncode:
        return None, ("refused", derived.stderr[-2000:])
    text = derived.stdout.rstrip()
    assert text.endswith("}"), "a module"
    checks = "".join(prog.emit_derive_check(prog.differentiable(p), k) for k, p in enumerate(programs))
    return text[:-1] + checks + "}\n", None


def cpu_failure(tools, programs):
    """The first CPU property the programs fail, as (property, kind,
    detail), or None: each property checks all of them in one run."""
    outputs = sum(len(p["outputs"]) for p in programs)
    both = "".join(prog.emit(p, f"_{k}") for k, p in enumerate(programs))
    failure = _differential(tools, both, "", outputs)
    if failure:
        return ("epilogue",) + failure
    refs = "".join(prog.emit_reference(p, f"reference_{k}") + "\n" for k, p in enumerate(programs))
    failure = _differential(tools, refs, "fuse", outputs)
    if failure:
        return ("fuse",) + failure
    module, failure = _derive_module(tools, programs)
    failure = failure or _differential(tools, module, "", len(programs))
    if failure:
        return ("derive",) + failure
    return None


def check(tools, p, gpu=False):
    """The first property `p` fails, as (property, kind, detail), or None."""
    return cpu_failure(tools, [p]) or (check_gpu(tools, p) if gpu else None)


def check_gpu(tools, p):
    """coda-compile to PTX; every program it takes must assemble. Returns a
    failure, or None; counts spills and ptxas notes in `p["gpu"]`."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "fused.mlir")
        with open(path, "w") as f:
            f.write(prog.emit_fused(p, batched=True) + "\n")
        out = os.path.join(scratch, "out")
        compiled = _run([tools.compile, path, "-o", out, "--fuse=false", "--format=isa"],
                        None, timeout=300)
        if _crashed(compiled):
            return ("gpu", "crash", compiled.stderr[-2000:])
        if compiled.returncode:
            p["gpu"] = {"accepted": False, "reason": compiled.stderr.strip().splitlines()[-1:]}
            return None
        ptx = os.path.join(out, "coda_kernels.ptx")
        assembled = _run([tools.ptxas, "-arch=sm_90a", "-v", ptx, "-o",
                          os.path.join(scratch, "k.cubin")], None, timeout=300)
        if assembled.returncode:
            return ("gpu", "ptxas", assembled.stderr[-2000:])
        report = assembled.stderr
        spills = max([int(line.split("bytes spill stores")[0].split()[-1])
                      for line in report.splitlines() if "bytes spill stores" in line] or [0])
        notes = sorted({w for w in report.split() if w.startswith("C75")})
        # coda-compile moves a GEMM whose selected kernel spills to one that
        # does not; where every configuration spills it says so, and the
        # program is a known limit (--strict-spills: a failure too), counted.
        everywhere = "in every configuration tried" in compiled.stderr
        p["gpu"] = {"accepted": True, "spill_store_bytes": spills, "notes": notes,
                    "spills_everywhere": everywhere}
        if (spills > tools.spill_allowance or notes) and (STRICT_SPILLS or not everywhere):
            return ("gpu", "spill", f"{spills} bytes of spill stores, notes {notes}:\n"
                    + report[-2000:])
    return None


# ----------------------------------------------------------------------------
# Shrinking: smaller programs that fail the same way.


def _candidates(p):
    """Programs one step smaller than `p`, most promising first."""
    def variant(change):
        q = prog.clone(p)
        change(q)
        return q
    out = []
    # Fewer outputs.
    if len(p["outputs"]) > 1:
        for j in range(len(p["outputs"])):
            out.append(variant(lambda q, j=j: q["outputs"].pop(j)))
    # Smaller shapes.
    for dim in ("M", "K"):
        if p[dim] > 1:
            out.append(variant(lambda q, d=dim: q.__setitem__(d, max(1, q[d] // 2))))
            out.append(variant(lambda q, d=dim: q.__setitem__(d, q[d] - 1)))
    block = 2 * p["stride"] if p["stride"] else 1
    if p["N"] > block:
        def halve_n(q):
            q["N"] = max(block, (q["N"] // 2) // block * block)
            _fix_periods(q)
        out.append(variant(halve_n))
    # Outputs of simpler kinds, f32 everywhere, no transposes.
    for j, o in enumerate(p["outputs"]):
        if o["kind"] != "tile" and "value" in o:
            out.append(variant(lambda q, j=j: q["outputs"].__setitem__(
                j, {"kind": "tile", "value": q["outputs"][j]["value"], "dtype": "f32"})))
        if o.get("dtype", "f32") != "f32":
            out.append(variant(lambda q, j=j: q["outputs"][j].__setitem__("dtype", "f32")))
    for flag in ("ta", "tb"):
        if p[flag]:
            out.append(variant(lambda q, f=flag: q.__setitem__(f, False)))
    if p["dtype"] != "f32":
        out.append(variant(lambda q: q.__setitem__("dtype", "f32")))
    # An output reading an earlier value.
    for j, o in enumerate(p["outputs"]):
        if o.get("value", 0) > 0:
            for v in range(o["value"]):
                out.append(variant(lambda q, j=j, v=v: q["outputs"][j].__setitem__("value", v)))
    return [q for q in out if _valid(q)]


def _fix_periods(q):
    for item in q["inputs"]:
        if item["kind"] == "periodic" and q["N"] % item["period"]:
            item["period"] = 1


def _valid(q):
    try:
        prog.emit(q)
    except (IndexError, KeyError, ValueError):
        return False
    return bool(q["outputs"])


def _prune(p):
    """Drops values no output reads (keeping the numbering consistent)."""
    live = set()
    work = []
    for o in p["outputs"]:
        for key in ("value", "even", "odd"):
            if key in o:
                work.append(o[key])
        work += o.get("args", [])
    while work:
        v = work.pop()
        if v in live:
            continue
        live.add(v)
        work += p["values"][v].get("args", [])
    live.add(0)
    keep = [i for i in range(len(p["values"])) if i in live]
    read = sorted({p["values"][i]["input"] for i in keep if p["values"][i]["op"] == "input"})
    renumber = {old: new for new, old in enumerate(keep)}
    q = prog.clone(p)
    q["inputs"] = [q["inputs"][i] for i in read]
    q["values"] = [q["values"][i] for i in keep]
    for node in q["values"]:
        if node["op"] == "input":
            node["input"] = read.index(node["input"])
    q["bounds"] = [q["bounds"][i] for i in keep]
    for node in q["values"]:
        if "args" in node:
            node["args"] = [renumber[a] for a in node["args"]]
    for o in q["outputs"]:
        for key in ("value", "even", "odd"):
            if key in o:
                o[key] = renumber[o[key]]
        if "args" in o:
            o["args"] = [renumber[a] for a in o["args"]]
    return q


def shrink(tools, p, failure, gpu=False, budget=200):
    """The smallest program found that fails with the same property and kind."""
    def same(q):
        f = check(tools, q, gpu)
        return f is not None and f[:2] == failure[:2]
    best = _prune(p) if same(_prune(p)) else p
    tries = 0
    progress = True
    while progress and tries < budget:
        progress = False
        for q in _candidates(best):
            tries += 1
            q = _prune(q)
            if same(q):
                best, progress = q, True
                break
            if tries >= budget:
                break
    return best


# ----------------------------------------------------------------------------


def _batch(args, seeds):
    """(seed, program, failure) for each seed: the CPU properties of the whole
    batch in one run each, and a program alone only when its batch fails."""
    tools = Tools(args.build, args.llvm)
    prog.INJECT_FAULT = args.inject_fault
    global STRICT_SPILLS
    STRICT_SPILLS = args.strict_spills
    programs = [prog.generate(seed, gpu=args.gpu) for seed in seeds]
    batch_ok = args.gpu_only or cpu_failure(tools, programs) is None
    results = []
    for seed, p in zip(seeds, programs):
        failure = None if batch_ok else cpu_failure(tools, [p])
        if failure is None and args.gpu:
            failure = check_gpu(tools, p)
        results.append((seed, p, failure))
    return results


def bundle(tools, args, passed, per_batch=50):
    """Compiles the programs taken by the GPU lowering, `per_batch` functions
    @p<seed> per coda-compile, into args.gpu_bundle/batch-<k>/, and lists
    them in programs.json."""
    taken = sorted((seed, p) for seed, p in passed if p.get("gpu", {}).get("accepted"))
    os.makedirs(args.gpu_bundle, exist_ok=True)
    listing = []
    for k in range(0, len(taken), per_batch):
        batch = taken[k:k + per_batch]
        name = f"batch-{k // per_batch}"
        source = os.path.join(args.gpu_bundle, name + ".mlir")
        with open(source, "w") as f:
            for seed, p in batch:
                f.write(prog.emit_fused(p, f"p{seed}", memref=True, batched=True) + "\n\n")
        compiled = _run([tools.compile, source, "-o", os.path.join(args.gpu_bundle, name),
                         "--fuse=false"], None, timeout=1800)
        if compiled.returncode:
            raise SystemExit(f"coda-fuzz: {source} did not compile:\n{compiled.stderr[-3000:]}")
        os.remove(os.path.join(args.gpu_bundle, name, "host.mlir"))  # not needed to launch
        listing += [{"seed": seed, "function": f"p{seed}", "module": name, "program": p}
                    for seed, p in batch]
    with open(os.path.join(args.gpu_bundle, "programs.json"), "w") as f:
        json.dump(listing, f)
    print(f"coda-fuzz: {len(listing)} programs compiled into {args.gpu_bundle}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--llvm", default="/usr/lib/llvm-22",
                        help="where mlir-runner and MLIR's runner libraries are (bin/, lib/)")
    parser.add_argument("--seed", type=int, default=1, help="first seed")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--time", type=float, default=0, help="stop after this many seconds")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch", type=int, default=25, help="programs per CPU run")
    parser.add_argument("--progress", type=int, default=1000, help="report every this many programs")
    parser.add_argument("--gpu", action="store_true",
                        help="programs for the sm_90a lowering, compiled and assembled")
    parser.add_argument("--out", default="coda-fuzz-out")
    parser.add_argument("--replay", help="check one saved program (JSON)")
    parser.add_argument("--emit", type=int, help="print the program of this seed")
    parser.add_argument("--gpu-only", action="store_true",
                        help="with --gpu: only the GPU compilation property (the CPU ones "
                             "are what a CPU run checks)")
    parser.add_argument("--gpu-bundle", metavar="DIR",
                        help="with --gpu: compile the programs that pass into DIR for "
                             "gpu_check.py on the GPU machine (memref form, batches of 50 "
                             "functions per coda-compile, programs.json)")
    parser.add_argument("--seed-from-git", metavar="DIR",
                        help="the first seed from the commit checked out in DIR (a different, "
                             "reproducible set for each change; 1 outside a git checkout)")
    parser.add_argument("--strict-spills", action="store_true",
                        help="with --gpu: a program whose kernels spill in every configuration "
                             "coda-compile tries is a failure, not only counted")
    parser.add_argument("--inject-fault", choices=["epilogue", "derive"],
                        help="break the reference of one property (to test that the checks "
                             "catch it)")
    args = parser.parse_args()
    prog.INJECT_FAULT = args.inject_fault
    global STRICT_SPILLS
    STRICT_SPILLS = args.strict_spills
    if args.seed_from_git:
        head = subprocess.run(["git", "-C", args.seed_from_git, "rev-parse", "HEAD"],
                              capture_output=True, text=True)
        args.seed = int(head.stdout[:7], 16) if head.returncode == 0 else 1
    tools = Tools(args.build, args.llvm)
    if args.emit is not None:
        print(prog.emit(prog.generate(args.emit, gpu=args.gpu)))
        return 0
    if args.replay:
        with open(args.replay) as f:
            p = json.load(f)["program"]
        print(prog.emit(p))
        failure = check(tools, p, args.gpu)
        print("coda-fuzz: replay", "passes" if failure is None else f"fails: {failure[0]} {failure[1]}")
        if failure:
            print(failure[2])
        return 1 if failure else 0

    print(f"coda-fuzz: seeds {args.seed}..{args.seed + args.count - 1}"
          f"{', at most %gs' % args.time if args.time else ''}, gpu={args.gpu}", flush=True)
    start = time.time()
    checked = gpu_accepted = gpu_spills = 0
    failures, passed = [], []
    os.makedirs(args.out, exist_ok=True)
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        seeds = iter(range(args.seed, args.seed + args.count))
        pending = set()
        while True:
            while len(pending) < 2 * args.jobs:
                if args.time and time.time() - start > args.time:
                    break
                batch = [s for s in (next(seeds, None) for _ in range(args.batch)) if s is not None]
                if not batch:
                    break
                pending.add(pool.submit(_batch, args, batch))
            if not pending:
                break
            done, pending = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for seed, p, failure in (r for future in done for r in future.result()):
                checked += 1
                if checked % args.progress == 0:
                    print(f"coda-fuzz: {checked} programs checked, {len(failures)} failures, "
                          f"{time.time() - start:.0f} s", flush=True)
                if p.get("gpu", {}).get("accepted"):
                    gpu_accepted += 1
                    gpu_spills += p["gpu"]["spills_everywhere"]
                if failure is None:
                    passed.append((seed, p))
                if failure:
                    small = shrink(tools, p, failure, args.gpu)
                    final = check(tools, small, args.gpu) or failure
                    path = os.path.join(args.out, f"failure-{seed}.json")
                    with open(path, "w") as f:
                        json.dump({"seed": seed, "property": final[0], "kind": final[1],
                                   "detail": final[2], "program": small}, f, indent=1)
                    with open(path[:-5] + ".mlir", "w") as f:
                        f.write(prog.emit(small))
                    failures.append((seed, final[0], final[1], path))
                    print(f"coda-fuzz: seed {seed}: {final[0]} {final[1]} -> {path}", flush=True)
    if args.gpu_bundle:
        bundle(tools, args, passed)
    elapsed = time.time() - start
    gpu = (f", {gpu_accepted} taken by the GPU lowering ({gpu_spills} spilling in every "
           f"configuration)" if args.gpu else "")
    print(f"coda-fuzz: {checked} programs{gpu}, {len(failures)} failures, {elapsed:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
