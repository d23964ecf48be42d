"""Interleaved A/B of two checkouts on the engine benchmarks' measured regions (issue 12: "≥ 0.9× old").

* ``flex`` / ``clockwork`` (overload) and ``flex-served`` / ``clockwork-served``
  (served-dominated) — ``benchmarks/engine_speed.py``'s two regimes and timed
  region (``engine_speed.one``: 13 models, 12 workers — ``flex@400-served``: 400
  in Herd groups of 12 —; 2× the max-batch capacity, or issue 18's shared
  workload at 1.2× the batch-1 capacity; ``simulate()`` + summary on the fast
  path, its JIT cache load timed apart; one core),
  ``--requests`` requests; the trace comes from *this* script's
  ``engine_speed.make_trace`` for both checkouts, so both serve the same one;
* ``flex-ref`` / ``clockwork-ref`` — the same overload regime on the reference engine (``--ref-requests``);
* ``symphony`` / ``nexus`` (and ``-served``, ``-ref``) — the same regions for the whole-trace kernels (one group);
* ``ppipe-engine`` / ``ppipe-direct`` — ``benchmarks/ppipe_dataplane_speed.py``'s
  workload (G1 on HC1-L, PPipe MILP plan, Poisson at load 1.0 for
  ``--seconds``, seed 0), stages as engine events / recorded at dispatch; one
  untimed warm-up run, then the timed run. The plan is solved once (here)
  and shared, so both checkouts serve the same plan.

Each measurement is a fresh subprocess with ``PYTHONPATH`` set to the
checkout's parent (a folder whose ``shepherd`` entry is the checkout); rounds
alternate which checkout goes first. Prints the median and the minimum CPU
time per checkout (the minimum: the least disturbed run, the better estimate
on a machine shared with other work) and the ratios old/new (> 1: new is
faster). Not a test.

The ``-served`` kinds need an old checkout whose engine accepts the trace (any);
``make_trace`` with a capacity basis is this checkout's.

Usage: python benchmarks/ab_speed.py OLD_PARENT NEW_PARENT [--rounds 5] [--requests 1000000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r'''
import json, pickle, sys, time
kind, root, data = sys.argv[1], sys.argv[2], sys.argv[3]
policy, _, workers = kind.split("-")[0].partition("@")
if policy in ("flex", "clockwork", "symphony", "nexus"):  # engine_speed's timed region: the JIT cache load timed apart, one core
    sys.path.insert(0, sys.argv[4])
    from engine_speed import one
    r = one(policy, int(workers or 12), int(data), "served" if kind.endswith("-served") else "overload", 250.0,
            0, 12, {"path": "reference" if kind.endswith("-ref") else "fast"})
    print(json.dumps({"n": r["requests"], "wall": r["wall_s"], "cpu": r["cpu_s"]}))
    sys.exit(0)
else:
    import polars as pl
    from shepherd.experiments.ppipe import common as cm
    plan = pickle.load(open(data + "/plan.pkl", "rb"))
    trace = pl.read_parquet(data + "/trace.parquet")
    profs = cm.profiles()
    mode = kind.split("-")[1]
    try:  # the seam (issue 12): one simulate() for every policy
        from shepherd.core.engine import EngineConfig, simulate
        eng = EngineConfig(reserved="record" if mode == "direct" else "events")
        run = lambda: simulate(trace, profs, "ppipe", plan=plan, engine=eng)
    except ImportError:  # before it: the side entrance
        from shepherd.core.pipelines.runtime import simulate_plan
        run = lambda: simulate_plan(plan, profs, trace, "ppipe", config={"execute": mode})
    run()
    n = trace.height
    t, c = time.perf_counter(), time.process_time()
    run()
print(json.dumps({"n": n, "wall": time.perf_counter() - t, "cpu": time.process_time() - c}))
'''


def measure(parent: str, kind: str, data: str) -> dict:
    root = str(Path(parent, "shepherd").resolve())
    env = dict(os.environ, PYTHONPATH=parent, POLARS_MAX_THREADS="1")
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run([sys.executable, "-c", CHILD, kind, root, data, here], env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--ref-requests", type=int, default=100_000, help="requests of the -ref kinds")
    ap.add_argument("--kinds", default="flex,flex-served,ppipe-engine,ppipe-direct",
                    help="flex, clockwork (overload), flex-served, clockwork-served, flex@400 (Herd groups of 12), "
                         "flex-ref, clockwork-ref (the reference engine, --ref-requests), ppipe-engine, ppipe-direct")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    tmp = tempfile.mkdtemp(prefix="ab-speed-")
    if any(k.startswith("ppipe") for k in kinds):
        from shepherd.core.pipelines.cluster import make_cluster
        from shepherd.experiments.ppipe import common as cm

        plan = cm.plan("ppipe", make_cluster("HC1-L"), cm.groups()[0], "poisson")
        cm.make_trace(plan.rates(1.0), plan.slo_us, args.seconds, 0, "poisson").write_parquet(f"{tmp}/trace.parquet")
        with open(f"{tmp}/plan.pkl", "wb") as f:
            pickle.dump(plan, f)
    res: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for kind in kinds:
            order = [("old", args.old), ("new", args.new)]
            for side, parent in (order if r % 2 == 0 else order[::-1]):
                data = tmp if kind.startswith("ppipe") else str(args.ref_requests if kind.endswith("-ref")
                                                                else args.requests)
                res.setdefault((kind, side), []).append(measure(parent, kind, data))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    print(f"{'benchmark':14} {'side':4} {'requests':>9} {'wall s (med)':>12} {'CPU s (med)':>11} {'CPU s (min)':>11} "
          f"{'req/CPU-s (min)':>15} {'req/CPU-s (med)':>15} {'req/wall-s (med)':>16}")
    for kind in kinds:
        med, low = {}, {}
        for side in ("old", "new"):
            runs = res[(kind, side)]
            wall = statistics.median(x["wall"] for x in runs)
            med[side] = statistics.median(x["cpu"] for x in runs)
            low[side] = min(x["cpu"] for x in runs)
            print(f"{kind:14} {side:4} {runs[0]['n']:9d} {wall:12.3f} {med[side]:11.3f} {low[side]:11.3f} "
                  f"{runs[0]['n'] / low[side]:15,.0f} {runs[0]['n'] / med[side]:15,.0f} {runs[0]['n'] / wall:16,.0f}")
        print(f"{kind:14} new speed / old: CPU median {med['old'] / med['new']:.3f}×, CPU min {low['old'] / low['new']:.3f}×")


if __name__ == "__main__":
    main()
