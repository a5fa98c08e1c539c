"""A small Llama (random init) trained on synthetic data with PyTorch eager,
with coda's ops swapped in (coda_torch.llama.apply), with torch.compile, and
with both (coda_compile: torch.compile fuses what is around coda's opaque
ops), and with only coda's MLP, Q/K/V + RoPE and LM head ops (coda_ops,
coda_ops_compile: the norms, residual adds and o_proj stay torch's), and
with the MLPs' GEMMs in FP8 (coda_fp8, coda_fp8_compile:
coda_torch.llama.apply(model, fp8=True)):
the same initial weights and batches for each, losses per step, median step
time and peak memory, in one process. AdamW is fused, as Hugging Face's
Trainer builds it (--optimizer foreach: PyTorch's default); the host runs
ahead of the GPU and reads the losses at the end, as Trainer does between
logging steps (--sync-steps: each step waits for the one before); --freeze
trains only some of the parameters. Every
mode's attention is SDPA with is_causal (causal_attention; --attention hf:
Hugging Face's mask building, which torch.compile's trace materializes).

  python3 benchmarks/train_llama.py --kernels build/torch-kernels --out X.json
  NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node 2 benchmarks/train_llama.py ...

Under torchrun the model is wrapped in DistributedDataParallel, or with
--fsdp sharded with FSDP2 (`fully_shard` on each decoder layer, then on the
root; torchrun with one process runs FSDP2 on one GPU), and each rank takes
its share of every global batch, so the losses (averaged over ranks) are
those of one GPU on the whole batch, up to bf16 rounding.

  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      torchrun --nproc_per_node 2 benchmarks/train_llama.py --fsdp ...

The data is learnable: each sequence counts modulo the vocabulary with its own
random start and stride, so the loss falls once the model picks the rule up.
"""

import argparse
import datetime
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import coda_torch  # noqa: E402
from timing import EnergyMeter  # noqa: E402


# The attention as Hugging Face's SDPA with is_causal and no mask: see
# causal_attention.
CAUSAL_SDPA = "sdpa_causal"


