"""Writes broken copies of a manifest's function programs (argv[1]) next to
argv[2], one per "<name>.json", for function-validate.test: each changes
one field of the program of function `mlp` (test/Runtime/Inputs/
fused-mlp.mlir) or `norm` (test/Runtime/kernels.mlir), where the manifest
has it."""
import json
import sys

text = open(sys.argv[1]).read()
base = sys.argv[2]


def write(suffix, change, function="mlp"):
    manifest = json.loads(text)
    program = next((f for f in manifest["functions"] if f["name"] == function),
                   None)
    if program is None:
        return
    change(program)
    with open(f"{base}.{suffix}.json", "w") as f:
        json.dump(manifest, f, indent=2)


def step(program, launch):
    return next(s for s in program["steps"] if s.get("launch") == launch)


def set_operand(launch, index, operand):
    return lambda p: step(p, launch)["args"].__setitem__(index, operand)


# mlp: step 0 mlp_gemm0 (x, wgu, r, h in temporary 0), step 1 mlp_gemm1 (h,
# wd, x, out, partials in temporary 1), step 2 mlp_finish0, step 3 the row
# scale's loop kernel, step 4 the copy of x into its out-parameter.
write("unknown-kernel", lambda p: step(p, "mlp_finish0").update(launch="mlp_finish9"))
write("unknown-step", lambda p: p["steps"].insert(2, {"copy": "mlp_finish0", "args": []}))
write("both-kinds", lambda p: step(p, "mlp_finish0").update(call="attention"))
write("no-args", lambda p: step(p, "mlp_finish0").pop("args"))
write("no-workspace", lambda p: p.pop("workspace_bytes"))
write("no-temporary-dtype", lambda p: p["temporaries"][1].pop("dtype"))
write("no-argument-shape", lambda p: p["arguments"][3].pop("shape"))
write("temporary-outside", lambda p: p["temporaries"][1].update(offset=p["workspace_bytes"]))
write("temporary-bytes", lambda p: p["temporaries"][0].update(bytes=1024))
write("temporary-misaligned", lambda p: p["temporaries"][1].update(offset=2056))
write("temporary-dtype", lambda p: p["temporaries"][1].update(dtype="f8"))
write("negative-workspace", lambda p: p.update(workspace_bytes=-1))
write("argument-kind", lambda p: p["arguments"][1].update(kind="tensormap"))
write("view-beyond-temporary", set_operand(
    "mlp_gemm1", 4, {"temporary": 1, "offset": 8, "sizes": [8, 2], "strides": [2, 1]}))
write("view-beyond-argument", set_operand(
    "mlp_gemm0", 0, {"argument": 0, "offset": 64, "sizes": [8, 64], "strides": [64, 1]}))
write("view-ranks", set_operand(
    "mlp_gemm1", 4, {"temporary": 1, "offset": 0, "sizes": [8, 2], "strides": [2]}))
write("view-negative", set_operand(
    "mlp_gemm1", 4, {"temporary": 1, "offset": 0, "sizes": [8, -2], "strides": [2, 1]}))
write("whole-temporary", set_operand("mlp_gemm1", 4, {"temporary": 1}))
write("unknown-argument", set_operand("mlp_finish0", 1, {"argument": 7}))
write("unknown-temporary", set_operand("mlp_finish0", 0, {"temporary": 2, "offset": 0, "sizes": [8, 2], "strides": [2, 1]}))
write("no-source", set_operand("mlp_finish0", 0, {"offset": 0, "sizes": [8, 2], "strides": [2, 1]}))
write("bad-value", set_operand("mlp_kernel", 0, {"value": "eight"}))
write("extra-operand", lambda p: step(p, "mlp_finish0")["args"].append({"argument": 5}))
write("missing-operand", lambda p: step(p, "mlp_finish0")["args"].pop())
# norm (kernels.mlir) takes a scalar, argument 4.
write("scalar-view", set_operand(
    "norm_gemm0", 4, {"argument": 4, "offset": 0, "sizes": [], "strides": []}), "norm")
write("dynamic-view", set_operand(
    "norm_gemm0", 3, {"argument": 3, "offset": 0, "sizes": [8], "strides": [1]}), "norm")
