"""Host time of coda_torch's ops against PyTorch's: Q/K/V + RoPE forward +
backward at T tokens, hidden H (N = 1.5 H), called back to back without
synchronizing; host = time until the last call returns, wall = until the
GPU has finished. Where host >= wall, the GPU waits for the host.

  PYTHONPATH=<runtime>:python:benchmarks python3 benchmarks/launch_cost.py DIR [--tokens T] [--hidden H]

DIR: a scripts/build-torch-kernels output.
"""

import argparse
import time

import torch

import coda_runtime
import coda_torch


def per_call(fn, n):
    """Host and wall microseconds per call of fn over n back-to-back calls."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return 1e6 * (t1 - t0) / n, 1e6 * (t2 - t0) / n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kernels")
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    coda_torch.load(args.kernels)
    t, h = args.tokens, args.hidden
    n, rotated = 3 * h // 2, 5 * h // 4
    x = torch.randn(t, h, device="cuda").bfloat16().requires_grad_()
    w = (torch.randn(n, h, device="cuda") / h ** 0.5).bfloat16().requires_grad_()
    cos, sin = (torch.randn(t, 128, device="cuda").bfloat16() for _ in range(2))
    dy = torch.randn(t, n, device="cuda").bfloat16()
    module = coda_runtime.Module(args.kernels + "/linear_qkv_rope")
    (forward,) = module.kernels_of("linear_qkv_rope")
    y = torch.empty(t, n, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.current_stream().cuda_stream
    launch_args = [x.detach(), w.detach(), cos, sin, rotated // 128, y]

    # The same launch with the lhs at an address no earlier call used (row
    # offsets into one buffer), as a training step's fresh activations are.
    pool = torch.randn(t + args.calls + 1, h, device="cuda").bfloat16()
    fresh = iter(range(10 ** 9))

    def fresh_launch():
        i = next(fresh) % (args.calls + 1)
        module.launch_kernel(forward, [pool[i:i + t]] + launch_args[1:], stream)

    def coda_step():
        x.grad = w.grad = None
        coda_torch.linear_qkv_rope(x, w, cos, sin, rotated).backward(dy)

    def torch_step():
        x.grad = w.grad = None
        (x @ w.T).backward(dy)

    for name, fn in [("runtime launch_kernel (forward kernel)",
                      lambda: module.launch_kernel(forward, launch_args, stream)),
                     ("runtime launch_kernel, lhs at a new address", fresh_launch),
                     ("coda_torch.linear_qkv_rope forward + backward", coda_step),
                     ("torch x @ w.T forward + backward (no RoPE)", torch_step)]:
        host, wall = per_call(fn, args.calls)
        print(f"{name}: host {host:.1f} us/call, wall {wall:.1f} us/call", flush=True)


if __name__ == "__main__":
    main()
