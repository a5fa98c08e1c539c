"""Recomputes examples/mlp-epilogues.mlir unfused, in plain Python, and checks
the printed output of its run against it. Reads the run's output on stdin."""

import math
import re
import sys


def wave(rows, cols, seed):
    return [[math.sin(0.37 * i + 0.11 * j + seed) for j in range(cols)]
            for i in range(rows)]


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b)))
             for j in range(len(b[0]))] for i in range(len(a))]


x, wgu, wd = wave(4, 8, 0.0), wave(8, 12, 1.0), wave(6, 8, 2.0)
r = [0.5] * 4
# Unfused order: normalize, then the gate and up projections separately.
xn = [[r[i] * v for v in row] for i, row in enumerate(x)]
wg = [[row[2 * j] for j in range(6)] for row in wgu]
wu = [[row[2 * j + 1] for j in range(6)] for row in wgu]
g, u = matmul(xn, wg), matmul(xn, wu)
silu = lambda v: v / (1.0 + math.exp(-v))
h = [[silu(g[i][j]) * u[i][j] for j in range(6)] for i in range(4)]
out = [[d + res for d, res in zip(row, xrow)] for row, xrow in zip(matmul(h, wd), x)]
r_next = [1.0 / math.sqrt(sum(v * v for v in row) / 8 + 1e-5) for row in out]

printed = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", sys.stdin.read().split("data =", 1)[1])]
expected = [v for row in out for v in row] + r_next
if len(printed) != len(expected):
    sys.exit(f"FAIL: printed {len(printed)} values, expected {len(expected)}")
worst = max(abs(p - e) / max(1.0, abs(e)) for p, e in zip(printed, expected))
print(f"example matches the unfused computation: {len(expected)} values, worst error {worst:.2e}")
sys.exit(0 if worst < 1e-4 else 1)
