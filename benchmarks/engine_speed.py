"""Engine speed benchmark (issues 3, 18): simulated requests per CPU-second and per wall second, two regimes.

Workload: the first 13 rows of Shepherd Table 4 (all CV models: ResNet18/34/50/
101/152, ResNeSt50/101/200/269, DenseNet121/161/169/201), one Poisson stream
per model with equal rates, SLO 250 ms (Shepherd §7 default). The aggregate
rate is a multiple of a capacity:

* ``max`` basis — W / mean_m(ℓ_m(128)/128), what W workers serve at the
  maximum batch;
* ``b1`` basis — W / mean_m(ℓ_m(1)), what they serve one request at a time.

Two regimes, each a named case (``--cases``):

* ``served`` (the issue-18 shared workload): 12 GPUs, Poisson at **1.2× the
  batch-1 capacity** (well below the max-batch capacity), 1 M requests —
  most requests are actually served (≥ 90 % expected; the run prints it), so
  the rate measures the decision path;
* ``overload``: 2× the max-batch capacity (the old default of this script),
  where much of the traffic is shed cheaply by admission control — it
  flatters the engine, and the column ``shed`` says by how much.

Per run the script prints simulated requests per **CPU-second**
(``time.process_time`` of ``simulate()`` + the summary: the figure to quote on a
shared machine; a fast path's JIT compile or cache load is timed apart, column ``JIT s``) and per wall second, the fraction served by the deadline, the
fraction **shed without a decision** (dropped by frontend admission control,
:mod:`shepherd.core.engine.admission`: never reached the policy) and the
fraction dropped in all. Each run is a fresh subprocess (so peak RSS is its
own; polars on one thread, the process pinned to one core where the OS
allows), trace generation excluded; figures are medians over ``--repeats``.

**A/B in one run**: ``--variants`` names engine configurations
(``name:key=value+key=value``, keys of :class:`~shepherd.core.engine.EngineConfig`);
every repeat runs each variant in turn, alternating the order, so a shared
machine's load hits all of them alike; the last lines give each variant's
median CPU rate relative to the first.

Flex runs in Herd-like serving groups of ``--flex-group-size`` workers (default
12, Shepherd §7; each group its own 13 streams); Clockwork, Nexus (its default
configuration: Shepherd §7's 60 s epochs, its own overhead model) and Symphony
(``symphony``, ``symphony-wc``: its default configuration, Symphony §4.3) in one
group (a centralised scheduler; per-stream provisioning).

**Peak memory** (``--memory N``): the served case's trace of N requests written as an artifact, then
``shepherd simulate --record summary`` on it in a fresh process per variant; prints that process's peak
RSS (the whole CLI: reading the trace, the run, the summary).

Usage: python benchmarks/engine_speed.py [--cases served,overload] [--requests N] [--repeats 5]
       [--policies flex,clockwork,symphony,nexus] [--workers 12] [--variants ref:,apart:groups=apart]
       e.g. compiled vs reference: --cases served --policies clockwork --variants reference:path=reference,fast:path=fast
       python benchmarks/engine_speed.py --memory 10000000 --policies flex,clockwork --variants fast:path=fast
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

#: named cases: (load multiple, capacity basis, default requests, regime)
CASES = {
    "served": (1.2, "b1", 1_000_000, "served-dominated (issue 18's shared workload: 1.2× batch-1 capacity)"),
    "overload": (2.0, "max", 1_000_000, "overload (2× max-batch capacity)"),
}


def make_trace(n: int, workers: int, overload: float, slo_ms: float, seed: int, group_size: int = 0,
               basis: str = "max"):
    """Poisson trace at ``overload`` × the ``basis`` capacity (module docstring); with ``group_size``
    the workers form Herd-like groups of that size and every group gets its own 13 streams (one per
    model), loaded in proportion to its workers."""
    import numpy as np
    import polars as pl

    from shepherd.core.profiles import load_builtin

    prof = load_builtin("shepherd-v100")
    batch = 128 if basis == "max" else 1
    raw = prof.filter(pl.col("batch") == batch).filter(pl.col("model").is_in(MODELS))
    per_req_ms = float((raw["latency_ms"] / batch).mean())
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


def parse_variant(text: str) -> tuple[str, dict]:
    """``name:key=value+key=value`` → (name, EngineConfig fields)."""
    name, _, rest = text.partition(":")
    fields: dict = {}
    for pair in filter(None, rest.split("+")):
        key, _, raw = pair.partition("=")
        fields[key] = int(raw) if raw.lstrip("-").isdigit() else raw
    return name, fields


def one(policy: str, workers: int, n: int, case: str, slo_ms: float, seed: int, group_size: int,
        engine: dict) -> dict:
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        pass
    from shepherd.core.engine import EngineConfig, simulate
    from shepherd.core.engine.outcomes import DROPPED, SERVED

    load, basis, _, _ = CASES[case]
    frame, prof, rate, plan = make_trace(n, workers, load, slo_ms, seed, group_size if policy == "flex" else 0,
                                         basis)
    eng = EngineConfig(**engine)
    compile_s = 0.0
    where = {"plan": plan} if plan is not None else {"gpus": workers}
    if eng.path == "fast":
        # JIT compile (or load from the on-disk cache), timed apart on a tiny run of the same shape: with the
        # plan, so a grouped run's own kernels (group split, clock replay, gather) are loaded here too and not
        # inside the timed run (they were until 2026-11-26: ≈ 45 ms per Flex-400 run counted as simulation)
        c0 = time.process_time()
        simulate(frame.head(100), prof, policy, seed=seed, engine=eng, **where).summary_frame()
        compile_s = time.process_time() - c0
    w0, c0 = time.perf_counter(), time.process_time()
    res = simulate(frame, prof, policy, seed=seed, engine=eng, **where)
    summary = res.summary_frame()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = res.recorder.r_outcome
    return {"policy": policy, "workers": workers, "case": case,
            "groups": 1 if plan is None else int(plan["group"].n_unique()),
            "requests": n, "rate_rps": rate, "wall_s": wall, "cpu_s": cpu,
            "compile_cpu_s": compile_s, "req_per_cpu_s": n / cpu, "req_per_wall_s": n / wall, "peak_mb": peak_mb,
            "served": float((out == SERVED).mean()), "dropped": float((out == DROPPED).mean()),
            "shed": res.shed / max(1, n),
            "mean_batch": summary["mean_batch"][0]}


def memory(n: int, policies: list[str], workers: int, variants: list[tuple[str, dict]], seed: int) -> None:
    """Peak RSS of ``shepherd simulate --record summary`` on the served case's trace of ``n`` requests."""
    import tempfile
    from pathlib import Path

    from shepherd.core.artifacts import make_provenance, write_artifact

    load, basis, _, _ = CASES["served"]
    with tempfile.TemporaryDirectory() as tmp:
        frame, _, _, _ = make_trace(n, workers, load, 250.0, seed, 0, basis)
        trace = Path(tmp) / "trace.parquet"
        write_artifact(frame, trace, "trace", make_provenance())
        del frame
        print(f"{'policy':9} {'variant':10} {'requests':>11} {'peak MB':>8} {'wall s':>7}", flush=True)
        for policy in policies:
            for name, fields in variants:
                engine = fields.get("path", "auto")
                code = ("import resource, sys; from shepherd.cli.app import main\n"
                        "code = main(sys.argv[1:])\nassert code == 0, code\n"
                        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
                cmd = [sys.executable, "-c", code, "simulate", "--policy", policy, "--trace", str(trace),
                       "--gpus", str(workers), "--record", "summary", "--engine", engine, "-o",
                       str(Path(tmp) / f"{policy}-{name}")]
                w0 = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, POLARS_MAX_THREADS="1"))
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    raise SystemExit(out.returncode)
                peak = int(out.stdout.strip().splitlines()[-1]) / 1024
                print(f"{policy:9} {name:10} {n:11,d} {peak:8.0f} {time.perf_counter() - w0:7.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="served,overload", help=f"named cases: {', '.join(CASES)}")
    ap.add_argument("--requests", type=int, default=0, help="requests per run (0: the case's own, 1 M)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--policies", default="flex,clockwork,symphony,nexus")
    ap.add_argument("--workers", default="12")
    ap.add_argument("--slo-ms", type=float, default=250.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flex-group-size", type=int, default=12,
                    help="Flex runs in Herd-like groups of this many workers (Shepherd §7: 12); 0 = one group")
    ap.add_argument("--variants", default="reference:path=reference,fast:path=fast", help="A/B: name:key=value+… (EngineConfig fields), comma-separated")
    ap.add_argument("--memory", type=int, default=0, help="peak RSS of `simulate --record summary` at N requests")
    ap.add_argument("--single", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single:
        spec = json.loads(args.single)
        print(json.dumps(one(**spec)))
        return
    variants = [parse_variant(v) for v in args.variants.split(",")]
    if args.memory:
        memory(args.memory, args.policies.split(","), int(args.workers.split(",")[0]), variants, args.seed)
        return
    print(f"{'case':9} {'policy':9} {'workers':>7} {'groups':>6} {'variant':10} {'requests':>10} "
          f"{'req/CPU-s':>10} {'req/wall-s':>10} {'runs req/CPU-s':>32} {'served':>6} {'shed':>6} "
          f"{'dropped':>7} {'batch':>5} {'peak MB':>7} {'JIT s':>6}", flush=True)
    for case in args.cases.split(","):
        if case not in CASES:
            raise SystemExit(f"error: unknown case '{case}' (known: {', '.join(CASES)})")
        n = args.requests or CASES[case][2]
        for workers in [int(w) for w in args.workers.split(",")]:
            for policy in args.policies.split(","):
                runs: dict[str, list[dict]] = {name: [] for name, _ in variants}
                for r in range(args.repeats):
                    order = variants if r % 2 == 0 else variants[::-1]
                    for name, fields in order:
                        spec = dict(policy=policy, workers=workers, n=n, case=case, slo_ms=args.slo_ms,
                                    seed=args.seed, group_size=args.flex_group_size, engine=fields)
                        cmd = [sys.executable, __file__, "--single", json.dumps(spec)]
                        out = subprocess.run(cmd, capture_output=True, text=True,
                                             env=dict(os.environ, POLARS_MAX_THREADS="1"))
                        if out.returncode != 0:
                            print(out.stderr, file=sys.stderr)
                            raise SystemExit(out.returncode)
                        runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                base = None
                for name, _ in variants:
                    rs = runs[name]
                    cpu = statistics.median(x["req_per_cpu_s"] for x in rs)
                    wall = statistics.median(x["req_per_wall_s"] for x in rs)
                    each = ",".join(f"{x['req_per_cpu_s'] / 1000:.0f}k" for x in rs)
                    x = rs[0]
                    print(f"{case:9} {policy:9} {workers:7d} {x['groups']:6d} {name:10} {n:10,d} {cpu:10,.0f} "
                          f"{wall:10,.0f} {each:>32} {x['served']:6.3f} {x['shed']:6.3f} {x['dropped']:7.3f} "
                          f"{x['mean_batch'] or 0:5.1f} {max(y['peak_mb'] for y in rs):7.0f} "
                          f"{max(y['compile_cpu_s'] for y in rs):6.2f}", flush=True)
                    if base is None:
                        base = cpu
                    elif len(variants) > 1:
                        print(f"{'':9} {'':9} {'':7} {'':6} {name:10} median req/CPU-s ×{cpu / base:.2f} vs "
                              f"{variants[0][0]}", flush=True)


if __name__ == "__main__":
    main()
