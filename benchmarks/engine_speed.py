"""Engine speed benchmark (issue 3): simulated requests per wall-clock second and peak memory.

Workload: the first 13 rows of Shepherd Table 4 (all CV models: ResNet18/34/50/
101/152, ResNeSt50/101/200/269, DenseNet121/161/169/201), one Poisson stream
per model with equal rates, SLO 250 ms (Shepherd §7 default), aggregate rate
= ``--overload`` × capacity, where capacity = W / mean_m(ℓ_m(128)/128) — what
W workers serve at the maximum batch. Each configuration runs in a fresh
subprocess (so peak RSS is its own) on one core; the figure is simulated
requests / wall-clock seconds of ``simulate()`` + the summary (trace generation
excluded; polars limited to one thread),
median over ``--repeats``. Summary-only recording (``--record summary``).
Flex runs in Herd-like serving groups of ``--flex-group-size`` workers (default
12, Shepherd §7; each group its own 13 streams); Clockwork and Nexus in one
group (a centralised scheduler; per-stream provisioning).

Usage: python benchmarks/engine_speed.py [--requests 10000000] [--repeats 5]
       [--policies flex,clockwork,nexus] [--workers 12,1,400]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

MODELS = ["ResNet18", "ResNet34", "ResNet50", "ResNet101", "ResNet152", "ResNeSt50", "ResNeSt101",
          "ResNeSt200", "ResNeSt269", "DenseNet121", "DenseNet161", "DenseNet169", "DenseNet201"]


def make_trace(n: int, workers: int, overload: float, slo_ms: float, seed: int, group_size: int = 0):
    """Poisson trace; with ``group_size`` the workers form Herd-like groups of that size and
    every group gets its own 13 streams (one per model), loaded in proportion to its workers."""
    import numpy as np
    import polars as pl

    from shepherd.core.profiles import load_builtin

    prof = load_builtin("shepherd-v100")
    raw = prof.filter(pl.col("batch") == 128).filter(pl.col("model").is_in(MODELS))
    per_req_ms = float((raw["latency_ms"] / 128).mean())
    rate_per_s = overload * workers / (per_req_ms / 1000.0)
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1e6 / rate_per_s, n)).astype(np.int64)
    groups = [list(range(workers))]
    if group_size and workers > group_size:
        groups = [g.tolist() for g in np.array_split(np.arange(workers), -(-workers // group_size))]
    weights = np.repeat([len(g) for g in groups], len(MODELS)).astype(np.float64)
    stream = rng.choice(len(weights), n, p=weights / weights.sum()).astype(np.int32)
    slo = int(slo_ms * 1000)
    names = pl.Series("model", MODELS, dtype=pl.String)
    frame = pl.DataFrame({"arrival_us": arrival, "stream": stream, "model": names.gather(stream % len(MODELS)),
                          "slo_us": np.full(n, slo, np.int64), "deadline_us": arrival + slo})
    plan = None
    if len(groups) > 1:
        rows = [(gi, "worker", str(w), "V100") for gi, g in enumerate(groups) for w in g]
        rows += [(s // len(MODELS), "stream", str(s), None) for s in range(len(weights))]
        plan = pl.DataFrame(rows, schema={"group": pl.Int32, "role": pl.String, "name": pl.String,
                                          "hardware": pl.String}, orient="row")
    return frame, prof, rate_per_s, plan


def one(policy: str, workers: int, n: int, overload: float, slo_ms: float, seed: int, group_size: int) -> dict:
    from shepherd.core.engine import simulate

    frame, prof, rate, plan = make_trace(n, workers, overload, slo_ms, seed, group_size if policy == "flex" else 0)
    t0 = time.perf_counter()
    if plan is not None:
        res = simulate(frame, prof, policy, plan=plan, seed=seed)
    else:
        res = simulate(frame, prof, policy, gpus=workers, seed=seed)
    summary = res.summary_frame()
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"policy": policy, "workers": workers, "groups": 1 if plan is None else int(plan["group"].n_unique()),
            "requests": n, "rate_rps": rate, "wall_s": wall,
            "req_per_s": n / wall, "peak_mb": peak_mb,
            "slo_attainment": float(summary["slo_attainment"][0]),
            "mean_batch": summary["mean_batch"][0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--policies", default="flex,clockwork,nexus")
    ap.add_argument("--workers", default="12,1,400")
    ap.add_argument("--overload", type=float, default=2.0)
    ap.add_argument("--slo-ms", type=float, default=250.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flex-group-size", type=int, default=12,
                    help="Flex runs in Herd-like groups of this many workers (Shepherd §7: 12); 0 = one group")
    ap.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single:
        print(json.dumps(one(args.policies, int(args.workers), args.requests, args.overload, args.slo_ms, args.seed,
                             args.flex_group_size)))
        return
    print(f"{'policy':10} {'workers':>7} {'groups':>6} {'requests':>11} {'req/s (median)':>15} {'runs':>30} {'peak MB':>8} "
          f"{'SLO att.':>8} {'batch':>6}")
    for workers in [int(w) for w in args.workers.split(",")]:
        for policy in args.policies.split(","):
            runs = []
            for r in range(args.repeats):
                cmd = [sys.executable, __file__, "--single", "--policies", policy, "--workers", str(workers),
                       "--requests", str(args.requests), "--overload", str(args.overload),
                       "--slo-ms", str(args.slo_ms), "--seed", str(args.seed),
                       "--flex-group-size", str(args.flex_group_size)]
                out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, POLARS_MAX_THREADS="1"))
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    raise SystemExit(out.returncode)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            med = statistics.median(x["req_per_s"] for x in runs)
            each = ",".join(f"{x['req_per_s'] / 1000:.0f}k" for x in runs)
            print(f"{policy:10} {workers:7d} {runs[0]['groups']:6d} {args.requests:11,d} {med:15,.0f} {each:>30} "
                  f"{max(x['peak_mb'] for x in runs):8.0f} {runs[0]['slo_attainment']:8.3f} "
                  f"{runs[0]['mean_batch'] or 0:6.1f}", flush=True)


if __name__ == "__main__":
    main()
