"""Random valid coda programs and their meaning written independently.

A program is one GEMM and an epilogue: a DAG of f32 values (the accumulator,
epilogue inputs of every access form, positions, elementwise math, roundings
to bf16/f16, pair_map, statistics over groups of a row used by later values)
and outputs of every kind (tile outputs, row and column partials of sum /
max / logsumexp at any tile, row_select, pair_contract, interleave, values
written once per group, tile outputs written transposed). `generate` draws one from a seed; `emit` writes it twice:

  @fused      the coda.gemm with its epilogue region,
  @reference  the same computation as plain linalg on tensors (a matmul, the
              values' arithmetic in one of the forms frontends emit: STYLES,
              pad/expand/reduce for the partials, tensor.extract for pairs
              and gathers), written from the program description and not
              from coda's lowering.

so that `coda-opt --coda-test-differential-main` compares coda's reference
lowering against an independent program on random inputs, and
`--coda-test-differential-main=fuse` checks `--coda-fuse` on the linalg one.
Programs are plain dicts (JSON-serializable) so that a failure can be saved,
shrunk and replayed.
"""

import copy
import math
import random

FLOATS = ("f32", "bf16", "f16")
# 8-bit tile outputs and the magnitude each saturates at: the value is clamped
# to +-max before the cast (the cast of a larger one is NaN in e4m3fn), as a
# quantizing epilogue writes it.
FP8_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}
UNARY = ("neg", "abs", "tanh", "sigmoid", "silu", "exp_tanh", "log1p_abs",
         "rsqrt1p", "gelu_erf", "scale", "offset")
BINARY = ("add", "sub", "mul", "max", "min", "div1p")
# Unary ops of programs written by hand (test/Fuzz/Programs), never drawn:
# `rsqrt_offset` c is rsqrt(x + c), an RMSNorm's reciprocal root of its mean
# square plus epsilon (x >= 0 there).
HAND_UNARY = ("rsqrt_offset",)
REDUCTIONS = ("sum", "max", "logsumexp")
# Statistics over groups of a row (coda.group_reduce) and the widths drawn.
GROUP_KINDS = ("sum", "max", "min")
GROUP_WIDTHS = (8, 16, 32)
GROUP_WIDTHS_GPU = (8, 16, 32, 64, 128)
# The forms in which the linalg program is written, as frontends emit them:
#   generic  one linalg.generic per value (its whole expression in one body,
#            inputs broadcast through indexing maps),
#   per_op   one linalg.generic per arithmetic op (torch-mlir's TorchToLinalg
#            lowers each aten op to its own elementwise generic),
#   named    inputs broadcast with linalg.broadcast and the arithmetic as
#            named elementwise ops (linalg.add, linalg.exp, ...) where one
#            exists, constants as linalg.fill (StableHLO-to-linalg and
#            IREE's input conversion); the rest per_op.
STYLES = ("generic", "per_op", "named")
PRODUCTS = ("matmul", "matmul", "matmul", "transposed")
# A magnitude no value of a program may exceed (so f32 never overflows and
# the tolerances mean something).
BOUND = 1e4
# Tests of the checker itself set this: with "epilogue" the linalg reference
# adds 0.5 to the product's element (0, 0); with "derive" the finite
# differences are scaled by 1.5. Every check reading them must fail.
INJECT_FAULT = None


# ----------------------------------------------------------------------------
# Generation


def _bound_unary(op, b, c):
    if op == "rsqrt_offset":
        return 1.0 / math.sqrt(c)
    return {"neg": b, "abs": b, "tanh": 1.0, "sigmoid": 1.0, "silu": b,
            "exp_tanh": math.e, "log1p_abs": math.log1p(b), "rsqrt1p": 1.0,
            "gelu_erf": b, "scale": abs(c) * b, "offset": b + abs(c)}[op]


def _bound_binary(op, a, b):
    return {"add": a + b, "sub": a + b, "mul": a * b, "max": max(a, b),
            "min": max(a, b), "div1p": a}[op]


def _random_expr(rng, leaves, depth):
    """An expression tree over `leaves` (a list of (leaf, bound)): nested
    tuples ("un", op, c, e) / ("bin", op, e1, e2) / ("leaf", leaf)."""
    if depth == 0 or rng.random() < 0.3:
        leaf, bound = rng.choice(leaves)
        return ("leaf", leaf), bound
    if rng.random() < 0.5:
        op = rng.choice(UNARY)
        c = round(rng.uniform(-2, 2), 3)
        e, b = _random_expr(rng, leaves, depth - 1)
        nb = _bound_unary(op, b, c)
        if nb > BOUND:
            return ("un", "tanh", 0.0, e), 1.0
        return ("un", op, c, e), nb
    op = rng.choice(BINARY)
    e1, b1 = _random_expr(rng, leaves, depth - 1)
    e2, b2 = _random_expr(rng, leaves, depth - 1)
    for _ in range(3):
        # x op x is mostly degenerate (x - x, max(x, x)): draw again.
        if e2 != e1:
            break
        e2, b2 = _random_expr(rng, leaves, depth - 1)
    if e1 == e2:
        op = rng.choice(("add", "mul"))
    nb = _bound_binary(op, b1, b2)
    if nb > BOUND:
        return ("bin", "max", ("un", "tanh", 0.0, e1), ("un", "tanh", 0.0, e2)), 1.0
    return ("bin", op, e1, e2), nb


def _leaves(expr):
    if expr[0] == "leaf":
        return {expr[1]}
    if expr[0] == "un":
        return _leaves(expr[3])
    return _leaves(expr[2]) | _leaves(expr[3])


def _covering(rng, leaves, depth):
    """A random expression that reads every argument (every ("arg", k, ...)
    of `leaves`) at least once: what it misses is added on."""
    e, b = _random_expr(rng, leaves, depth)
    seen = {leaf[1] for leaf in _leaves(e)}
    for leaf, bound in leaves:
        if leaf[1] not in seen:
            seen.add(leaf[1])
            e, b = ("bin", "add", e, ("leaf", leaf)), b + bound
    return e, b


