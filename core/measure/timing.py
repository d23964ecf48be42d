"""Timing loops of ``profile --measure``: warm-up, repeats, median and spread.

CPU: a forward pass under ``torch.inference_mode`` with
``torch.set_num_threads(threads)``, timed with wall clock
(``time.perf_counter``) — or, with one thread, the thread's CPU time
(``time.thread_time``: on a shared machine other processes do not inflate
it; recorded as ``clock`` in the provenance). CUDA:
``torch.cuda.Event`` pairs, synchronised after each repeat. Each latency is
the median of ``repeats`` runs after ``warmup`` runs; the spread is the
interquartile range. Per-layer: the input of layer i is layer i−1's output
(computed once), and each layer is timed alone on it.
"""

from __future__ import annotations

import platform
import time

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.core.measure import need_torch
from shepherd.core.measure import zoo


def _timer(torch, device: str):
    if device == "cuda":
        def run(fn):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            return a.elapsed_time(b)
        return run

    clock = cpu_clock(torch)

    def run(fn):
        t = clock()
        fn()
        return (clock() - t) * 1000.0
    return run


def cpu_clock(torch):
    """One torch thread: the calling thread's CPU time (ops run in it), which other processes on a shared
    machine do not inflate; several threads: wall clock."""
    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


def _stats(run, fn, warmup: int, repeats: int) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    xs = np.array([run(fn) for _ in range(repeats)])
    q1, med, q3 = np.percentile(xs, [25, 50, 75])
    return float(med), float(q3 - q1)


def setup(device: str, threads: int | None):
    torch = need_torch()
    if device not in ("cpu", "cuda"):
        raise UserError(f"--device must be cpu or cuda, got '{device}'")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: PyTorch sees no CUDA GPU on this machine (use --device cpu)")
    if threads is not None:
        if threads < 1:
            raise UserError(f"--threads must be ≥ 1, got {threads}")
        torch.set_num_threads(threads)
    return torch


def hardware_label(torch, device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(0)
    return f"cpu-{torch.get_num_threads()}t"


def environment(torch, device: str) -> dict:
    """Device, threads and library versions for the artifact's provenance."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    env = {"device": device, "cpu": cpu, "threads": torch.get_num_threads(), "torch": torch.__version__,
           "numpy": np.__version__, "python": platform.python_version(),
           "clock": "cuda-events" if device == "cuda" else cpu_clock(torch).__name__}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def measure_model(name: str, batches: list[int], device: str, per_layer: bool, warmup: int = 2,
                  repeats: int = 5) -> pl.DataFrame:
    """Whole-model rows (model, hardware, batch, latency_ms, spread_ms) or per-layer rows (kind layer_profiles)."""
    torch = need_torch()
    model, shape = zoo.build(name)
    model = model.to(device)
    label = name.rsplit(":", 1)[-1] if ":" in name else name
    hw = hardware_label(torch, device)
    run = _timer(torch, device)
    rows = []
    with torch.inference_mode():
        for b in batches:
            x = torch.randn((b, *shape), device=device)
            if not per_layer:
                med, iqr = _stats(run, lambda: model(x), warmup, repeats)
                rows.append((label, hw, b, med, iqr))
                continue
            for i, (lname, layer) in enumerate(zoo.layers(model)):
                med, iqr = _stats(run, lambda: layer(x), warmup, repeats)
                rows.append((label, hw, i, f"{label}.{lname}", b, med, iqr))
                x = layer(x)
    if per_layer:
        return pl.DataFrame(rows, schema={"model": pl.String, "hardware": pl.String, "layer": pl.Int32,
                                          "name": pl.String, "batch": pl.Int32, "latency_ms": pl.Float64,
                                          "spread_ms": pl.Float64}, orient="row")
    return pl.DataFrame(rows, schema={"model": pl.String, "hardware": pl.String, "batch": pl.Int32,
                                      "latency_ms": pl.Float64, "spread_ms": pl.Float64}, orient="row")
