"""HERD planning latency at Shepherd Table 5's sizes (200k…1M streams, 200…1000 models/workers, Ḡ = 12).

Prints, per size: aggregation time (streams → model-streams), solver time, status, gap,
objective (min burst tolerance), groups, and the paper's solver time. Not a test: it never fails
on timing.

Instance (documented): stream rates log-normal (σ = 1), streams assigned to models round-robin
(Shepherd §7), model α/β cycled from Table 4, one SLO of 250 ms, model memory uniform
100–1000 MB on 16 GB GPUs with 4 GB reserved; the total load is scaled so the average demand
fills 70 % of the cluster.

Usage: python benchmarks/plan_speed.py [--sizes 200000,400000] [--solver highs] [--gap 0.01] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.herd import HerdConfig, solve_herd, verify
from shepherd.solvers.instances import TABLE5, table5_instance

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s[0]) for s in TABLE5),
                        help="comma-separated stream counts from Table 5")
    parser.add_argument("--solver", default="highs")
    parser.add_argument("--gap", type=float, default=0.01)
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    wanted = {int(s) for s in args.sizes.split(",") if s.strip()}
    rows = [r for r in TABLE5 if r[0] in wanted]
    if not rows:
        raise SystemExit(f"--sizes must name Table 5 stream counts: {[r[0] for r in TABLE5]}")
    solver = SolverConfig(args.solver, args.time_limit, args.gap)
    print(f"{'streams':>9} {'models':>6} {'workers':>7} {'agg s':>6} {'solve s':>8} {'paper s':>7} "
          f"{'status':>9} {'gap %':>7} {'min bt':>7} {'groups':>6} {'valid':>5}")
    for streams, models, workers, paper in rows:
        rng = np.random.default_rng(args.seed)
        inst, agg_s = table5_instance(streams, models, workers, rng)
        cfg = HerdConfig(gpus=workers, group_limit=12)
        start = time.perf_counter()
        plan = solve_herd(inst, cfg, solver)
        wall = time.perf_counter() - start
        gap = plan.result.gap
        ok = not verify(inst, cfg, plan.groups)
        print(f"{streams:>9,} {models:>6} {workers:>7} {agg_s:>6.2f} {wall:>8.2f} {paper:>7.2f} "
              f"{plan.result.status:>9} {100 * gap if gap is not None else float('nan'):>7.3f} "
              f"{plan.objective:>7.3f} {len(plan.groups):>6} {str(ok):>5}", flush=True)


if __name__ == "__main__":
    main()