def generate(seed, gpu=False, max_size=40):
    """A random valid program. With `gpu`, one the sm_90a lowering is meant to
    take: 16-bit operands, K a multiple of 8, N even."""
    rng = random.Random(seed)
    p = {"seed": seed}
    # How the linalg program is written (see emit_reference), from a stream
    # of its own so that the program itself does not depend on it.
    p["style"] = random.Random(f"style-{seed}").choice(STYLES)
    # One program in four writes its product transposed and transposes it
    # back, as a frontend does around `x.t()`: the fusion must then compute
    # the product in the orientation its readers read it.
    p["product"] = random.Random(f"product-{seed}").choice(PRODUCTS)
    p["dtype"] = rng.choice(("bf16", "f16")) if gpu else rng.choice(FLOATS)
    p["ta"] = rng.random() < 0.25
    p["tb"] = rng.random() < 0.5
    p["M"] = 1 if rng.random() < 0.15 else rng.randint(2, max_size)
    p["K"] = rng.randint(1, max_size)
    if gpu:
        p["K"] = 8 * rng.randint(1, 8)
    pairs = rng.random() < 0.35
    p["stride"] = rng.choice((1, 1, 2, 4, 8)) if pairs else None
    if pairs:
        block = 2 * p["stride"]
        p["N"] = block * rng.randint(1, max(1, max_size // block))
    else:
        p["N"] = rng.randint(1, max_size)
        if gpu and p["N"] % 2:
            p["N"] += 1
    M, N = p["M"], p["N"]

    # Inputs.
    inputs = []
    for _ in range(rng.randint(0, 3)):
        kind = rng.choice(("tile", "row", "col", "scalar", "periodic"))
        item = {"kind": kind, "dtype": "f32" if kind == "scalar" else rng.choice(FLOATS)}
        if gpu and kind != "scalar":
            item["dtype"] = rng.choice(("f32", "bf16"))
        if kind == "periodic":
            divisors = [d for d in range(1, N + 1) if N % d == 0]
            item["period"] = rng.choice(divisors)
        inputs.append(item)
    p["inputs"] = inputs

    # Values: each a node; value 0 is the accumulator.
    values = [{"op": "acc"}]
    bounds = [float(p["K"])]
    for i, item in enumerate(inputs):
        values.append({"op": "input", "input": i})
        bounds.append(0.5 + 0.25 * (2 + i) if item["kind"] == "scalar" else 1.0)
    if rng.random() < 0.3:
        values.append({"op": rng.choice(("row_index", "col_index"))})
        bounds.append(max(M, N) / 16.0)
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.12:
            src = rng.randrange(len(values))
            values.append({"op": "round", "args": [src], "dtype": rng.choice(("bf16", "f16"))})
            bounds.append(bounds[src])
        elif r < 0.24 and p["stride"]:
            args = rng.sample(range(len(values)), min(len(values), rng.randint(1, 2)))
            leaves = [(("arg", k, side), bounds[a]) for k, a in enumerate(args) for side in (0, 1)]
            e0, b0 = _covering(rng, leaves, 2)
            e1, b1 = _random_expr(rng, leaves, 2)
            values.append({"op": "pair_map", "args": args, "exprs": [e0, e1]})
            bounds.append(max(b0, b1))
        else:
            args = rng.sample(range(len(values)), min(len(values), rng.randint(1, 2)))
            if 0 not in args and not any(0 in v.get("args", ()) for v in values):
                args[0] = 0  # the first computation reads the accumulator
            leaves = [(("arg", k), bounds[a]) for k, a in enumerate(args)]
            e, b = _covering(rng, leaves, 3)
            values.append({"op": "expr", "args": args, "expr": e})
            bounds.append(b)
    if not any(0 in node.get("args", ()) for node in values):
        # Only roundings and pair maps of inputs so far: the last value is
        # added to the accumulator, so that the GEMM's result reaches an output.
        last = len(values) - 1
        values.append({"op": "expr", "args": [0, last],
                       "expr": ("bin", "add", ("leaf", ("arg", 0)), ("leaf", ("arg", 1)))})
        bounds.append(bounds[0] + bounds[last])
    # One program in three reads a statistic over groups of each row of a
    # value (from a stream of its own, so that the others do not change).
    grng = random.Random(f"group-{seed}")
    if grng.random() < 1 / 3:
        _add_group_statistics(grng, values, bounds, gpu, N,
                              random.Random(f"argmax-{seed}"))
    p["values"] = values
    p["bounds"] = bounds

    # Outputs: every value nothing else reads reaches one (values beyond
    # four such are summed first), so that no computed value is dead.
    def readers():
        used = set()
        for node in values:
            used.update(node.get("args", ()))
        return [i for i in range(1, len(values)) if i not in used] or [0]
    sinks = readers()
    while len(sinks) > 4:
        x, y = sinks[:2]
        values.append({"op": "expr", "args": [x, y], "expr": ("bin", "add", ("leaf", ("arg", 0)), ("leaf", ("arg", 1)))})
        bounds.append(bounds[x] + bounds[y])
        sinks = readers()
    outputs = []
    for v in sinks:
        r = rng.random()
        if r < 0.35:
            outputs.append({"kind": "tile", "value": v, "dtype": rng.choice(FLOATS)})
        elif r < 0.55:
            outputs.append({"kind": "row_reduce", "value": v, "reduction": rng.choice(REDUCTIONS),
                            "tile": rng.choice((1, 2, 3, 4, 8, 16, 32, 64, 128))})
        elif r < 0.67:
            outputs.append({"kind": "col_reduce", "value": v, "reduction": rng.choice(("sum", "max")),
                            "tile": rng.choice((1, 2, 3, 4, 8, 16, 64))})
        elif r < 0.77:
            outputs.append({"kind": "row_select", "value": v, "index": rng.choice(("i32", "i64"))})
        elif r < 0.89 and p["stride"]:
            other = rng.randrange(len(values))
            args = [v] if other == v else [v, other]
            leaves = [(("arg", k, side), bounds[a]) for k, a in enumerate(args) for side in (0, 1)]
            e, eb = _covering(rng, leaves, 2)
            outputs.append({"kind": "pair_contract", "args": args, "expr": e,
                            "dtype": rng.choice(FLOATS), "bound": eb})
        elif r < 0.95:
            outputs.append({"kind": "interleave", "even": v, "odd": rng.randrange(len(values)),
                            "dtype": rng.choice(FLOATS)})
        else:
            outputs.append({"kind": "tile", "value": v, "dtype": "f32"})
        if rng.random() < 0.2:
            # A second output of the same value.
            outputs.append({"kind": "tile", "value": v, "dtype": rng.choice(FLOATS)})
    # A statistic may also leave once per group (a quantization's scales).
    for i, node in enumerate(values):
        if node["op"] == "group" and grng.random() < 0.5:
            outputs.append({"kind": "group_value", "value": i, "width": node["width"]})
    # One tile output in four is 8-bit, from a stream of its own so that the
    # rest of the program does not depend on it.
    frng = random.Random(f"fp8-{seed}")
    for out in outputs:
        if out["kind"] == "tile" and frng.random() < 0.25:
            out["dtype"] = frng.choice(tuple(FP8_MAX))
    # One CPU tile output in six is written transposed (N x M, coda.transpose),
    # from a stream of its own.
    trng = random.Random(f"transpose-{seed}")
    for out in outputs:
        if out["kind"] == "tile" and not gpu and trng.random() < 1 / 6:
            out["kind"] = "transpose"
    p["outputs"] = outputs
    if gpu:
        _fit_gpu(rng, p)
        # One GPU program in four runs batched in its GPU forms
        # (emit_fused(batched=True), gpu_check.py): B copies of the program,
        # lhs, outputs and every input but column and scalar ones with a
        # leading batch dimension, rhs too or shared. From a stream of its
        # own, so that the program itself does not depend on it.
        brng = random.Random(f"batch-{seed}")
        if brng.random() < 0.25:
            p["B"] = brng.choice((2, 3))
            p["rhs_batched"] = brng.random() < 0.5
    return p


def _depends(values, i, pred):
    """Whether value i, or a value it is computed from, satisfies `pred`."""
    work, seen = [i], set()
    while work:
        v = work.pop()
        if v in seen:
            continue
        seen.add(v)
        if pred(values[v]):
            return True
        work += values[v].get("args", [])
    return False


def _add_group_statistics(rng, values, bounds, gpu, N, arng):
    """A statistic over groups of w columns of a value (not computed from a
    pair_map or another width's statistic: its elements must be computable
    on their own), and a value that uses it at every element of the group;
    sometimes a second statistic of the same groups of that one (a softmax's
    maximum, then its sum of exponentials). Half the maxima of CPU programs
    are arg-maxima (from `arng`, so that the other draws do not change): the
    column of the group's first maximum, over 16. Not on the GPU: its check
    evaluates the program in f64, where a near tie may fall the other way."""
    w = rng.choice(GROUP_WIDTHS_GPU if gpu else GROUP_WIDTHS)
    sources = [i for i in range(len(values))
               if not _depends(values, i, lambda n: n["op"] == "pair_map" or
                               (n["op"] == "group" and n["width"] != w))]
    src = rng.choice(sources)
    for _ in range(1 + (rng.random() < 0.3)):
        kind = rng.choice(GROUP_KINDS)
        if kind == "max" and not gpu and arng.random() < 0.5:
            kind = "argmax"
        values.append({"op": "group", "args": [src], "kind": kind, "width": w})
        # An arg-max is at most N / 16; its bound also covers the sum the
        # derive property reads it as (differentiable()).
        bounds.append(max(N / 16.0, bounds[src] * w) if kind == "argmax" else
                      bounds[src] * (w if kind == "sum" else 1))
        g = len(values) - 1
        leaves = [(("arg", 0), bounds[src]), (("arg", 1), bounds[g])]
        e, b = _covering(rng, leaves, 2)
        values.append({"op": "expr", "args": [src, g], "expr": e})
        bounds.append(b)
        src = len(values) - 1


def differentiable(p):
    """`p` reduced to what --coda-derive-backward differentiates and finite
    differences can check: f32 throughout (no roundings), partial sums and
    row log-sum-exps (finished), no max partials, no interleaved outputs."""
    q = clone(p)
    q["dtype"] = "f32"
    for item in q["inputs"]:
        item["dtype"] = "f32"
    for i, node in enumerate(q["values"]):
        if node["op"] == "round":
            q["values"][i] = {"op": "expr", "args": list(node["args"]), "expr": ("leaf", ("arg", 0))}
    for node in q["values"]:
        if node["op"] == "group":
            # A group's maximum is a constant of the backward (as a
            # quantization's amax): finite differences would see it move.
            node["kind"] = "sum"
        if "expr" in node:
            node["expr"] = _smooth(node["expr"])
        if "exprs" in node:
            node["exprs"] = [_smooth(e) for e in node["exprs"]]
    outs = []
    for out in q["outputs"]:
        out = dict(out)
        if "expr" in out:
            out["expr"] = _smooth(out["expr"])
        if "dtype" in out:
            out["dtype"] = "f32"
        if out["kind"] == "interleave":
            out = {"kind": "tile", "value": out["even"], "dtype": "f32"}
        if out["kind"] == "transpose":
            # Not derived (--coda-derive-backward says so).
            out["kind"] = "tile"
        if out["kind"] == "row_reduce" and out["reduction"] == "max":
            out["reduction"] = "sum"
        if out["kind"] == "col_reduce":
            out["reduction"] = "sum"
        if out["kind"] == "group_value":
            # Written once per group, a constant of the backward.
            out = {"kind": "tile", "value": out["value"], "dtype": "f32"}
        if out["kind"] == "pair_contract" and any(
                _depends(q["values"], a, lambda n: n["op"] == "group") for a in out["args"]):
            # The adjoint of a statistic that a pairwise op reads is not
            # derived (--coda-derive-backward says so).
            out = {"kind": "tile", "value": out["args"][0], "dtype": "f32"}
        outs.append(out)
    q["outputs"] = outs
    return q


DERIVE_EPSILON = 1e-3


def _smooth(e):
    """`e` with its kinks replaced by smooth ops (|x| by tanh x, log(|x| + 1)
    by rsqrt(x^2 + 1), max/min by add/sub, x / (|y| + 1) by x + y), so that
    finite differences cannot straddle one."""
    if e[0] == "leaf":
        return e
    if e[0] == "un":
        op = {"abs": "tanh", "log1p_abs": "rsqrt1p"}.get(e[1], e[1])
        return ("un", op, e[2], _smooth(e[3]))
    op = {"max": "add", "min": "sub", "div1p": "add"}.get(e[1], e[1])
    return ("bin", op, _smooth(e[2]), _smooth(e[3]))


def differentiated(p):
    """Indices into signature(p) of the arguments the backward function
    returns gradients for: the operands and the tile, row and column inputs
    (scalar and periodic inputs are constants to the derivative)."""
    kinds = [None, None] + [item["kind"] for item in p["inputs"]]
    return [i for i, kind in enumerate(kinds) if kind in (None, "tile", "row", "col")]


def emit_derive_check(p, k):
    """@fused_<k> and @reference_<k> comparing the derived backward of
    @forward_<k> with central finite differences, along random directions v
    (one per differentiated argument) and for random upstream gradients g
    (one per output): @fused returns sum_i <grad_i(x; g), v_i>, @reference
    (L(x + e v) - L(x - e v)) / 2e with L(x) = sum_j <g_j, out_j(x)>."""
    names, types = signature(p)
    diff = differentiated(p)
    outs = [finished_type(p, o) for o in p["outputs"]]
    vs = [(f"%v{i}", types[i]) for i in diff]
    gs = [(f"%g{j}", t) for j, t in enumerate(outs)]
    params = list(zip(names, types)) + vs + gs
    # Central differences in f32 carry, per element, a truncation error of
    # order e^2 and a rounding error of order 1e-7 |value| / e (differences
    # are taken elementwise, before the sums); with random g their sum grows
    # like sqrt(elements), as the norms in scale() do. Both functions divide
    # by that scale (computed alike in both) and compare with rtol 2e-2 and
    # an absolute 5e-3; a wrong derivative rule moves the quotient by order 1.
    rtol, atol = 2e-2, 5e-3
    fresh = Names("t")

    def dot(lines, x, y, ty):
        """sum(x * y) as an f32 scalar."""
        rank = ty.count("x")
        dims = ", ".join(f"d{i}" for i in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        scalar = f"affine_map<({dims}) -> ()>"
        e, z, r, v = fresh(), fresh(), fresh(), fresh()
        lines.append(f"{e} = tensor.empty() : tensor<f32>")
        lines.append(f"{z} = linalg.fill ins(%zero : f32) outs({e} : tensor<f32>) -> tensor<f32>")
        its = ", ".join('"reduction"' for _ in range(rank))
        lines.append(f"{r} = linalg.generic {{indexing_maps = [{ident}, {ident}, {scalar}], iterator_types = [{its}]}}"
                     f" ins({x}, {y} : {ty}, {ty}) outs({z} : tensor<f32>) {{")
        lines.append("^bb0(%p: f32, %q: f32, %o: f32):")
        lines.append("  %m = arith.mulf %p, %q : f32")
        lines.append("  %s = arith.addf %m, %o : f32")
        lines.append("  linalg.yield %s : f32")
        lines.append("} -> tensor<f32>")
        lines.append(f"{v} = tensor.extract {r}[] : tensor<f32>")
        return v

    def combine(lines, x, y, t, body):
        """An elementwise linalg.generic over tensors x and y of type t whose
        body computes `%r` from their elements `%p` and `%q`."""
        rank = t.count("x")
        dims = ", ".join(f"d{i}" for i in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        its = ", ".join('"parallel"' for _ in range(rank))
        e, result = fresh(), fresh()
        lines.append(f"{e} = tensor.empty() : {t}")
        lines.append(f"{result} = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], "
                     f"iterator_types = [{its}]}} ins({x}, {y} : {t}, {t}) outs({e} : {t}) {{")
        lines.append("^bb0(%p: f32, %q: f32, %o: f32):")
        lines += ["  " + b for b in body]
        lines.append("  linalg.yield %r : f32")
        lines.append(f"}} -> {t}")
        return result

    def scale(lines):
        """1 + ||g * out(x)|| + ||g|| B / 10, from @forward_<k> at x, with B
        the program's bound on its values' magnitudes: the finite
        differences' rounding error follows the values' magnitudes, which an
        output that cancels (x - (x - y) - y) does not show."""
        r = fresh()
        lines.append(f"{r}:{len(outs)} = call @forward_{k}({', '.join(names)}) : "
                     f"({', '.join(types)}) -> ({', '.join(outs)})")
        squares, g_squares = [], []
        for j, (g, t) in enumerate(gs):
            prod = combine(lines, f"{r}#{j}", g, t, ["%r = arith.mulf %p, %q : f32"])
            squares.append(dot(lines, prod, prod, t))
            g_squares.append(dot(lines, g, g, t))
        root, g_root, weight, term, partial, one, result = (fresh() for _ in range(7))
        lines.append(f"{root} = math.sqrt {total(lines, squares)} : f32")
        lines.append(f"{g_root} = math.sqrt {total(lines, g_squares)} : f32")
        lines.append(f"{weight} = arith.constant {0.1 * max(p['bounds']):e} : f32")
        lines.append(f"{term} = arith.mulf {g_root}, {weight} : f32")
        lines.append(f"{partial} = arith.addf {root}, {term} : f32")
        lines.append(f"{one} = arith.constant 1.0 : f32")
        lines.append(f"{result} = arith.addf {partial}, {one} : f32")
        return result

    def total(lines, terms):
        acc = terms[0]
        for t in terms[1:]:
            n = fresh()
            lines.append(f"{n} = arith.addf {acc}, {t} : f32")
            acc = n
        return acc

    head = ", ".join(f"{n}: {t}" + (f" {{coda_test.range = array<i64: -1, {p['N'] + 1}>}}"
                                    if n.startswith("%target") else "") for n, t in params)
    # @fused: the derived gradients against v.
    F = [f"func.func @fused_{k}({', '.join(f'{n}: {t}' for n, t in params)}) -> tensor<1xf32> {{",
         "  %zero = arith.constant 0.0 : f32"]
    body = []
    grads = fresh()
    gtypes = [types[i] for i in diff]
    body.append(f"{grads}:{len(diff)} = call @forward_{k}_backward({', '.join(names + [g for g, _ in gs])}) : "
                f"({', '.join(types + [t for _, t in gs])}) -> ({', '.join(gtypes)})")
    terms = [dot(body, f"{grads}#{n}", v, t) for n, ((v, t)) in enumerate(vs)]
    d = total(body, terms)
    norm, q = scale(body), fresh()
    body.append(f"{q} = arith.divf {d}, {norm} : f32")
    body.append(f"%res = tensor.from_elements {q} : tensor<1xf32>")
    body.append("return %res : tensor<1xf32>")
    F += ["  " + b for b in body] + ["}"]
    # @reference: central differences of L.
    R = [f"func.func @reference_{k}({head}) -> tensor<1xf32> attributes {{coda_test.rtol = {rtol:e} : f32, "
         f"coda_test.atol = {atol:e} : f32}} {{",
         "  %zero = arith.constant 0.0 : f32",
         f"  %eps = arith.constant {DERIVE_EPSILON:e} : f32"]
    body = []

    def moved(sign):
        args = list(names)
        for (v, t), i in zip(vs, diff):
            step = "addf" if sign > 0 else "subf"
            args[i] = combine(body, names[i], v, t, ["%s = arith.mulf %q, %eps : f32",
                                                     f"%r = arith.{step} %p, %s : f32"])
        r = fresh()
        body.append(f"{r}:{len(outs)} = call @forward_{k}({', '.join(args)}) : ({', '.join(types)}) -> ({', '.join(outs)})")
        return r
    up, down = moved(+1), moved(-1)
    terms = []
    for j, (g, t) in enumerate(gs):
        dd = combine(body, f"{up}#{j}", f"{down}#{j}", t, ["%r = arith.subf %p, %q : f32"])
        terms.append(dot(body, dd, g, t))
    diff_value, two_eps, quotient = total(body, terms), fresh(), fresh()
    body.append(f"{two_eps} = arith.addf %eps, %eps : f32")
    if INJECT_FAULT == "derive":
        scaled, k15 = fresh(), fresh()
        body.append(f"{k15} = arith.constant 1.5 : f32")
        body.append(f"{scaled} = arith.mulf {diff_value}, {k15} : f32")
        diff_value = scaled
    body.append(f"{quotient} = arith.divf {diff_value}, {two_eps} : f32")
    norm, q = scale(body), fresh()
    body.append(f"{q} = arith.divf {quotient}, {norm} : f32")
    body.append(f"%res = tensor.from_elements {q} : tensor<1xf32>")
    body.append("return %res : tensor<1xf32>")
    R += ["  " + b for b in body] + ["}"]
    return "\n".join(F) + "\n\n" + "\n".join(R) + "\n"


def _fit_gpu(rng, p):
    """Adjusts a program to what the sm_90a kernels take (TMA's 16-byte row
    strides, one partials tile per axis equal to the GEMM tile), at sizes
    where several CTAs and ragged edge tiles occur."""
    block = 2 * p["stride"] if p["stride"] else 1
    p["M"] = rng.choice((1, rng.randint(2, 300)))
    if p["ta"]:
        p["M"] = 8 * max(1, p["M"] // 8)
    p["K"] = 8 * rng.randint(1, 24)
    unit = max(16, block)
    p["N"] = unit * rng.randint(1, max(1, 320 // unit))
    for item in p["inputs"]:
        if item["kind"] == "periodic":
            item["period"] = rng.choice([d for d in (8, 16, 32, 64) if p["N"] % d == 0] or [p["N"]])
    row_tile, col_tile = rng.choice((64, 128)), rng.choice((64, 128))
    for out in p["outputs"]:
        if out["kind"] == "row_reduce":
            out["tile"] = row_tile
        elif out["kind"] == "col_reduce":
            out["tile"] = col_tile


# ----------------------------------------------------------------------------
# Emission


MLIR_TYPE = {"f32": "f32", "bf16": "bf16", "f16": "f16", "i32": "i32", "i64": "i64"}


class Names:
    def __init__(self, prefix):
        self.prefix, self.count = prefix, 0

    def __call__(self):
        self.count += 1
        return f"%{self.prefix}{self.count}"


def _const(lines, fresh, value, ty="f32"):
    name = fresh()
    if ty == "f32":
        lines.append(f"{name} = arith.constant {float(value)!r} : f32")
    else:
        lines.append(f"{name} = arith.constant {value} : {ty}")
    return name


def _unary(lines, fresh, op, c, x):
    def one(text):
        name = fresh()
        lines.append(f"{name} = {text}")
        return name
    if op == "neg":
        return one(f"arith.negf {x} : f32")
    if op == "abs":
        return one(f"math.absf {x} : f32")
    if op == "tanh":
        return one(f"math.tanh {x} : f32")
    if op in ("sigmoid", "silu"):
        n = one(f"arith.negf {x} : f32")
        e = one(f"math.exp {n} : f32")
        k1 = _const(lines, fresh, 1.0)
        d = one(f"arith.addf {k1}, {e} : f32")
        s = one(f"arith.divf {k1}, {d} : f32")
        return s if op == "sigmoid" else one(f"arith.mulf {x}, {s} : f32")
    if op == "exp_tanh":
        t = one(f"math.tanh {x} : f32")
        return one(f"math.exp {t} : f32")
    if op == "log1p_abs":
        a = one(f"math.absf {x} : f32")
        k1 = _const(lines, fresh, 1.0)
        s = one(f"arith.addf {a}, {k1} : f32")
        return one(f"math.log {s} : f32")
    if op == "rsqrt1p":
        sq = one(f"arith.mulf {x}, {x} : f32")
        k1 = _const(lines, fresh, 1.0)
        s = one(f"arith.addf {sq}, {k1} : f32")
        return one(f"math.rsqrt {s} : f32")
    if op == "gelu_erf":
        k = _const(lines, fresh, 0.7071067811865476)
        kh = _const(lines, fresh, 0.5)
        k1 = _const(lines, fresh, 1.0)
        xs = one(f"arith.mulf {x}, {k} : f32")
        e = one(f"math.erf {xs} : f32")
        s = one(f"arith.addf {e}, {k1} : f32")
        h = one(f"arith.mulf {x}, {kh} : f32")
        return one(f"arith.mulf {h}, {s} : f32")
    if op == "scale":
        k = _const(lines, fresh, c)
        return one(f"arith.mulf {x}, {k} : f32")
    if op == "offset":
        k = _const(lines, fresh, c)
        return one(f"arith.addf {x}, {k} : f32")
    if op == "rsqrt_offset":
        k = _const(lines, fresh, c)
        s = one(f"arith.addf {x}, {k} : f32")
        return one(f"math.rsqrt {s} : f32")
    raise ValueError(op)


def _binary(lines, fresh, op, x, y):
    name = fresh()
    if op == "div1p":
        a = fresh()
        lines.append(f"{a} = math.absf {y} : f32")
        k1 = _const(lines, fresh, 1.0)
        d = fresh()
        lines.append(f"{d} = arith.addf {a}, {k1} : f32")
        lines.append(f"{name} = arith.divf {x}, {d} : f32")
        return name
    mlir = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf",
            "max": "arith.maximumf", "min": "arith.minimumf"}[op]
    lines.append(f"{name} = {mlir} {x}, {y} : f32")
    return name


def _saturate(lines, fresh, x, bound):
    """x clamped to [-bound, bound]."""
    hi, lo = _const(lines, fresh, bound), _const(lines, fresh, -bound)
    y, z = fresh(), fresh()
    lines.append(f"{y} = arith.minimumf {x}, {hi} : f32")
    lines.append(f"{z} = arith.maximumf {y}, {lo} : f32")
    return z


def emit_expr(lines, fresh, expr, leaf_name):
    kind = expr[0]
    if kind == "leaf":
        return leaf_name(expr[1])
    if kind == "un":
        x = emit_expr(lines, fresh, expr[3], leaf_name)
        return _unary(lines, fresh, expr[1], expr[2], x)
    x = emit_expr(lines, fresh, expr[2], leaf_name)
    y = emit_expr(lines, fresh, expr[3], leaf_name)
    return _binary(lines, fresh, expr[1], x, y)


def _ceil(a, b):
    return -(-a // b)


def output_type(p, out):
    M, N = p["M"], p["N"]
    kind = out["kind"]
    if kind == "tile":
        return f"tensor<{M}x{N}x{out['dtype']}>"
    if kind == "row_reduce":
        return f"tensor<{M}x{_ceil(N, out['tile'])}xf32>"
    if kind == "col_reduce":
        return f"tensor<{_ceil(M, out['tile'])}x{N}xf32>"
    if kind == "row_select":
        return f"tensor<{M}xf32>"
    if kind == "pair_contract":
        return f"tensor<{M}x{N // 2}x{out['dtype']}>"
    if kind == "interleave":
        return f"tensor<{M}x{2 * N}x{out['dtype']}>"
    if kind == "transpose":
        return f"tensor<{N}x{M}x{out['dtype']}>"
    if kind == "group_value":
        return f"tensor<{M}x{_ceil(N, out['width'])}xf32>"
    raise ValueError(kind)


def finished_type(p, out):
    """An output's type once its partials are finished (reduce_partials)."""
    if out["kind"] == "row_reduce":
        return f"tensor<{p['M']}xf32>"
    if out["kind"] == "col_reduce":
        return f"tensor<{p['N']}xf32>"
    return output_type(p, out)


def _input_type(p, item):
    M, N = p["M"], p["N"]
    t = item["dtype"]
    return {"tile": f"tensor<{M}x{N}x{t}>", "row": f"tensor<{M}x{t}>",
            "col": f"tensor<{N}x{t}>", "scalar": "f32",
            "periodic": f"tensor<{M}x{item.get('period', 1)}x{t}>"}[item["kind"]]


def signature(p):
    """(argument names, argument types) of @reference: lhs, rhs, inputs, then
    one index input per row_select."""
    M, N, K, dt = p["M"], p["N"], p["K"], p["dtype"]
    names = ["%a", "%b"]
    types = [f"tensor<{K}x{M}x{dt}>" if p["ta"] else f"tensor<{M}x{K}x{dt}>",
             f"tensor<{N}x{K}x{dt}>" if p["tb"] else f"tensor<{K}x{N}x{dt}>"]
    for i, item in enumerate(p["inputs"]):
        names.append(f"%in{i}")
        types.append(_input_type(p, item))
    for j, out in enumerate(p["outputs"]):
        if out["kind"] == "row_select":
            names.append(f"%target{j}")
            types.append(f"tensor<{M}x{out['index']}>")
    return names, types


def batch_dims(p):
    """Which of @reference's arguments (signature(p)) have the batch
    dimension in a batched program's GPU form: lhs, rhs where batched, tile,
    row and periodic inputs, row_select targets (row inputs)."""
    dims = [True, bool(p.get("rhs_batched"))]
    dims += [item["kind"] in ("tile", "row", "periodic") for item in p["inputs"]]
    dims += [True for out in p["outputs"] if out["kind"] == "row_select"]
    return dims


def _batched(p, t, batched=True):
    """Type `t` with the batch dimension B in front, where `batched` and the
    program has one."""
    if not batched or not p.get("B"):
        return t
    for shaped in ("tensor<", "memref<"):
        if t.startswith(shaped):
            return f"{shaped}{p['B']}x{t[len(shaped):]}"
    return t


def emit_fused(p, name="fused", memref=False, finish=False, batched=False):
    """@name as a coda.gemm on tensors (destinations after @reference's
    arguments, results returned), or with `memref` on buffers in place (every
    output a destination argument; a row_select destination must hold
    zeros), the form the GPU runtime launches. With `batched`, a program
    with a batch count B (generate(gpu=True)) as its batched GEMM."""
    M, N = p["M"], p["N"]
    bt = (lambda t, on=True: _batched(p, t, on)) if batched else (lambda t, on=True: t)
    names, types = signature(p)
    types = [bt(t, on) for t, on in zip(types, batch_dims(p))]
    outs = p["outputs"]
    if memref:
        types = [t.replace("tensor<", "memref<") for t in types]
    dest_names = [f"%d{j}" for j in range(len(outs))
                  if not finish and (memref or outs[j]["kind"] != "row_select")]
    dest_types = [bt(output_type(p, o)) for o in outs
                  if not finish and (memref or o["kind"] != "row_select")]
    result_types = [bt(output_type(p, o)) for o in outs]
    if memref:
        dest_types = [t.replace("tensor<", "memref<") for t in dest_types]
        result_types = dest_types
    args = ", ".join(f"{n}: {t}" for n, t in zip(names + dest_names, types + dest_types))
    final_types = [finished_type(p, o) for o in outs] if finish else result_types
    L = [f"func.func @{name}({args})" + ("" if memref else f"\n    -> ({', '.join(final_types)})") + " {"]
    body = []
    if finish:
        # Destinations made here, partials finished after the GEMM: the form
        # --coda-derive-backward differentiates.
        for j, out in enumerate(outs):
            if out["kind"] != "row_select":
                body.append(f"%d{j} = tensor.empty() : {output_type(p, out)}")
    # Row selects keep the destination's value where the target is outside
    # [0, N): start them at zero, as the reference does.
    out_operands = []
    for j, out in enumerate(outs):
        if out["kind"] == "row_select" and not memref:
            zt = bt(f"tensor<{M}xf32>")
            body.append(f"%z{j}e = tensor.empty() : {zt}")
            body.append(f"%z{j}c = arith.constant 0.0 : f32")
            body.append(f"%z{j} = linalg.fill ins(%z{j}c : f32) outs(%z{j}e : {zt}) -> {zt}")
            out_operands.append(f"%z{j}")
        else:
            out_operands.append(f"%d{j}")
    epi = ["%acc"]
    shaped = "memref<" if memref else "tensor<"
    for i, item in enumerate(p["inputs"]):
        t = bt(_input_type(p, item), item["kind"] in ("tile", "row", "periodic"))
        epi.append(f"{item['kind']} %e{i} = %in{i} : {t.replace('tensor<', shaped)}")
    for j, out in enumerate(outs):
        if out["kind"] == "row_select":
            epi.append(f"row %t{j} = %target{j} : {bt(shaped + str(M) + 'x' + out['index'] + '>')}")
    flags = (" transpose_a" if p["ta"] else "") + (" transpose_b" if p["tb"] else "")
    res = "" if memref else ("%r = " if len(outs) == 1 else f"%r:{len(outs)} = ")
    body.append(f"{res}coda.gemm %a, %b{flags} : {types[0]}, {types[1]}")
    body.append(f"    epilogue({', '.join(epi)})")
    body.append(f"    outs({', '.join(out_operands)} : {', '.join(result_types)}) {{")
    region = []
    fresh = Names("v")
    vals = []
    stride = f" stride {p['stride']}" if p["stride"] and p["stride"] != 1 else ""
    for node in p["values"]:
        op = node["op"]
        if op == "acc":
            vals.append("%acc")
        elif op == "input":
            item = p["inputs"][node["input"]]
            name = f"%e{node['input']}"
            if item["dtype"] != "f32":
                x = fresh()
                region.append(f"{x} = arith.extf {name} : {item['dtype']} to f32")
                name = x
            vals.append(name)
        elif op in ("row_index", "col_index"):
            i = fresh()
            region.append(f"{i} = coda.{op}")
            j = fresh()
            region.append(f"{j} = arith.index_cast {i} : index to i64")
            f = fresh()
            region.append(f"{f} = arith.sitofp {j} : i64 to f32")
            k = _const(region, fresh, 0.0625)
            vals.append(_binary(region, fresh, "mul", f, k))
        elif op == "round":
            t = fresh()
            region.append(f"{t} = arith.truncf {vals[node['args'][0]]} : f32 to {node['dtype']}")
            e = fresh()
            region.append(f"{e} = arith.extf {t} : {node['dtype']} to f32")
            vals.append(e)
        elif op == "expr":
            vals.append(emit_expr(region, fresh, node["expr"],
                                  lambda leaf: vals[node["args"][leaf[1]]]))
        elif op == "group" and node["kind"] == "argmax":
            # The column of the group's first maximum, over 16 (as col_index).
            at, j, f = fresh(), fresh(), fresh()
            region.append(f"{at} = coda.group_reduce argmax {vals[node['args'][0]]} "
                          f"row group {node['width']} : f32 -> index")
            region.append(f"{j} = arith.index_cast {at} : index to i64")
            region.append(f"{f} = arith.sitofp {j} : i64 to f32")
            k = _const(region, fresh, 0.0625)
            vals.append(_binary(region, fresh, "mul", f, k))
        elif op == "group":
            name = fresh()
            region.append(f"{name} = coda.group_reduce {node['kind']} {vals[node['args'][0]]} "
                          f"row group {node['width']} : f32 -> f32")
            vals.append(name)
        elif op == "pair_map":
            name = fresh()
            binds = ", ".join(f"(%q{k}a, %q{k}b) = {vals[a]}" for k, a in enumerate(node["args"]))
            tys = ", ".join("f32" for _ in node["args"])
            region.append(f"{name} = coda.pair_map{stride} {binds} : {tys} -> f32 {{")
            inner, ifresh = [], Names("w")
            leaf = lambda l: f"%q{l[1]}{'ab'[l[2]]}"
            y0 = emit_expr(inner, ifresh, node["exprs"][0], leaf)
            y1 = emit_expr(inner, ifresh, node["exprs"][1], leaf)
            region += ["  " + s for s in inner]
            region.append(f"  coda.yield {y0}, {y1} : f32, f32")
            region.append("}")
            vals.append(name)
        else:
            raise ValueError(op)
    yields, ytypes = [], []
    for j, out in enumerate(outs):
        kind = out["kind"]
        if kind in ("tile", "transpose"):
            v = vals[out["value"]]
            if out["dtype"] in FP8_MAX:
                v = _saturate(region, fresh, v, FP8_MAX[out["dtype"]])
            if out["dtype"] != "f32":
                t = fresh()
                region.append(f"{t} = arith.truncf {v} : f32 to {out['dtype']}")
                v = t
            ytype = out["dtype"]
            if kind == "transpose":
                t = fresh()
                region.append(f"{t} = coda.transpose {v} : {ytype}")
                v, ytype = t, f"!coda.transposed<{ytype}>"
            yields.append(v)
            ytypes.append(ytype)
        elif kind in ("row_reduce", "col_reduce"):
            name = fresh()
            region.append(f"{name} = coda.{kind} {out['reduction']} {vals[out['value']]} tile {out['tile']} : f32")
            yields.append(name)
            ytypes.append("!coda.partial<f32>")
        elif kind == "group_value":
            node = p["values"][out["value"]]
            if node["op"] != "group" or node["width"] != out["width"]:
                raise ValueError("a group_value output writes a statistic of its groups")
            name = fresh()
            region.append(f"{name} = coda.group_value {vals[out['value']]} row group {out['width']} : f32")
            yields.append(name)
            ytypes.append("!coda.grouped<f32>")
        elif kind == "row_select":
            name = fresh()
            region.append(f"{name} = coda.row_select {vals[out['value']]} at %t{j} : f32, {out['index']}")
            yields.append(name)
            ytypes.append("!coda.row<f32>")
        elif kind == "pair_contract":
            name = fresh()
            dt = out["dtype"]
            binds = ", ".join(f"(%q{k}a, %q{k}b) = {vals[a]}" for k, a in enumerate(out["args"]))
            tys = ", ".join("f32" for _ in out["args"])
            region.append(f"{name} = coda.pair_contract{stride} {binds} : {tys} -> !coda.pair<{dt}> {{")
            inner, ifresh = [], Names("w")
            y = emit_expr(inner, ifresh, out["expr"], lambda l: f"%q{l[1]}{'ab'[l[2]]}")
            if dt != "f32":
                t = ifresh()
                inner.append(f"{t} = arith.truncf {y} : f32 to {dt}")
                y = t
            region += ["  " + s for s in inner]
            region.append(f"  coda.yield {y} : {dt}")
            region.append("}")
            yields.append(name)
            ytypes.append(f"!coda.pair<{dt}>")
        elif kind == "interleave":
            dt = out["dtype"]
            ev, od = vals[out["even"]], vals[out["odd"]]
            if dt != "f32":
                a, b = fresh(), fresh()
                region.append(f"{a} = arith.truncf {ev} : f32 to {dt}")
                region.append(f"{b} = arith.truncf {od} : f32 to {dt}")
                ev, od = a, b
            name = fresh()
            region.append(f"{name} = coda.interleave {ev}, {od} : {dt}")
            yields.append(name)
            ytypes.append(f"!coda.interleaved<{dt}>")
    region.append(f"coda.yield {', '.join(yields)} : {', '.join(ytypes)}")
    body += ["  " + s for s in region]
    body.append("}")
    if memref:
        body.append("return")
    elif finish:
        results = []
        for j, out in enumerate(outs):
            r = "%r" if len(outs) == 1 else f"%r#{j}"
            if out["kind"] in ("row_reduce", "col_reduce"):
                axis = "row" if out["kind"] == "row_reduce" else "col"
                ft = finished_type(p, out)
                body.append(f"%f{j}e = tensor.empty() : {ft}")
                body.append(f"%f{j} = coda.reduce_partials {out['reduction']} {axis} {r} : "
                            f"{output_type(p, out)} outs(%f{j}e : {ft})")
                r = f"%f{j}"
            results.append(r)
        body.append(f"return {', '.join(results)} : {', '.join(final_types)}")
    else:
        results = ["%r"] if len(outs) == 1 else [f"%r#{j}" for j in range(len(outs))]
        body.append(f"return {', '.join(results)} : {', '.join(result_types)}")
    L += ["  " + s for s in body]
    L.append("}")
    return "\n".join(L)


class _Ref:
    """Emits @reference: every value as an M x N f32 tensor."""

    def __init__(self, p):
        self.p, self.lines, self.fresh = p, [], Names("x")
        M, N = p["M"], p["N"]
        self.mn = f"tensor<{M}x{N}xf32>"

    def emit(self, text):
        self.lines.append(text)

    def generic(self, shape, elem, ins, body, rank=2, iterators=None):
        """A parallel linalg.generic over `shape` producing tensor<shape x elem>:
        `ins` = [(name, map, type)], `body(lines, fresh, args)` returns the
        yielded value's name; the body may read linalg.index."""
        ty = f"tensor<{'x'.join(map(str, shape))}x{elem}>"
        e = self.fresh()
        self.emit(f"{e} = tensor.empty() : {ty}")
        dims = ", ".join(f"d{i}" for i in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        maps = [m for _, m, _ in ins] + [ident]
        its = ", ".join('"parallel"' for _ in range(rank))
        name = self.fresh()
        ins_text = ""
        if ins:
            ins_text = f" ins({', '.join(n for n, _, _ in ins)} : {', '.join(t for _, _, t in ins)})"
        self.emit(f"{name} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}}"
                  f"{ins_text} outs({e} : {ty}) {{")
        args = [f"%a{i}" for i in range(len(ins))]
        arg_types = [self._elem(t) for _, _, t in ins] + [elem]
        self.emit(f"^bb0({', '.join(f'{a}: {t}' for a, t in zip(args + ['%out'], arg_types))}):")
        inner = []
        y = body(inner, Names(f"y{name[2:]}_"), args)
        for s in inner:
            self.emit("  " + s)
        self.emit(f"  linalg.yield {y} : {elem}")
        self.emit(f"}} -> {ty}")
        return name

    def named(self, op, ins):
        """A named elementwise linalg op over M x N f32 tensors."""
        e, name = self.fresh(), self.fresh()
        self.emit(f"{e} = tensor.empty() : {self.mn}")
        types = ", ".join(self.mn for _ in ins)
        self.emit(f"{name} = linalg.{op} ins({', '.join(ins)} : {types}) outs({e} : {self.mn}) -> {self.mn}")
        return name

    def constant(self, value):
        """An M x N f32 tensor of `value` (linalg.fill)."""
        c, e, name = self.fresh(), self.fresh(), self.fresh()
        self.emit(f"{c} = arith.constant {float(value)!r} : f32")
        self.emit(f"{e} = tensor.empty() : {self.mn}")
        self.emit(f"{name} = linalg.fill ins({c} : f32) outs({e} : {self.mn}) -> {self.mn}")
        return name

    # Named elementwise ops for the expression nodes that have one.
    NAMED_UNARY = {"neg": ["negf"], "abs": ["abs"], "tanh": ["tanh"], "exp_tanh": ["tanh", "exp"]}
    NAMED_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "max": "max", "min": "min"}

    def expr_per_op(self, expr, leaf_tensor, named):
        """`expr` over M x N tensors, one linalg op per node: a named op where
        `named` and one exists, else an elementwise linalg.generic."""
        ID = "affine_map<(d0, d1) -> (d0, d1)>"
        kind = expr[0]
        if kind == "leaf":
            return leaf_tensor(expr[1])
        if kind == "un":
            x = self.expr_per_op(expr[3], leaf_tensor, named)
            op, c = expr[1], expr[2]
            if named and op in self.NAMED_UNARY:
                for name in self.NAMED_UNARY[op]:
                    x = self.named(name, [x])
                return x
            if named and op in ("scale", "offset"):
                return self.named("mul" if op == "scale" else "add", [x, self.constant(c)])
            return self.generic((self.p["M"], self.p["N"]), "f32", [(x, ID, self.mn)],
                                lambda L, f, a: _unary(L, f, op, c, a[0]))
        x = self.expr_per_op(expr[2], leaf_tensor, named)
        y = self.expr_per_op(expr[3], leaf_tensor, named)
        if named and expr[1] in self.NAMED_BINARY:
            return self.named(self.NAMED_BINARY[expr[1]], [x, y])
        return self.generic((self.p["M"], self.p["N"]), "f32", [(x, ID, self.mn), (y, ID, self.mn)],
                            lambda L, f, a: _binary(L, f, expr[1], a[0], a[1]))

    @staticmethod
    def _elem(ty):
        return ty.split("x")[-1].rstrip(">") if ty.startswith("tensor") else ty

    def index(self, lines, fresh, d):
        name = fresh()
        lines.append(f"{name} = linalg.index {d} : index")
        return name


def emit_reference(p, name="reference"):
    M, N, K, dt = p["M"], p["N"], p["K"], p["dtype"]
    style = p.get("style", "generic")
    names, types = signature(p)
    r = _Ref(p)
    mn = r.mn
    ID = "affine_map<(d0, d1) -> (d0, d1)>"
    ROW = "affine_map<(d0, d1) -> (d0)>"
    COL = "affine_map<(d0, d1) -> (d1)>"
    SCALAR = None
    # The product.
    a, b = "%a", "%b"
    if p["ta"]:
        r.emit(f"%ate = tensor.empty() : tensor<{M}x{K}x{dt}>")
        r.emit(f"%at = linalg.transpose ins(%a : {types[0]}) outs(%ate : tensor<{M}x{K}x{dt}>) permutation = [1, 0]")
        a = "%at"
    if p["tb"]:
        r.emit(f"%bte = tensor.empty() : tensor<{K}x{N}x{dt}>")
        r.emit(f"%bt = linalg.transpose ins(%b : {types[1]}) outs(%bte : tensor<{K}x{N}x{dt}>) permutation = [1, 0]")
        b = "%bt"
    r.emit("%zero = arith.constant 0.0 : f32")
    r.emit("%ninf = arith.constant 0xFF800000 : f32")
    r.emit(f"%mme = tensor.empty() : {mn}")
    r.emit(f"%mmz = linalg.fill ins(%zero : f32) outs(%mme : {mn}) -> {mn}")
    if p.get("product", "matmul") == "transposed":
        nm = f"tensor<{N}x{M}xf32>"
        r.emit(f"%mmte = tensor.empty() : {nm}")
        r.emit(f"%mmtz = linalg.fill ins(%zero : f32) outs(%mmte : {nm}) -> {nm}")
        r.emit("%mmt = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, "
               "affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (n, m)>], "
               "iterator_types = [\"parallel\", \"parallel\", \"reduction\"]} "
               f"ins({a}, {b} : tensor<{M}x{K}x{dt}>, tensor<{K}x{N}x{dt}>) outs(%mmtz : {nm}) {{")
        r.emit(f"^bb0(%pa: {dt}, %pb: {dt}, %pacc: f32):")
        pa, pb = "%pa", "%pb"
        if dt != "f32":
            r.emit(f"  %pae = arith.extf %pa : {dt} to f32")
            r.emit(f"  %pbe = arith.extf %pb : {dt} to f32")
            pa, pb = "%pae", "%pbe"
        r.emit(f"  %pm = arith.mulf {pa}, {pb} : f32")
        r.emit("  %ps = arith.addf %pacc, %pm : f32")
        r.emit("  linalg.yield %ps : f32")
        r.emit(f"}} -> {nm}")
        r.emit(f"%mm = linalg.transpose ins(%mmt : {nm}) outs(%mme : {mn}) permutation = [1, 0]")
    else:
        r.emit(f"%mm = linalg.matmul ins({a}, {b} : tensor<{M}x{K}x{dt}>, tensor<{K}x{N}x{dt}>) outs(%mmz : {mn}) -> {mn}")
    if INJECT_FAULT == "epilogue":
        r.emit("%c0i = arith.constant 0 : index")
        r.emit("%mm00 = tensor.extract %mm[%c0i, %c0i] : " + mn)
        r.emit("%half = arith.constant 0.5 : f32")
        r.emit("%bad = arith.addf %mm00, %half : f32")
        r.emit(f"%mmf = tensor.insert %bad into %mm[%c0i, %c0i] : {mn}")
    stride = p["stride"] or 1

    def partner_cols(lines, fresh, n):
        """(first column, second column, is-first) of the pair holding n."""
        s2 = _const(lines, fresh, 2 * stride, "index")
        s1 = _const(lines, fresh, stride, "index")
        j = fresh()
        lines.append(f"{j} = arith.remui {n}, {s2} : index")
        first = fresh()
        lines.append(f"{first} = arith.cmpi ult, {j}, {s1} : index")
        up = fresh()
        lines.append(f"{up} = arith.addi {n}, {s1} : index")
        down = fresh()
        lines.append(f"{down} = arith.subi {n}, {s1} : index")
        c0 = fresh()
        lines.append(f"{c0} = arith.select {first}, {n}, {down} : index")
        c1 = fresh()
        lines.append(f"{c1} = arith.select {first}, {up}, {n} : index")
        return c0, c1, first

    def pair_leaves(lines, fresh, srcs, m, c0, c1):
        """Reads each source at the pair's two columns; the leaf function of
        a pair region's expression over them."""
        got = {}
        for k, src in enumerate(srcs):
            for side, c in ((0, c0), (1, c1)):
                x = fresh()
                lines.append(f"{x} = tensor.extract {src}[{m}, {c}] : {mn}")
                got[(k, side)] = x
        return lambda leaf: got[(leaf[1], leaf[2])]

    vals, stats = [], {}
    for i, node in enumerate(p["values"]):
        op = node["op"]
        if op == "acc":
            vals.append("%mmf" if INJECT_FAULT == "epilogue" else "%mm")
        elif op == "input":
            i = node["input"]
            item = p["inputs"][i]
            kind, t = item["kind"], item["dtype"]

            def up(lines, fresh, x, t=t):
                if t == "f32":
                    return x
                y = fresh()
                lines.append(f"{y} = arith.extf {x} : {t} to f32")
                return y
            if kind == "scalar" and style == "named":
                e, filled = r.fresh(), r.fresh()
                r.emit(f"{e} = tensor.empty() : {mn}")
                r.emit(f"{filled} = linalg.fill ins(%in{i} : f32) outs({e} : {mn}) -> {mn}")
                vals.append(filled)
            elif kind in ("row", "col") and t == "f32" and style == "named":
                e, wide = r.fresh(), r.fresh()
                r.emit(f"{e} = tensor.empty() : {mn}")
                r.emit(f"{wide} = linalg.broadcast ins(%in{i} : {_input_type(p, item)}) "
                       f"outs({e} : {mn}) dimensions = [{1 if kind == 'row' else 0}]")
                vals.append(wide)
            elif kind == "scalar":
                vals.append(r.generic((M, N), "f32", [], lambda L, f, a, i=i: f"%in{i}"))
            elif kind == "periodic":
                P = item["period"]

                def body(L, f, a, i=i, P=P, t=t):
                    m, n = r.index(L, f, 0), r.index(L, f, 1)
                    kp = _const(L, f, P, "index")
                    c = f()
                    L.append(f"{c} = arith.remui {n}, {kp} : index")
                    x = f()
                    L.append(f"{x} = tensor.extract %in{i}[{m}, {c}] : tensor<{M}x{P}x{t}>")
                    return up(L, f, x)
                vals.append(r.generic((M, N), "f32", [], body))
            else:
                amap = {"tile": ID, "row": ROW, "col": COL}[kind]
                vals.append(r.generic((M, N), "f32", [(f"%in{i}", amap, _input_type(p, item))],
                                      lambda L, f, a, up=up: up(L, f, a[0])))
        elif op in ("row_index", "col_index"):
            d = 0 if op == "row_index" else 1

            def body(L, f, a, d=d):
                i = r.index(L, f, d)
                j = f()
                L.append(f"{j} = arith.index_cast {i} : index to i64")
                x = f()
                L.append(f"{x} = arith.sitofp {j} : i64 to f32")
                k = _const(L, f, 0.0625)
                return _binary(L, f, "mul", x, k)
            vals.append(r.generic((M, N), "f32", [], body))
        elif op == "round":
            t = node["dtype"]

            def body(L, f, a, t=t):
                x = f()
                L.append(f"{x} = arith.truncf {a[0]} : f32 to {t}")
                y = f()
                L.append(f"{y} = arith.extf {x} : {t} to f32")
                return y
            vals.append(r.generic((M, N), "f32", [(vals[node["args"][0]], ID, mn)], body))
        elif op == "expr" and style != "generic":
            vals.append(r.expr_per_op(node["expr"], lambda l, node=node: vals[node["args"][l[1]]],
                                      named=style == "named"))
        elif op == "expr":
            ins = [(vals[x], ID, mn) for x in node["args"]]
            vals.append(r.generic((M, N), "f32", ins,
                                  lambda L, f, a, node=node: emit_expr(L, f, node["expr"], lambda l: a[l[1]])))
        elif op == "group":
            stats[i] = _emit_group_statistic(r, p, node, vals[node["args"][0]])
            w = node["width"]
            G = _ceil(N, w)
            spread = f"affine_map<(d0, d1) -> (d0, d1 floordiv {w})>"
            vals.append(r.generic((M, N), "f32", [(stats[i], spread, f"tensor<{M}x{G}xf32>")],
                                  lambda L, f, a: a[0]))
        elif op == "pair_map":
            srcs = [vals[x] for x in node["args"]]

            def body(L, f, a, srcs=srcs, node=node):
                m, n = r.index(L, f, 0), r.index(L, f, 1)
                c0, c1, first = partner_cols(L, f, n)
                leaf = pair_leaves(L, f, srcs, m, c0, c1)
                y0 = emit_expr(L, f, node["exprs"][0], leaf)
                y1 = emit_expr(L, f, node["exprs"][1], leaf)
                y = f()
                L.append(f"{y} = arith.select {first}, {y0}, {y1} : f32")
                return y
            vals.append(r.generic((M, N), "f32", [], body))
    results = []
    for j, out in enumerate(p["outputs"]):
        kind = out["kind"]
        if kind in ("tile", "transpose"):
            t = out["dtype"]

            def body(L, f, a, t=t):
                if t == "f32":
                    return a[0]
                x = _saturate(L, f, a[0], FP8_MAX[t]) if t in FP8_MAX else a[0]
                y = f()
                L.append(f"{y} = arith.truncf {x} : f32 to {t}")
                return y
            # A transposed output reads element (m, n) at its (n, m).
            shape, amap = ((M, N), ID) if kind == "tile" else (
                (N, M), "affine_map<(d0, d1) -> (d1, d0)>")
            results.append(r.generic(shape, t, [(vals[out["value"]], amap, mn)], body))
        elif kind in ("row_reduce", "col_reduce"):
            results.append(_emit_partials(r, p, out, vals[out["value"]]))
        elif kind == "group_value":
            results.append(stats[out["value"]])
        elif kind == "row_select":
            src = vals[out["value"]]
            it = out["index"]

            def body(L, f, a, src=src, it=it):
                m = r.index(L, f, 0)
                z = _const(L, f, 0, it)
                nn = _const(L, f, N, it)
                ge = f()
                L.append(f"{ge} = arith.cmpi sge, {a[0]}, {z} : {it}")
                lt = f()
                L.append(f"{lt} = arith.cmpi slt, {a[0]}, {nn} : {it}")
                ok = f()
                L.append(f"{ok} = arith.andi {ge}, {lt} : i1")
                safe = f()
                L.append(f"{safe} = arith.select {ok}, {a[0]}, {z} : {it}")
                n = f()
                L.append(f"{n} = arith.index_cast {safe} : {it} to index")
                x = f()
                L.append(f"{x} = tensor.extract {src}[{m}, {n}] : {mn}")
                zf = _const(L, f, 0.0)
                y = f()
                L.append(f"{y} = arith.select {ok}, {x}, {zf} : f32")
                return y
            rid = "affine_map<(d0) -> (d0)>"
            results.append(r.generic((M,), "f32", [(f"%target{j}", rid, f"tensor<{M}x{it}>")], body, rank=1))
        elif kind == "pair_contract":
            srcs = [vals[x] for x in out["args"]]
            t = out["dtype"]

            def body(L, f, a, srcs=srcs, out=out, t=t):
                m, q = r.index(L, f, 0), r.index(L, f, 1)
                s1 = _const(L, f, stride, "index")
                blk = f()
                L.append(f"{blk} = arith.divui {q}, {s1} : index")
                jj = f()
                L.append(f"{jj} = arith.remui {q}, {s1} : index")
                s2 = _const(L, f, 2 * stride, "index")
                base = f()
                L.append(f"{base} = arith.muli {blk}, {s2} : index")
                c0 = f()
                L.append(f"{c0} = arith.addi {base}, {jj} : index")
                c1 = f()
                L.append(f"{c1} = arith.addi {c0}, {s1} : index")
                y = emit_expr(L, f, out["expr"], pair_leaves(L, f, srcs, m, c0, c1))
                if t != "f32":
                    z = f()
                    L.append(f"{z} = arith.truncf {y} : f32 to {t}")
                    y = z
                return y
            results.append(r.generic((M, N // 2), t, [], body))
        elif kind == "interleave":
            ev, od = vals[out["even"]], vals[out["odd"]]
            t = out["dtype"]

            def body(L, f, a, ev=ev, od=od, t=t):
                m, q = r.index(L, f, 0), r.index(L, f, 1)
                two = _const(L, f, 2, "index")
                n = f()
                L.append(f"{n} = arith.divui {q}, {two} : index")
                rem = f()
                L.append(f"{rem} = arith.remui {q}, {two} : index")
                z = _const(L, f, 0, "index")
                isEven = f()
                L.append(f"{isEven} = arith.cmpi eq, {rem}, {z} : index")
                x = f()
                L.append(f"{x} = tensor.extract {ev}[{m}, {n}] : {mn}")
                y = f()
                L.append(f"{y} = tensor.extract {od}[{m}, {n}] : {mn}")
                v = f()
                L.append(f"{v} = arith.select {isEven}, {x}, {y} : f32")
                if t != "f32":
                    w = f()
                    L.append(f"{w} = arith.truncf {v} : f32 to {t}")
                    v = w
                return v
            results.append(r.generic((M, 2 * N), t, [], body))
    result_types = [output_type(p, o) for o in p["outputs"]]
    args = []
    for n, t in zip(names, types):
        attr = ""
        if n.startswith("%target"):
            attr = f" {{coda_test.range = array<i64: -1, {N + 1}>}}"
        args.append(f"{n}: {t}{attr}")
    rtol, atol = tolerances(p)
    floors = ", ".join(f"{f:e} : f32" for f in atol_floors(p))
    L = [f"func.func @{name}({', '.join(args)})",
         f"    -> ({', '.join(result_types)}) attributes {{coda_test.rtol = {rtol:e} : f32, "
         f"coda_test.atol = {atol:e} : f32, coda_test.atol_scaled, "
         f"coda_test.atol_floor = [{floors}]}} {{"]
    L += ["  " + s for s in r.lines]
    L.append(f"  return {', '.join(results)} : {', '.join(result_types)}")
    L.append("}")
    return "\n".join(L)


def _emit_group_statistic(r, p, node, src):
    """The statistic of each group of `width` columns of each row of `src`,
    M x ceil(N / width): the row padded with the statistic's identity to
    whole groups, viewed as [M, groups, width] (as frontends write a 1 x 128
    quantization's amax or a per-head norm's sum of squares) and reduced
    over the last dimension."""
    M, N = p["M"], p["N"]
    w, kind = node["width"], node["kind"]
    groups = _ceil(N, w)
    identity = {"sum": "0.0", "max": "0xFF800000", "min": "0x7F800000",
                "argmax": "0xFF800000"}[kind]
    combine = {"sum": "arith.addf", "max": "arith.maximumf", "min": "arith.minimumf",
               "argmax": None}[kind]
    c = r.fresh()
    r.emit(f"{c} = arith.constant {identity} : f32")
    if groups * w != N:
        padded = r.fresh()
        pty = f"tensor<{M}x{groups * w}xf32>"
        r.emit(f"{padded} = tensor.pad {src} low[0, 0] high[0, {groups * w - N}] {{")
        r.emit("^bb0(%i: index, %j: index):")
        r.emit(f"  tensor.yield {c} : f32")
        r.emit(f"}} : {r.mn} to {pty}")
        src = padded
    else:
        pty = r.mn
    t3 = f"tensor<{M}x{groups}x{w}xf32>"
    view = r.fresh()
    r.emit(f"{view} = tensor.expand_shape {src} [[0], [1, 2]] output_shape [{M}, {groups}, {w}] : {pty} into {t3}")
    oty = f"tensor<{M}x{groups}xf32>"
    e, z, res = r.fresh(), r.fresh(), r.fresh()
    r.emit(f"{e} = tensor.empty() : {oty}")
    r.emit(f"{z} = linalg.fill ins({c} : f32) outs({e} : {oty}) -> {oty}")
    if kind == "argmax":
        return _emit_group_argmax(r, p, w, view, t3, z, oty)
    r.emit(f"{res} = linalg.reduce {{ {combine} }} ins({view} : {t3}) outs({z} : {oty}) dimensions = [2]")
    return res


def _emit_group_argmax(r, p, w, view, t3, init, oty):
    """The column of each group's first maximum, over 16, M x groups: the
    arg-max as torch-mlir lowers torch.max(x, dim) (the index within the
    group where a value exceeds the running maximum), then g * w added."""
    M, groups = p["M"], _ceil(p["N"], w)
    ity = f"tensor<{M}x{groups}xi64>"
    zero, ei, zi, res = r.fresh(), r.fresh(), r.fresh(), r.fresh()
    r.emit(f"{zero} = arith.constant 0 : i64")
    r.emit(f"{ei} = tensor.empty() : {ity}")
    r.emit(f"{zi} = linalg.fill ins({zero} : i64) outs({ei} : {ity}) -> {ity}")
    new, old, oldi, j, ji, m, gt, sel = (r.fresh() for _ in range(8))
    r.emit(f"{res}:2 = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, "
           f"affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], "
           f'iterator_types = ["parallel", "parallel", "reduction"]}} '
           f"ins({view} : {t3}) outs({init}, {zi} : {oty}, {ity}) {{")
    r.emit(f"^bb0({new}: f32, {old}: f32, {oldi}: i64):")
    r.emit(f"  {j} = linalg.index 2 : index")
    r.emit(f"  {ji} = arith.index_cast {j} : index to i64")
    r.emit(f"  {m} = arith.maximumf {new}, {old} : f32")
    r.emit(f"  {gt} = arith.cmpf ogt, {new}, {old} : f32")
    r.emit(f"  {sel} = arith.select {gt}, {ji}, {oldi} : i64")
    r.emit(f"  linalg.yield {m}, {sel} : f32, i64")
    r.emit(f"}} -> ({oty}, {ity})")

    def column(L, f, a):
        g, width, gw, gi, col, fl, k, out = (f() for _ in range(8))
        L += [f"{g} = linalg.index 1 : index",
              f"{width} = arith.constant {w} : index",
              f"{gw} = arith.muli {g}, {width} : index",
              f"{gi} = arith.index_cast {gw} : index to i64",
              f"{col} = arith.addi {a[0]}, {gi} : i64",
              f"{fl} = arith.sitofp {col} : i64 to f32",
              f"{k} = arith.constant 0.0625 : f32",
              f"{out} = arith.mulf {fl}, {k} : f32"]
        return out
    ident = "affine_map<(d0, d1) -> (d0, d1)>"
    return r.generic((M, groups), "f32", [(f"{res}#1", ident, ity)], column)


def _emit_partials(r, p, out, src):
    """Per-tile row (or column) reductions by padding to whole tiles,
    splitting the axis and reducing each tile."""
    M, N = p["M"], p["N"]
    t, red = out["tile"], out["reduction"]
    rows = out["kind"] == "row_reduce"
    length = N if rows else M
    blocks = _ceil(length, t)
    pad = blocks * t - length
    fill = "%zero" if red == "sum" else "%ninf"
    padded_shape = (M, blocks * t) if rows else (blocks * t, N)
    pty = f"tensor<{padded_shape[0]}x{padded_shape[1]}xf32>"
    mn = r.mn
    name = r.fresh()
    high = f"[0, {pad}]" if rows else f"[{pad}, 0]"
    r.emit(f"{name} = tensor.pad {src} low[0, 0] high{high} {{")
    r.emit("^bb0(%i: index, %j: index):")
    r.emit(f"  tensor.yield {fill} : f32")
    r.emit(f"}} : {mn} to {pty}")
    if rows:
        shape3 = (M, blocks, t)
        reassoc = "[[0], [1, 2]]"
        rdim = 2
        oshape = (M, blocks)
    else:
        shape3 = (blocks, t, N)
        reassoc = "[[0, 1], [2]]"
        rdim = 1
        oshape = (blocks, N)
    t3 = f"tensor<{shape3[0]}x{shape3[1]}x{shape3[2]}xf32>"
    oty = f"tensor<{oshape[0]}x{oshape[1]}xf32>"
    split = r.fresh()
    r.emit(f"{split} = tensor.expand_shape {name} {reassoc} output_shape [{', '.join(map(str, shape3))}] : {pty} into {t3}")

    def reduce(source, combine, init):
        e = r.fresh()
        r.emit(f"{e} = tensor.empty() : {oty}")
        z = r.fresh()
        r.emit(f"{z} = linalg.fill ins({init} : f32) outs({e} : {oty}) -> {oty}")
        res = r.fresh()
        r.emit(f"{res} = linalg.reduce {{ {combine} }} ins({source} : {t3}) outs({z} : {oty}) dimensions = [{rdim}]")
        return res
    if red == "sum":
        return reduce(split, "arith.addf", "%zero")
    if red == "max":
        return reduce(split, "arith.maximumf", "%ninf")
    # logsumexp: max + log(sum(exp(x - max))) per tile.
    mx = reduce(split, "arith.maximumf", "%ninf")
    d3 = "affine_map<(d0, d1, d2) -> (d0, d1, d2)>"
    dk = ("affine_map<(d0, d1, d2) -> (d0, d1)>" if rows else "affine_map<(d0, d1, d2) -> (d0, d2)>")
    e = r.fresh()
    r.emit(f"{e} = tensor.empty() : {t3}")
    ex = r.fresh()
    r.emit(f"{ex} = linalg.generic {{indexing_maps = [{d3}, {dk}, {d3}], iterator_types = [\"parallel\", \"parallel\", \"parallel\"]}}"
           f" ins({split}, {mx} : {t3}, {oty}) outs({e} : {t3}) {{")
    r.emit("^bb0(%v: f32, %m: f32, %o: f32):")
    r.emit("  %s = arith.subf %v, %m : f32")
    r.emit("  %x = math.exp %s : f32")
    r.emit("  linalg.yield %x : f32")
    r.emit(f"}} -> {t3}")
    sm = reduce(ex, "arith.addf", "%zero")
    d2 = "affine_map<(d0, d1) -> (d0, d1)>"
    e2 = r.fresh()
    r.emit(f"{e2} = tensor.empty() : {oty}")
    res = r.fresh()
    r.emit(f"{res} = linalg.generic {{indexing_maps = [{d2}, {d2}, {d2}], iterator_types = [\"parallel\", \"parallel\"]}}"
           f" ins({mx}, {sm} : {oty}, {oty}) outs({e2} : {oty}) {{")
    r.emit("^bb0(%m: f32, %s: f32, %o: f32):")
    r.emit("  %l = math.log %s : f32")
    r.emit("  %y = arith.addf %m, %l : f32")
    r.emit("  linalg.yield %y : f32")
    r.emit(f"}} -> {oty}")
    return res


def emit(p, suffix=""):
    return (f"// coda-fuzz program, seed {p['seed']}\n" + emit_fused(p, "fused" + suffix) + "\n\n"
            + emit_reference(p, "reference" + suffix) + "\n")


def tolerances(p):
    """(rtol, atol as a fraction of each output's largest magnitude) for
    comparing coda's results with the reference. In f32 they differ only by
    summation order in reductions; a value rounded to 16 bits (in a value or
    an output) may land one unit apart when the f32 value before it differs
    in its last bits, which later math carries along."""
    low = any(v["op"] == "round" for v in p["values"]) or any(
        o.get("dtype", "f32") != "f32" for o in p["outputs"])
    if low:
        return 1e-2, 1e-2
    return 1e-4, 1e-5


def atol_floors(p):
    """Per output, an absolute floor under the scaled atol: the rounding noise
    of the terms it is computed from, a few units in the last place of their
    bound times their count. An output whose terms cancel (a partial sum of
    x and -x, added in another order by the reference) is far smaller than
    that noise, so a fraction of its own magnitude cannot bound the error."""
    low = tolerances(p)[0] > 1e-4
    unit = 2.0 ** -9 if low else 2.0 ** -24
    bounds = p["bounds"]
    floors = []
    for out in p["outputs"]:
        kind = out["kind"]
        if kind == "interleave":
            bound, terms = max(bounds[out["even"]], bounds[out["odd"]]), 1
        elif kind == "pair_contract":
            bound, terms = out.get("bound", max(bounds)), 2
        else:
            bound, terms = bounds[out["value"]], 1
        if kind in ("row_reduce", "col_reduce"):
            length = p["N"] if kind == "row_reduce" else p["M"]
            terms = min(out["tile"], length)
            if out["reduction"] == "logsumexp":
                bound, terms = bound + math.log(terms), 1
            elif out["reduction"] == "max":
                terms = 1
        floors.append(4 * unit * bound * terms)
    return floors


def clone(p):
    return copy.deepcopy(p)
