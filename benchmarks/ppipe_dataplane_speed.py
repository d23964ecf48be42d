"""PPipe data-plane simulation speed: simulated requests per wall-clock second on one core.

Plans G1 (the paper's group) on HC1-L (100 GPUs) with the PPipe MILP, draws
a Poisson trace at load factor 1.0 (the plan's throughput) for ``--seconds``
simulated seconds, and runs the reservation-based data plane (Appendix A.3)
on the reference engine twice: with every stage executed as an engine batch
("engine", the reference fidelity: each stage booked at dispatch with
``act.book_path``, its completion an event at its reserved end:
``EngineConfig(reserved="events")``) and with stages recorded at dispatch
("direct", identical outcomes: ``EngineConfig(reserved="record")`` on the Python engine) and, as ``fast``, the
compiled fast path of that fidelity (``core/engine/fast/ppipe.py``, identical outcomes: the default of a
``reserved="record"`` run; its JIT compile is done by the warm-up). Prints requests, wall time, requests per
wall-clock second, probe() calls per dispatched batch (paper: 3.58) and SLO
attainment; the target is ≥ 100,000 req/s (the authors' Java simulator does
about 30,000 on this machine, per the issue). After one untimed warm-up run, each mode runs ``--repeats``
times (interleaved) and the median wall time is reported, with the spread,
and the median CPU time of the process (``time.process_time``: what the run
costs its core, less sensitive than wall time to other work on the machine).
A mode suffixed ``:scan`` (e.g. ``--modes engine,engine:scan``) runs probe()
without its per-pool index (``EngineConfig(pool_index=False)``: every vGPU of a pool tried in
pool order) — identical outcomes; it shows what the index saves (it is not
the code before the index, which inlined the scan). Not a test: never fails
on timing.

Two regimes (``--loads``, issue 18's rule for every speed benchmark): load factor 1.0, the plan's throughput
(served-dominated: the acceptance figure, ≥ 300 k req/s for the fast path) and 2.0 (overload: Algorithm 1
drops what cannot meet its deadline, cheaper per request). Each line also gives the fraction served by the
deadline, the fraction **shed without a decision** (frontend admission control: PPipe has none, so 0 unless
that changes) and the fraction dropped in all.

Usage: python benchmarks/ppipe_dataplane_speed.py [--cluster HC1-L] [--seconds 30] [--group 0] [--repeats 5]
       [--modes engine,direct,fast] [--loads 1.0,2.0]
"""

from __future__ import annotations

import argparse
import statistics
import time

from shepherd.core.engine import EngineConfig, simulate
from shepherd.core.pipelines.cluster import make_cluster
from shepherd.experiments.ppipe import common as c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", default="HC1-L")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--group", type=int, default=0)
    parser.add_argument("--loads", default="1.0,2.0",
                        help="load factors (× the plan's throughput), comma-separated: 1.0 served, 2.0 overload")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--modes", default="engine,direct,fast")
    args = parser.parse_args()
    group = c.groups()[args.group]
    plan = c.plan("ppipe", make_cluster(args.cluster), group, "poisson")
    vgpus = sum(s.vgpus for p in plan.pipelines for s in p.stages)
    print(f"plan: {len(plan.pipelines)} pooled pipelines, {vgpus} vGPUs on {plan.cluster.gpus} GPUs, "
          f"capacity {plan.normalized_xput:.0f} req/s, batch sizes {sorted({p.batch for p in plan.pipelines})}")
    for load in (float(x) for x in args.loads.split(",")):
        regime(plan, load, args.seconds, args.repeats, args.modes.split(","))
    print("targets: >= 100,000 req/s on one core for the Python engine, >= 300,000 for the fast path at load 1.0 "
          "(issue 18: 10x the authors' Java simulator's loop, ~30,000)")


def regime(plan, load: float, seconds: float, repeats: int, modes: list[str]) -> None:
    """Every mode on one trace at ``load``, interleaved ``repeats`` times after an untimed warm-up."""
    from shepherd.core.engine.outcomes import DROPPED, SERVED

    trace = c.make_trace(plan.rates(load), plan.slo_us, seconds, 0, "poisson")
    walls: dict[str, list[float]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    last: dict[str, tuple] = {}
    simulate(trace, c.profiles(), "ppipe", plan=plan)  # warm-up (imports, caches): not timed
    if "fast" in modes:  # the fast path's JIT (or its on-disk cache) too
        simulate(trace.head(100), c.profiles(), "ppipe", plan=plan, engine=EngineConfig(reserved="record"))
    for _ in range(max(repeats, 1)):
        for mode in modes:  # interleaved, so background load hits both modes alike
            t0, c0 = time.perf_counter(), time.process_time()
            execute, _, variant = mode.partition(":")
            engine = EngineConfig(reserved="events" if execute == "engine" else "record", pool_index=variant != "scan",
                                  path="fast" if execute == "fast" else "reference")
            res = simulate(trace, c.profiles(), "ppipe", plan=plan, engine=engine)
            stats = res.extra["policy_stats"]
            walls[mode].append(time.perf_counter() - t0)
            cpus[mode].append(time.process_time() - c0)
            last[mode] = (res, stats)
    print(f"load factor {load:g}: {trace.height:,d} requests, {seconds:g} s simulated")
    for mode in modes:
        res, stats = last[mode]
        wall = statistics.median(walls[mode])
        out = res.recorder.r_outcome
        served, dropped, shed = float((out == SERVED).mean()), float((out == DROPPED).mean()), res.shed / trace.height
        per = stats["probes"] / max(stats["dispatched"], 1)
        spread = f"{trace.height / max(walls[mode]):,.0f}–{trace.height / min(walls[mode]):,.0f}"
        cpu = statistics.median(cpus[mode])
        print(f"  {mode:12} {wall:6.3f} s wall (median of {len(walls[mode])}) = {trace.height / wall:9,.0f} req/s "
              f"[range {spread}]; CPU {cpu:6.3f} s = {trace.height / cpu:9,.0f} req/s; {per:.2f} probes/batch; "
              f"served {served:.4f}, shed {shed:.4f}, dropped {dropped:.4f}")


if __name__ == "__main__":
    main()
