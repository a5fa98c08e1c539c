"""A decoder layer's forward + backward with coda's kernels launched with
programmatic stream serialization (coda_torch.set_dependent_launch) and
without, in the same rounds: backward.py's layer, first and inside a model,
16384 tokens, each step queued behind a sleep (timing.queued_ms: the
host ahead, as in training), two sets of rounds.

  PYTHONPATH=<runtime>:python python3 benchmarks/dependent_launch.py <torch kernels> [HIDDEN...]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import coda_torch  # noqa: E402
from backward import SEQ, SIZES, TOKENS, decoder_layers, inside_a_model, layer_step  # noqa: E402
from timing import QUEUE_LEAD_MS, queued_ms  # noqa: E402


def main():
    coda_torch.load(sys.argv[1])
    for hidden in [int(h) for h in sys.argv[2:]] or [2048]:
        _, coda, _, tables = decoder_layers(hidden, SIZES[hidden])
        xb = torch.randn(TOKENS // SEQ, SEQ, hidden, device="cuda").bfloat16().requires_grad_()
        dyb = torch.randn_like(xb)
        xi = inside_a_model(xb)

        def step(dependent, x):
            layer = layer_step(coda, x, dyb, tables)

            def run():
                coda_torch.set_dependent_launch(dependent)
                layer()
            return run
        steps = {"on": step(True, xb), "off": step(False, xb),
                 "inner on": step(True, xi), "inner off": step(False, xi)}
        for rounds in range(2):
            t = queued_ms(steps, reps=30, lead_ms=QUEUE_LEAD_MS)
            print(f"hidden {hidden} rounds {rounds}: " + ", ".join(
                f"{name} {ms:.3f} ms" for name, (ms, _) in t.items())
                + f"; off / on {t['off'][0] / t['on'][0]:.4f}, inside a model "
                f"{t['inner off'][0] / t['inner on'][0]:.4f}", flush=True)
        coda_torch.set_dependent_launch(True)
        del coda
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