def causal_attention(config):
    """Runs `config`'s attention as SDPA with is_causal, no mask built. The
    batches here have neither padding nor packed sequences, so the causal
    mask is the whole mask: Hugging Face's eager forward finds that out (on
    the host) and passes no mask, but under torch.compile it cannot look and
    materializes the mask, with which cuDNN's attention is about 3x slower
    (forward + backward, 4 x 2048 tokens: 6.6 ms against 2.2 in a 4-layer
    step), so a comparison would measure that instead of the layers."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(CAUSAL_SDPA, sdpa_attention_forward)
    AttentionMaskInterface.register(CAUSAL_SDPA, lambda **kwargs: None)
    config._attn_implementation = CAUSAL_SDPA


def batches(steps, batch, seq, vocab):
    gen = torch.Generator(device="cuda").manual_seed(1234)
    positions = torch.arange(seq, device="cuda")
    for _ in range(steps):
        start = torch.randint(0, vocab, (batch, 1), device="cuda", generator=gen)
        stride = torch.randint(1, 64, (batch, 1), device="cuda", generator=gen)
        yield (start + stride * positions) % vocab


# Steps before the timed ones (warm-up, compilation).
WARMUP = 5


def train(mode, args, config, rank, world):
    torch.manual_seed(0)
    model = getattr(transformers, f"{args.family}ForCausalLM")(config)
    model = model.cuda().to(torch.bfloat16)
    if mode.startswith("coda_fp8"):
        # The MLPs in FP8 (swiglu_mlp_fp8), the layers torch's around them.
        coda_torch.llama.apply(model, fp8=True)
    elif mode.startswith("coda"):
        # coda_ops*: only the MLP, Q/K/V + RoPE and LM head ops, the norms,
        # residuals and o_proj torch's (llama.apply(layer=False)).
        coda_torch.llama.apply(model, layer=not mode.startswith("coda_ops"),
                               save_logits=not args.recompute_logits)
    # Frozen parameters (--freeze): no gradient, no optimizer state.
    for name, p in model.named_parameters():
        if any(part in name for part in args.freeze):
            p.requires_grad_(False)
    step_fn = model
    if args.fsdp:
        # After coda's patch: its fused parameters (qkv, gate_up) are sharded
        # with the rest and gathered before each layer's forward.
        from torch.distributed.fsdp import fully_shard
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    elif world > 1:
        step_fn = model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[torch.cuda.current_device()])
    if mode.endswith("compile"):
        # coda's ops stay opaque; torch.compile fuses what is around them.
        step_fn = torch.compile(model)
    # AdamW as Hugging Face's Trainer builds it on PyTorch >= 2.8 (its
    # default `adamw_torch_fused`: one kernel over all parameters), or
    # PyTorch's default multi-tensor (foreach) implementation.
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0,
                            fused=args.optimizer == "fused",
                            foreach=args.optimizer == "foreach")
    torch.cuda.reset_peak_memory_stats()
    losses, marks = [], []
    share = args.batch // world
    meter, joules = EnergyMeter(), None
    for step, ids in enumerate(batches(args.steps, args.batch, args.seq, config.vocab_size)):
        ids = ids[rank * share:(rank + 1) * share]
        if step == WARMUP and meter.available:
            # The energy counter is read on the host: the timed steps start
            # on an idle GPU and end with the synchronization below.
            torch.cuda.synchronize()
            joules = meter.read()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = step_fn(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        end.record()
        loss = loss.detach()
        if world > 1:
            loss = loss.clone()
            dist.all_reduce(loss)
            loss /= world
        losses.append(loss)
        marks.append((start, end))
        if args.sync_steps:
            end.synchronize()
    torch.cuda.synchronize()
    if joules is not None:
        joules = meter.read() - joules
    # Synchronized: each step from its start to its end, the host starting
    # it on an idle GPU. Free-running: the host runs ahead and only reads the
    # losses at the end (as Trainer does between logging steps), so a step
    # is the time between two steps' starts on the GPU.
    if args.sync_steps:
        times = [start.elapsed_time(end) for start, end in marks[WARMUP:]]
    else:
        times = [a[0].elapsed_time(b[0]) for a, b in zip(marks[WARMUP:], marks[WARMUP + 1:])]
    # Energy and mean power over the timed steps (first start to last end).
    energy = {}
    if joules is not None:
        seconds = marks[WARMUP][0].elapsed_time(marks[-1][1]) / 1000
        energy = {"energy_per_step_j": joules / len(marks[WARMUP:]),
                  "mean_power_w": joules / seconds, "power_limit_w": meter.limit_w}
    return {"losses": [loss.item() for loss in losses], "step_ms": statistics.median(times),
            "steps_ms": times, **energy,
            "peak_memory_gb": torch.cuda.max_memory_allocated() / 2 ** 30}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--mlp", type=int, default=2816)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=0,
                        help="key/value heads (grouped-query attention); 0: as many as --heads")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--modes", nargs="+",
                        choices=["torch_eager", "coda", "torch_compile", "coda_compile",
                                 "coda_ops", "coda_ops_compile", "coda_fp8",
                                 "coda_fp8_compile"],
                        default=["torch_eager", "coda", "torch_compile", "coda_compile"])
    parser.add_argument("--family", default="Llama", choices=coda_torch.llama.FAMILIES,
                        help="the model family (Qwen2: biases on Q/K/V)")
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--recompute-logits", action="store_true",
                        help="coda's LM head recomputes its logits in the backward "
                        "(llama.apply(save_logits=False)) instead of keeping them")
    parser.add_argument("--optimizer", choices=["fused", "foreach"], default="fused",
                        help="AdamW's implementation: fused (Hugging Face Trainer's default "
                        "on PyTorch >= 2.8) or foreach (PyTorch's default)")
    parser.add_argument("--attention", choices=["causal", "hf"], default="causal",
                        help="causal: every mode's attention SDPA with is_causal "
                        "(causal_attention); hf: Hugging Face's mask building, which "
                        "under torch.compile materializes the causal mask")
    parser.add_argument("--sync-steps", action="store_true",
                        help="wait for each step before starting the next and time it "
                        "alone (default: the host runs ahead, losses read at the end)")
    parser.add_argument("--freeze", nargs="+", default=[], metavar="PART",
                        help="freeze every parameter whose name contains one of these "
                        "(e.g. lm_head self_attn; after coda's patch: qkv, gate_up)")
    parser.add_argument("--fsdp", action="store_true",
                        help="shard with FSDP2 (under torchrun, one or more processes)")
    parser.add_argument("--dependent-launch", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="launch coda's kernels with programmatic stream serialization "
                        "(coda_torch.set_dependent_launch; on by default)")
    args = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if args.fsdp and "LOCAL_RANK" not in os.environ:
        raise SystemExit("--fsdp runs under torchrun (--nproc_per_node 1 for one GPU)")
    if world > 1 or args.fsdp:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
        if args.batch % world:
            raise SystemExit(f"--batch {args.batch} must divide among {world} GPUs")
    torch.backends.cuda.matmul.allow_tf32 = False
    coda_torch.load(args.kernels)
    coda_torch.set_dependent_launch(args.dependent_launch)
    # No KV cache: training reads none, and building one concatenates each
    # layer's keys and values every step.
    config = getattr(transformers, f"{args.family}Config")(
                         vocab_size=args.vocab, hidden_size=args.hidden,
                         intermediate_size=args.mlp, num_hidden_layers=args.layers,
                         num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads or args.heads,
                         max_position_embeddings=args.seq, use_cache=False)
    if args.attention == "causal":
        causal_attention(config)
    runs = {}
    for mode in args.modes:
        runs[mode] = train(mode, args, config, rank, world)
        r = runs[mode]
        if rank:
            continue
        energy = (f", {r['energy_per_step_j']:.2f} J a step at {r['mean_power_w']:.0f} W"
                  if "energy_per_step_j" in r else "")
        print(f"{mode}: loss {r['losses'][0]:.3f} -> {r['losses'][-1]:.3f}, "
              f"step {r['step_ms']:.2f} ms, peak {r['peak_memory_gb']:.2f} GB{energy}", flush=True)
    if rank:
        dist.destroy_process_group()
        return
    base = runs.get("torch_eager")
    if base:
        for mode, r in runs.items():
            if mode == "torch_eager":
                continue
            diff = [abs(a - b) for a, b in zip(r["losses"], base["losses"])]
            r["max_abs_loss_diff_vs_eager"] = max(diff)
            r["final_rel_loss_diff_vs_eager"] = diff[-1] / base["losses"][-1]
            print(f"{mode} vs eager: max |loss diff| {max(diff):.4f}, final relative "
                  f"{r['final_rel_loss_diff_vs_eager']:.4f}", flush=True)
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "gpus": world,
                   "parallel": "fsdp2" if args.fsdp else ("ddp" if world > 1 else "none"),
                   "date": datetime.date.today().isoformat(),
                   "commit": args.commit, "torch": torch.__version__, "config": vars(args),
                   "runs": runs}, f, indent=1)
    if world > 1 or args.fsdp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
