"""Host time per forward + backward call of each of coda_torch's ops: at
256 tokens the kernels finish before the host issues the next call, so the
wall time of 100 calls, synchronized once, is the host's. Five sets each,
with a PyTorch linear layer for comparison:

  PYTHONPATH=<runtime>:python python3 benchmarks/op_host_cost.py <torch kernels> OUT.json
"""
import json, sys, time
import torch
import coda_torch
print("coda_torch from", coda_torch.__file__)
coda_torch.load(sys.argv[1])
T, H, F, V = 256, 1024, 2816, 32768
dev = "cuda"
x = torch.randn(T, H, device=dev).bfloat16().requires_grad_()
w2 = (torch.randn(2 * F, H, device=dev) / H ** 0.5).bfloat16().requires_grad_()
wd = (torch.randn(H, F, device=dev) / F ** 0.5).bfloat16().requires_grad_()
wq = (torch.randn(3 * H, H, device=dev) / H ** 0.5).bfloat16().requires_grad_()
wv = (torch.randn(V, H, device=dev) / H ** 0.5).bfloat16().requires_grad_()
r = torch.randn(T, H, device=dev).bfloat16().requires_grad_()
cos, sin = (torch.randn(T, 128, device=dev).bfloat16() for _ in range(2))
t = torch.randint(0, V, (T,), device=dev)
cases = {
    "linear_swiglu": lambda: coda_torch.linear_swiglu(x, w2).sum().backward(),
    "swiglu_mlp": lambda: coda_torch.swiglu_mlp(x, w2, wd).sum().backward(),
    "linear_qkv_rope": lambda: coda_torch.linear_qkv_rope(x, wq, cos, sin, 2 * H).sum().backward(),
    "linear_cross_entropy": lambda: coda_torch.linear_cross_entropy(x, wv, t).sum().backward(),
    "linear_residual_norm": lambda: sum(v.float().sum() for v in coda_torch.linear_residual_norm(x, wd[:, :H].contiguous().detach().requires_grad_(), r)).backward(),
    "torch_linear_ref": lambda: (x @ w2.t()).sum().backward(),
}
res = {}
for name, fn in cases.items():
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    best = []
    for rep in range(5):
        t0 = time.perf_counter()
        for _ in range(100):
            fn()
        torch.cuda.synchronize()
        best.append((time.perf_counter() - t0) * 1e4)
    res[name] = sorted(best)
    print(f"{name}: {min(best):.1f} us / call (fwd+bwd, median {sorted(best)[2]:.1f})", flush=True)
json.dump(res, open(sys.argv[2], "w"), indent=1)
