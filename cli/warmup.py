"""``shepherd warmup``: compile the fast engine's kernels ahead, once per machine (thin: parse, call, print).

A kernel family compiles on first use (20–60 s each, announced on stderr with its duration) and is cached on
disk; ``warmup`` runs a tiny trace through the public :func:`shepherd.api.simulate` on the compiled engine for
each policy with a fast path — one minute of ``maf-synthetic`` at 100 req/s on ``--gpus`` workers, once keeping
every table and once ``record="summary"`` (what sweeps and capacity searches run); for ``ppipe`` a tiny
synthetic pipeline plan (two block-profiled DNNs, two GPU types: numbers that mean nothing, made only to
reach every part of its kernel) — so a later run's processes load machine code instead of compiling it.
It prints, per policy, the kernel family and how long it took: compiled (seconds spent compiling, from
:data:`shepherd.core.engine.fast.jitcache.COMPILED_S`) or loaded from the cache.
"""

from __future__ import annotations

import time
from typing import Annotated, List, Optional

import typer

from shepherd.core.errors import UserError

#: the policies with a compiled fast path (``--engine`` in simulate's help); ppipe's runs on a tiny plan
WARMABLE = ("clockwork", "flex", "flex-np", "nexus", "symphony", "symphony-wc", "ppipe")
TINY = {"duration_min": 1, "synthetic_rate": 100.0}  # one minute of maf-synthetic, 6,000 requests


def warmup(
    policy: Annotated[Optional[List[str]], typer.Option("--policy", help=f"Only these policies (repeatable or comma-separated; default: all with a compiled fast path: {', '.join(WARMABLE)}).")] = None,
    gpus: Annotated[int, typer.Option("--gpus", min=1, max=64, help="Workers of the tiny runs.")] = 4,
) -> None:
    """Compile the fast engine's kernels now (each family once per machine, 20–60 s each), not in the first run.

    Prints each kernel's compile time (or that it was loaded from the on-disk cache).

    Example: shepherd warmup · shepherd warmup --policy flex
    """
    from shepherd.cli.common import summary_table
    from shepherd.core.engine.fast import jitcache

    chosen = [p.strip() for item in policy or WARMABLE for p in item.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in WARMABLE]
    if unknown:
        raise UserError(f"--policy {unknown[0]}: no compiled fast path to warm up (those with one: "
                        f"{', '.join(WARMABLE)})")
    rows: dict[str, str] = {}
    trace = None
    for name in dict.fromkeys(chosen):
        before = dict(jitcache.COMPILED_S)
        start = time.perf_counter()
        if name == "ppipe":
            _ppipe()
        else:
            if trace is None:
                from shepherd import api

                trace = api.load_trace("maf-synthetic", seed=0, **TINY)
            _plain(trace, name, gpus)
        took = time.perf_counter() - start
        compiled = {f: s - before.get(f, 0.0) for f, s in jitcache.COMPILED_S.items() if s > before.get(f, 0.0)}
        family = _family(name)
        rows[name] = (f"{family} kernel compiled in {sum(compiled.values()):.1f} s" if compiled else
                      f"{family} kernel loaded from the cache") + f" ({took:.1f} s in all)"
    summary_table("warmup (compiled kernels cached on disk)", rows)


def _family(policy: str) -> str:
    """The kernel family (module) of a built-in policy's fast path."""
    from shepherd.core.engine.fast.jitcache import family_of
    from shepherd.core.policies import registry

    return family_of(registry.get(policy).cls.fast_path.module)


def _plain(trace, name: str, gpus: int) -> None:
    from shepherd import api
    from shepherd.core.engine import EngineConfig

    for record in ("all", "summary"):
        api.simulate(trace, policy=name, gpus=gpus, engine=EngineConfig(path="fast", record=record))


def _ppipe() -> None:
    from shepherd.core.engine import EngineConfig, simulate

    trace, profs, plan = ppipe_workload()
    for record in ("all", "summary"):
        simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="record", path="fast", record=record))


def ppipe_workload() -> tuple:
    """(trace, block profiles, plan): PPipe's tiny synthetic workload — two DNNs of three blocks; a two-stage
    pipeline across the GPU types and a one-stage one, two GPUs a server, a slow network so that transfers
    queue; 0.2 s of Poisson arrivals at 2,000 req/s per DNN."""
    import numpy as np

    from shepherd.core.pipelines.blocks import BlockProfile
    from shepherd.core.pipelines.cluster import custom_cluster
    from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage
    from shepherd.traces.arrivals import poisson
    from shepherd.traces.synthetic import assemble

    kinds, blocks, maxb = (("A", 1), ("A", 2), ("B", 1)), 3, 4
    profs = {}
    for i, name in enumerate(("m0", "m1")):
        lat = {(hw, k): np.array([[(200 + 100 * b + 50 * i) * k * (1 + n) // 2 + 100 for n in range(1, maxb + 1)]
                                  for b in range(blocks)], np.int64) for hw, k in kinds}
        profs[name] = BlockProfile(name, blocks, lat, np.array([20_000.0, 40_000.0]), 1000.0)
    pipes = [Pipeline("m0", 2, (Stage("A", 1, 0, 1, 1, 0, 0, 1.0), Stage("B", 1, 1, 3, 1, 0, 0, 1.0))),
             Pipeline("m1", 4, (Stage("A", 2, 0, 3, 2, 0, 0, 1.0),))]
    cluster = custom_cluster({"A": 4, "B": 2}, 0.5, {"A": 2, "B": 1})
    plan = PipelinePlan(pipes, cluster, {"m0": 1.0, "m1": 1.0}, {"m0": 5000, "m1": 5000}, 0.0, "warmup")
    rng = np.random.default_rng(0)
    trace = assemble([poisson(rng, 2000.0, 200_000), poisson(rng, 2000.0, 200_000)], ["m0", "m1"], [5000, 8000])
    return trace, profs, plan
