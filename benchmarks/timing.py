"""CUDA-event timing shared by the benchmarks: medians after warm-up, with
L2 flushed before every repetition; and steady-state timing (steady_ms),
back to back at the power limit, with the energy and SM clock NVML reports."""

import json
import statistics
import threading
import time

import torch

_flush = None

# A lead for queued_ms longer than the host takes to launch a decoder
# layer's forward + backward (about 4 ms at 16384 tokens).
QUEUE_LEAD_MS = 15.0


def median_ms(fn, reps=20, warmup=3):
    """The median GPU ms of `fn` over `reps` calls, L2 flushed before each."""
    return statistics.median(_rounds({"fn": fn}, reps, warmup)[0]["fn"])


def _rounds(fns, reps, warmup, lead_ms=0.0):
    """Times every function of `fns` (name -> callable) in rounds: each
    round runs each function once (L2 flushed before each, then queued
    behind a sleep of lead_ms on the GPU if given), in an order that
    rotates from round to round. Returns name -> list of per-round GPU ms
    and name -> list of per-round host ms (the call's own)."""
    global _flush
    if _flush is None:
        _flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    cycles = 0
    if lead_ms:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        torch.cuda._sleep(1 << 20)
        end.record()
        end.synchronize()
        cycles = int((1 << 20) * lead_ms / begin.elapsed_time(end))
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    torch.cuda.synchronize()
    gpu, host = {name: [] for name in names}, {name: [] for name in names}
    for r in range(reps):
        for i in range(len(names)):
            name = names[(i + r) % len(names)]
            _flush.zero_()
            if cycles:
                torch.cuda._sleep(cycles)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            start = time.perf_counter()
            fns[name]()
            host[name].append((time.perf_counter() - start) * 1000)
            end.record()
            end.synchronize()
            gpu[name].append(begin.elapsed_time(end))
    return gpu, host


def interleaved_ms(fns, reps=20, warmup=3):
    """Times every function of `fns` (name -> callable) in rounds: each
    round runs each function once (L2 flushed before each), in an order that
    rotates from round to round, so that clock and thermal drift reach all of
    them alike. Returns name -> list of per-round milliseconds."""
    return _rounds(fns, reps, warmup)[0]


def queued_ms(fns, reps=30, lead_ms=0.5):
    """interleaved_ms's rounds (L2 flushed before each call, the order
    rotating), each call queued behind a sleep of lead_ms on the GPU, so
    that the host has launched it whole before its first kernel starts (as
    in a training step, whose host runs ahead; lead_ms must exceed the
    host's time per call, which is returned to check): name -> (median GPU
    ms, median host ms per call)."""
    gpu, host = _rounds(fns, reps, 1, lead_ms)
    return {name: (statistics.median(gpu[name]), statistics.median(host[name]))
            for name in fns}


def median_ratio(base, times):
    """Median over rounds of base[r] / times[r] (the speedup of `times` over
    `base` measured in the same rounds)."""
    return statistics.median(b / t for b, t in zip(base, times))


def against(times, ours):
    """From interleaved_ms's times: `ours`'s median ms, and every other
    candidate's median ms and median ratio to it (median_ratio)."""
    others = {name: t for name, t in times.items() if name != ours}
    return (statistics.median(times[ours]),
            {name: statistics.median(t) for name, t in others.items()},
            {name: median_ratio(t, times[ours]) for name, t in others.items()})


def write_ratio_results(path, commit, rows):
    """Writes `rows` (each with a "ratios" dict: baseline -> ratio) and the
    geometric mean of each ratio over them to `path` as JSON, with the
    device, commit and torch version; returns the geometric means. Called
    after every shape, so that a cut-off run keeps what it measured."""
    geomean = {name: statistics.geometric_mean([r["ratios"][name] for r in rows])
               for name in rows[0]["ratios"]}
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "commit": commit,
                   "torch": torch.__version__, "results": rows, "geomean": geomean},
                  f, indent=1)
    return geomean


class EnergyMeter:
    """The current GPU's energy counter and SM clock through NVML, where
    pynvml is installed (`available` False otherwise). `read()`: joules
    since the driver loaded. `sample_clock()` samples the SM clock (MHz) on
    a thread every `period` seconds until `stop_clock()`, which returns the
    samples' mean. At the power limit a kernel's time is its energy over
    the limit: joules per call say what the clock alone does not."""

    def __init__(self):
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            # By UUID: NVML numbers every GPU of the machine, CUDA only the
            # visible ones (CUDA_VISIBLE_DEVICES).
            uuid = torch.cuda.get_device_properties(torch.cuda.current_device()).uuid
            self._handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
            self.limit_w = pynvml.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1000
            self.available = True
        except Exception:  # no pynvml, or a GPU without NVML's counters
            self.available, self.limit_w = False, None
        self._thread = None

    def read(self):
        return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000

    def sample_clock(self, period=0.02):
        self._samples, self._stop = [], threading.Event()

        def run():
            while not self._stop.wait(period):
                self._samples.append(self._nvml.nvmlDeviceGetClockInfo(
                    self._handle, self._nvml.NVML_CLOCK_SM))
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop_clock(self):
        self._stop.set()
        self._thread.join()
        return statistics.mean(self._samples) if self._samples else None


def steady_text(result):
    """One line of steady_ms's `result`: per function its passes' GPU ms per
    call, and with NVML the energy per call, mean power and SM clock."""
    def one(p):
        if p["j"] is None:
            return f"{p['ms']:.3f} ms"
        return f"{p['ms']:.3f} ms {p['j'] * 1000:.1f} mJ {p['w']:.0f} W {p['mhz']:.0f} MHz"
    return "; ".join(f"{name} " + ", ".join(one(p) for p in passes)
                     for name, passes in result.items())


def steady_ms(fns, seconds=2.0, passes=2, warmup=3):
    """Each function of `fns` (name -> callable) called back to back, with
    no flush or synchronization between calls, for about `seconds`, in
    turn, `passes` times: the regime of a training step, whose kernels run
    one after another at the GPU's power limit (the interleaved rounds
    above idle between calls and run cooler). Returns name -> list (one
    per pass) of {"ms": GPU ms per call, "j": joules per call, "w": mean
    power, "mhz": mean SM clock}; "j", "w" and "mhz" are None without
    NVML."""
    meter = EnergyMeter()
    out = {name: [] for name in fns}
    calls = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        calls[name] = max(3, int(seconds / max(time.perf_counter() - start, 1e-4)))
    for _ in range(passes):
        for name, fn in fns.items():
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            if meter.available:
                joules = meter.read()
                meter.sample_clock()
            begin.record()
            for _ in range(calls[name]):
                fn()
            end.record()
            end.synchronize()
            ms = begin.elapsed_time(end)
            row = {"ms": ms / calls[name], "j": None, "w": None, "mhz": None}
            if meter.available:
                joules = meter.read() - joules
                row.update(j=joules / calls[name], w=joules / (ms / 1000),
                           mhz=meter.stop_clock())
            out[name].append(row)
    return out
