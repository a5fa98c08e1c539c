"""The GPU time of one training step of the 4-layer, hidden-2048 Llama of
benchmarks/train_llama.py, kernel by kernel (torch.profiler over three
steps after eight), for each mode named (coda, coda_compile, torch,
torch_compile), the same time by the PyTorch operator (with its input
shapes) that launched each kernel, and the time the GPU waits between
kernels, by the operator that launched the kernel after each wait:

  PYTHONPATH=<runtime> python3 benchmarks/profile_train_step.py <torch kernels> OUT.json coda torch_compile

(--layers, --hidden, --mlp, --heads, --kv-heads: another model, as
train_llama.py takes them, e.g. 2 layers x hidden 4096, 32 heads, 8 K/V heads;
--optimizer: AdamW fused, as train_llama.py's default, or foreach;
--attention: SDPA with is_causal, as train_llama.py's default, or hf.)
"""
import argparse, sys, os, json, torch
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch
from transformers import LlamaConfig, LlamaForCausalLM
from host_gaps import kernel_gaps, trace_events
from train_llama import causal_attention
parser = argparse.ArgumentParser()
parser.add_argument("kernels")
parser.add_argument("out")
parser.add_argument("modes", nargs="+")
parser.add_argument("--layers", type=int, default=4)
parser.add_argument("--hidden", type=int, default=2048)
parser.add_argument("--mlp", type=int, default=5632)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--kv-heads", type=int, default=0, help="0: as many as --heads")
parser.add_argument("--attention", choices=["causal", "hf"], default="causal",
                    help="as train_llama.py takes it")
parser.add_argument("--optimizer", choices=["fused", "foreach"], default="fused",
                    help="AdamW's implementation, as train_llama.py takes it")
args = parser.parse_args()
coda_torch.load(args.kernels)
cfg = LlamaConfig(vocab_size=32768, hidden_size=args.hidden, intermediate_size=args.mlp,
                  num_hidden_layers=args.layers, num_attention_heads=args.heads,
                  num_key_value_heads=args.kv_heads or args.heads, max_position_embeddings=2048,
                  use_cache=False)
if args.attention == "causal":
    causal_attention(cfg)


def idle_gaps(prof, steps=3):
    """Per step: the time the GPU runs no kernel between two kernels,
    grouped by the operator that launched the kernel after the gap (from
    the trace's external ids)."""
    trace = trace_events(prof)
    launcher = {e["args"]["External id"]: e["name"] for e in trace
                if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    gaps = {}
    for start, end, after in kernel_gaps(trace):
        name = launcher.get(after.get("args", {}).get("External id"), after["name"])
        total, count = gaps.get(name, (0.0, 0))
        gaps[name] = (total + (end - start) / 1000 / steps, count + 1)
    return sorted(((ms, n // steps, name) for name, (ms, n) in gaps.items()), reverse=True)


# Kernel name patterns of each class; the first that matches names the class.
CLASSES = [("GEMMs", ("nvjet", "gemm", "cutlass", "xmma")),
           ("attention", ("flash", "fmha", "sdpa", "attention", "cudnn")),
           ("optimizer", ("adam", "multi_tensor")),
           ("embedding", ("embedding", "indexselect", "radixsort", "segment", "grad_weight",
                          "index_select", "sum_and_scatter", "gather"))]


def is_annotation(name):
    """A range the profiler reports beside the kernels it spans (a compiled
    graph's call, the optimizer's step), not a kernel of its own."""
    return name.startswith("## ") or name.startswith("Optimizer.")


def kernel_class(name):
    low = name.lower()
    for cls, patterns in CLASSES:
        if any(p in low for p in patterns):
            return cls
    return "rest"


def by_class(rows):
    """{class: ms per step} of profile rows (ms per step, count, kernel)."""
    totals = {cls: 0.0 for cls, _ in CLASSES + [("rest", ())]}
    for ms, _, name in rows:
        totals[kernel_class(name)] += ms
    return totals


out = {}
for mode in args.modes:
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).cuda().to(torch.bfloat16)
    if mode.startswith("coda"):
        coda_torch.llama.apply(model)
    fn = torch.compile(model) if mode.endswith("compile") else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=args.optimizer == "fused",
                            foreach=args.optimizer == "foreach")
    ids = torch.randint(0, 32768, (4, 2048), device="cuda")
    def step():
        loss = fn(input_ids=ids, labels=ids).loss
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    for _ in range(8): step()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True) as p:
        for _ in range(3): step()
        torch.cuda.synchronize()
    kernels = [e for e in p.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    rows = sorted(((e.device_time_total / 3 / 1000, e.count // 3, e.key) for e in kernels
                   if e.device_time_total > 0 and not is_annotation(e.key)), reverse=True)
    # Each kernel's time counts as its launching operator's self device time.
    ops = sorted(((e.self_device_time_total / 3 / 1000, e.count // 3, e.key, str(e.input_shapes))
                  for e in p.key_averages(group_by_input_shape=True)
                  if e.device_type == torch.autograd.DeviceType.CPU and e.self_device_time_total > 0),
                 reverse=True)
    total = sum(r[0] for r in rows)
    print(f"== {mode}: kernels {total:.2f} ms per step")
    for ms, n, k in rows[:28]:
        print(f"  {ms:7.3f} ms  x{n:3d}  {kernel_class(k):9}  {k[:100]}")
    print(f"== {mode}: by operator")
    for ms, n, k, shapes in ops[:40]:
        print(f"  {ms:7.3f} ms  x{n:3d}  {k[:40]}  {shapes[:120]}")
    classes = by_class(rows)
    ceiling = total / (total - classes["rest"])
    print(f"== {mode}: by class " + ", ".join(f"{c} {ms:.2f} ms" for c, ms in classes.items())
          + f"; the step without the rest: {ceiling:.3f}x faster")
    for ms, n, k in [r for r in rows if kernel_class(r[2]) == "rest"][:8]:
        print(f"  rest: {ms:7.3f} ms  x{n:3d}  {k[:100]}")
    waits = idle_gaps(p)
    print(f"== {mode}: the GPU waits {sum(w[0] for w in waits):.2f} ms per step; before kernels of")
    for ms, n, k in waits[:15]:
        print(f"  {ms:7.3f} ms  x{n:4d}  {k[:100]}")
    out[mode] = {"total_ms": total, "classes": classes, "ceiling": ceiling, "rows": rows[:60],
                 "ops": ops[:80], "waits": waits[:40]}
    del model, opt, fn
    torch.cuda.empty_cache()
json.dump(out, open(args.out, "w"), indent=1)
