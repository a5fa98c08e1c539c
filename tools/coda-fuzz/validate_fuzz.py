#!/usr/bin/env python3
"""The runtime's argument validation, fuzzed on the CPU: generated GPU
programs are compiled (coda-compile, PTX only) and, for each kernel, the
valid arguments read from the manifest's function entry must be accepted by
`coda-runtime-check`, and every argument list with one argument broken (its
dtype, rank, a size, its device, host memory, a misaligned address, a scalar
for a tensor or a tensor for a scalar, one argument missing or one too many)
must be refused, with a message naming that argument ("argument <i>").

  validate_fuzz.py --build build --seed 1 --programs 16 --rounds 3
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program as prog  # noqa: E402

ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f8E4M3FN": 1, "f8E5M2": 1, "i32": 4, "i64": 8}
OTHER_DTYPE = {"f32": "bf16", "bf16": "f32", "f16": "bf16", "f8E4M3FN": "f8E5M2",
               "f8E5M2": "f8E4M3FN", "i32": "i64", "i64": "i32"}


def render(arg):
    """coda-runtime-check's text for an argument dict."""
    if arg["kind"] == "scalar":
        return "0.5"
    text = f"{arg['dtype']}[{','.join(map(str, arg['shape']))}]"
    if "address" in arg:
        text += f"@{hex(arg['address'])}"
    if "device" in arg:
        text += f"#{arg['device']}"
    return text


def mutations(args, rng):
    """(description, argument index, broken argument list) for one random
    break of each applicable kind."""
    out = []
    tensors = [i for i, a in enumerate(args) if a["kind"] == "memref"]
    scalars = [i for i, a in enumerate(args) if a["kind"] == "scalar"]
    # Arguments past lhs and rhs: breaking one cannot change M, N or K.
    later = [i for i in tensors if i >= 2]

    def broken(i, change):
        new = [dict(a) for a in args]
        change(new[i])
        return new
    i = rng.choice(tensors)
    out.append(("dtype", i, broken(i, lambda a: a.update(dtype=OTHER_DTYPE[a["dtype"]]))))
    if later:
        i = rng.choice(later)
        out.append(("rank", i, broken(i, lambda a: a.update(shape=a["shape"] + [1]))))
        i = rng.choice(later)
        d = rng.randrange(len(args[i]["shape"]))
        out.append(("size", i, broken(i, lambda a: a.update(
            shape=[s + 1 if k == d else s for k, s in enumerate(a["shape"])]))))
    i = rng.choice(tensors)
    out.append(("host", i, broken(i, lambda a: a.update(device="host"))))
    i = rng.choice([t for t in tensors if t >= 1])
    out.append(("device", i, broken(i, lambda a: a.update(device=1))))
    i = rng.choice(tensors)
    size = ELEMENT_BYTES[args[i]["dtype"]]
    # An address off its element size (default addresses are 0x100000 * (i + 1)).
    out.append(("misaligned", i, broken(i, lambda a: a.update(
        address=0x100000 * (i + 1) + size // 2 if size > 1 else 1))))
    if scalars:
        i = rng.choice(scalars)
        out.append(("tensor-for-scalar", i, broken(i, lambda a: a.update(
            kind="memref", dtype="f32", shape=[1]))))
    i = rng.choice(tensors)
    out.append(("scalar-for-tensor", i, broken(i, lambda a: a.update(kind="scalar"))))
    out.append(("missing", len(args) - 1, [dict(a) for a in args[:-1]]))
    out.append(("extra", len(args), [dict(a) for a in args] + [{"kind": "scalar"}]))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--programs", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of breaks per kernel")
    args = parser.parse_args()
    check = os.path.join(args.build, "bin", "coda-runtime-check")
    compile_ = os.path.join(args.build, "bin", "coda-compile")
    rng = random.Random(args.seed)
    failures = cases = 0
    with tempfile.TemporaryDirectory() as scratch:
        source = os.path.join(scratch, "programs.mlir")
        with open(source, "w") as f:
            for seed in range(args.seed, args.seed + args.programs):
                f.write(prog.emit_fused(prog.generate(seed, gpu=True), f"p{seed}", memref=True,
                                        batched=True) + "\n\n")
        out = os.path.join(scratch, "out")
        compiled = subprocess.run([compile_, source, "-o", out, "--fuse=false", "--format=isa"],
                                  capture_output=True, text=True)
        if compiled.returncode:
            print(compiled.stderr[-3000:])
            return 2
        manifest = os.path.join(out, "manifest.json")
        with open(manifest) as f:
            functions = json.load(f)["functions"]
        for function in functions:
            (step,) = function["steps"]
            kernel = step["launch"]
            valid = function["arguments"]

            def run(arguments):
                r = subprocess.run([check, manifest, kernel] + [render(a) for a in arguments],
                                   capture_output=True, text=True)
                return r.returncode, r.stdout + r.stderr
            rc, text = run(valid)
            cases += 1
            if rc != 0 or "ok:" not in text:
                failures += 1
                print(f"validate_fuzz: {kernel}: valid arguments refused:\n{text}")
                continue
            for _ in range(args.rounds):
                for kind, index, arguments in mutations(valid, rng):
                    rc, text = run(arguments)
                    cases += 1
                    named = f"argument {index}" in text
                    if rc == 0 or not named:
                        failures += 1
                        print(f"validate_fuzz: {kernel}: {kind} break of argument {index} "
                              f"{'accepted' if rc == 0 else 'refused without naming it'}: "
                              f"{' '.join(render(a) for a in arguments)}\n{text}")
    print(f"validate_fuzz: {cases} argument lists for {len(functions)} kernels, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
