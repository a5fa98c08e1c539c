"""The first pass of linear_norm_qkv_rope's backward, from the attention's
three gradients: concatenated (torch.cat) then the adjoint over the stacked
gradient, against the adjoint run once per segment on each gradient where
it lies (split=, ops._norm_rope_backward_parts); alone and as the whole
backward (adjoint, dX GEMM with rs's partials, weight gradient with
gamma's), both ways' gradients checked bitwise equal first. 8192 tokens
(train_llama.py's 4 x 2048), hidden 2048 (16 + 16 + 16 heads of 128) and
4096 (32 + 8 + 8); bf16, L2 flushed, interleaved rounds. The GPU times
are the kernels' own: each timed call waits behind a 0.5 ms sleep kernel,
so that its launches are all queued before the first starts (as in a
training step, whose host runs ahead); the host's time per call is given
beside them.

  PYTHONPATH=<runtime>:python python3 benchmarks/qkv_segments.py <torch kernels>
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import coda_torch  # noqa: E402
from coda_torch import ops  # noqa: E402
from timing import queued_ms  # noqa: E402


TOKENS = 8192


def main():
    coda_torch.load(sys.argv[1])
    module, (adjoint,) = ops._kernels("linear_norm_qkv_rope", "linear_norm_qkv_rope_backward",
                                      "adjoint:gemm0")
    for hidden, sizes in [(2048, [2048, 2048, 2048]), (4096, [4096, 1024, 1024])]:
        n, rotated = sum(sizes), sizes[0] + sizes[1]
        x = torch.randn(TOKENS, hidden, device="cuda").bfloat16()
        w = (torch.randn(n, hidden, device="cuda") / hidden ** 0.5).bfloat16()
        rs = torch.rand(TOKENS, device="cuda") + 0.5
        gamma = (1 + 0.5 * torch.randn(hidden, device="cuda")).bfloat16()
        angles = torch.rand(TOKENS, 64, device="cuda") * 6.28
        cos, sin = (torch.cat([f(angles)] * 2, 1).bfloat16() for f in (torch.cos, torch.sin))
        folded = w * gamma
        grads = [torch.randn(TOKENS, s, device="cuda").bfloat16() for s in sizes]
        stacked = torch.cat(grads, 1)
        dacc = x.new_empty(TOKENS, n)
        tail = (x, rs, w, gamma, cos, sin, folded, rotated, False, True, True)

        def whole():
            ops._launch(module, adjoint, x, folded, rs, cos, sin, rotated // 128, stacked, dacc)

        def segments():
            start = 0
            for columns, grad in zip(sizes, grads):
                ops._launch(module, adjoint, x, folded[start:start + columns], rs, cos, sin,
                            max(0, min(rotated - start, columns)) // 128, grad,
                            dacc[:, start:start + columns])
                start += columns

        concatenated = ops._norm_rope_backward_parts([(n, torch.cat(grads, 1))], *tail)
        split = ops._norm_rope_backward_parts(list(zip(sizes, grads)), *tail)
        assert all(torch.equal(a, b) for a, b in zip(concatenated, split))
        times = queued_ms({
            "cat": lambda: torch.cat(grads, 1), "adjoint": whole,
            "cat + adjoint": lambda: (torch.cat(grads, 1), whole()), "segments": segments,
            "backward, concatenated": lambda: ops._norm_rope_backward_parts(
                [(n, torch.cat(grads, 1))], *tail),
            "backward, segments": lambda: ops._norm_rope_backward_parts(
                list(zip(sizes, grads)), *tail)})
        print(f"hidden {hidden}, Q/K/V {sizes}: "
              + ", ".join(f"{name} {ms:.4f} ms (host {host:.3f})"
                          for name, (ms, host) in times.items()), flush=True)


if __name__ == "__main__":
    main()
