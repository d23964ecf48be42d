"""Does this machine's speed hold still long enough to validate on? (issue 40)

``shepherd reproduce validate`` predicts a live run from a calibration taken minutes before it. That can only
work if the machine runs the *same* batch at the same speed over a cell's length: near and above capacity one
percent of batch time is worth 0.9–2.5 attainment points (the sensitivity column of the validation REPORT), so
the ±5-point goal needs the speed to hold within about 2–5 % over a 30 s cell.

This benchmark measures exactly that, with nothing of the simulator involved: one process pinned to one core
with one PyTorch thread (the live worker's set-up, :mod:`shepherd.core.engine.live.worker`) runs the same
batch (``--model`` at ``--batch``) back to back for ``--seconds``, and reports

* the median batch time per ``--window`` seconds and the spread of those medians (max ÷ min, and the
  coefficient of variation across windows): the speed's drift at the scale of seconds;
* the worker's CPU time ÷ wall time: 1.00 means the process was never descheduled, so a slower window is the
  core itself running slower (shared caches, memory bandwidth, frequency on the host), not waiting in this guest;
* the hypervisor's steal time over the run and how busy the *other* cores were (``/proc/stat``, where the
  kernel reports it): work there shares this core's caches and memory bandwidth;
* the same windows for an in-cache reference (``--reference``: a 256 × 256 matrix product into a preallocated
  output, no allocation), which separates "everything is slower" from "memory-bound work is slower".

The verdict line says whether the window medians' spread is within the budget (``--budget``, default 5 %).
Nothing else should run during it (the machine is measured, not the toolkit). Not a test: timings.

Usage: python benchmarks/machine_speed.py [--model ResNet18@64] [--batch 8] [--seconds 60] [--window 2]
       [--core N] [--budget 0.05] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def cpu_jiffies() -> dict[str, list[int]] | None:
    """The ``cpu*`` lines of /proc/stat (user nice system idle iowait irq softirq steal …), or None."""
    try:
        with open("/proc/stat") as f:
            return {p[0]: [int(v) for v in p[1:]] for p in (line.split() for line in f) if p[0].startswith("cpu")}
    except OSError:
        return None


def busy_and_steal(before: dict | None, after: dict | None, core: int, seconds: float) -> dict:
    """Over a run: hypervisor steal (s, all cores) and the busy share of every core but ``core`` (other work on
    the machine shares its caches and memory bandwidth even when it never takes this core)."""
    if before is None or after is None:
        return {"steal_s": None, "other_cores_busy": None}
    hz = os.sysconf("SC_CLK_TCK")
    delta = {k: [a - b for a, b in zip(after[k], before[k])] for k in after if k in before}
    total = delta["cpu"]
    others = {}
    for name, d in delta.items():
        if name != "cpu" and name != f"cpu{core}":
            idle = d[3] + (d[4] if len(d) > 4 else 0)
            others[name] = round(max(0.0, 1.0 - idle / (hz * seconds)), 3)
    return {"steal_s": total[7] / hz if len(total) > 7 else None, "other_cores_busy": others}


def timed_batches(model: str, batch: int, seconds: float) -> np.ndarray:
    """Rows (start ns, wall ns, CPU ns) of ``model`` at ``batch`` run back to back for ``seconds``."""
    import torch

    from shepherd.core.measure import zoo

    torch.set_num_threads(1)
    net, shape = zoo.build(model)
    x = torch.randn((batch, *shape))
    rows = []
    with torch.inference_mode():
        for _ in range(5):  # first calls allocate and pick kernels
            net(x)
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            start, cpu = time.monotonic_ns(), time.thread_time_ns()
            net(x)
            rows.append((start, time.monotonic_ns() - start, time.thread_time_ns() - cpu))
    return np.array(rows, np.int64)


def timed_reference(seconds: float) -> np.ndarray:
    """Rows (start ns, wall ns, CPU ns) of twenty in-cache 256 × 256 products into a preallocated output."""
    a = np.random.default_rng(0).random((256, 256))
    out = np.empty_like(a)
    rows = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        start, cpu = time.monotonic_ns(), time.thread_time_ns()
        for _ in range(20):
            np.dot(a, a, out=out)
        rows.append((start, time.monotonic_ns() - start, time.thread_time_ns() - cpu))
    return np.array(rows, np.int64)


def windows(rows: np.ndarray, window_s: float) -> dict:
    """Per-window medians of wall time (ms) and their spread; whole-run CPU ÷ wall."""
    which = ((rows[:, 0] - rows[0, 0]) // int(window_s * 1e9)).astype(int)
    full = range(int(which.max()))  # the last window is partial: left out
    medians = np.array([np.median(rows[which == w, 1]) for w in full]) / 1e6
    within_cv = np.array([rows[which == w, 1].std() / rows[which == w, 1].mean() for w in full])
    return {"window_medians_ms": np.round(medians, 3).tolist(),
            "spread_max_over_min": float(medians.max() / medians.min()),
            "cv_across_windows": float(medians.std() / medians.mean()),
            "cv_within_window_median": float(np.median(within_cv)),
            "cpu_over_wall": float(rows[:, 2].sum() / rows[:, 1].sum()),
            "batches": int(len(rows))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="ResNet18@64")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--core", type=int, default=None, help="core to pin to (default: the last one allowed)")
    ap.add_argument("--budget", type=float, default=0.05, help="largest acceptable max÷min − 1 of window medians")
    ap.add_argument("--reference", action="store_true", help="also time the in-cache reference for --seconds")
    ap.add_argument("--json", default=None, help="write the result here too")
    args = ap.parse_args()
    core = args.core if args.core is not None else sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {core})
    load_before = os.getloadavg()
    stat0, t0 = cpu_jiffies(), time.monotonic()
    model = windows(timed_batches(args.model, args.batch, args.seconds), args.window)
    stat1, t1 = cpu_jiffies(), time.monotonic()
    result = {"model": args.model, "batch": args.batch, "seconds": args.seconds, "window_s": args.window,
              "core": core, "load_before": load_before, "load_after": os.getloadavg(), "model_windows": model,
              **busy_and_steal(stat0, stat1, core, t1 - t0), "run_s": t1 - t0}
    if args.reference:
        result["reference_windows"] = windows(timed_reference(args.seconds), args.window)
    print(f"{args.model} batch {args.batch}, core {core}, {args.seconds:g} s, load {load_before[0]:.2f}")
    print(f"  window medians (ms, {args.window:g} s): {model['window_medians_ms']}")
    print(f"  spread max/min {model['spread_max_over_min']:.3f}, CV across windows {model['cv_across_windows']:.3f},"
          f" within a window {model['cv_within_window_median']:.3f}; CPU/wall {model['cpu_over_wall']:.3f};"
          f" steal {result['steal_s']} s; other cores busy {result['other_cores_busy']}")
    if args.reference:
        ref = result["reference_windows"]
        print(f"  in-cache reference: spread {ref['spread_max_over_min']:.3f}, CV {ref['cv_across_windows']:.3f}")
    held = model["spread_max_over_min"] - 1 <= args.budget
    print(f"verdict: the speed {'holds' if held else 'does NOT hold'} within {args.budget:.0%} "
          f"(max/min − 1 = {model['spread_max_over_min'] - 1:.1%})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
