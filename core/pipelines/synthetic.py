"""Seeded small PPipe workloads — synthetic block profiles, a plan of pooled pipelines and a trace — for
``shepherd verify ppipe`` (:mod:`shepherd.core.engine.verify`): the states a comparison of PPipe's kernel with
the reference must reach (§5.4, Appendix A.3): several DNNs whose pipelines share servers' NICs, transfers that
queue on slow links and reservations that go into gaps, equal arrival times, every rule switch and ``wait``."""

from __future__ import annotations

from typing import Any

import numpy as np

#: the rule switches of ``PPipeDataPlaneConfig`` (:mod:`shepherd.core.pipelines.rules`)
RULES = ("uplink_score", "head_drop", "slot_receive", "stage_servers", "fill_wait", "transfer_round")
KINDS = (("A", 1), ("A", 2), ("B", 1))
BLOCKS = 4


def _profile(rng: np.random.Generator, name: str, maxb: int) -> Any:
    from shepherd.core.pipelines.blocks import BlockProfile

    lat = {}
    for hw, k in KINDS:
        per = float(rng.choice([0.2, 0.6, 1.0]))
        lat[(hw, k)] = np.array([[max(1, int(b * (1 + per * (n - 1)))) for n in range(1, maxb + 1)]
                                 for b in rng.integers(50, 900, BLOCKS) * k], np.int64)
    return BlockProfile(name, BLOCKS, lat, rng.integers(0, 60_000, BLOCKS - 1).astype(np.float64), 1000.0)


def workload(seed: int) -> dict[str, Any]:
    """One ``simulate()`` run's keyword arguments: 1–3 DNNs, each with 1–3 pooled pipelines of 1–3 stages on two
    GPU types and two MPS levels (planned batches up to 4, or 16–24 on every fourth seed: rule (b)'s admission
    range), servers of several GPUs, 0.1–10 Gbit/s links; Poisson arrivals over 0.3 s with ties; the paper's
    rules or one or all six artifact rules, ``wait`` on and off; ``reserved="record"``, overhead none."""
    from shepherd.core.engine.config import EngineConfig
    from shepherd.core.engine.overhead import OverheadConfig
    from shepherd.core.pipelines.cluster import custom_cluster
    from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage
    from shepherd.traces.arrivals import poisson
    from shepherd.traces.synthetic import assemble

    rng = np.random.default_rng(seed)
    maxb = 24 if seed % 4 == 3 else 4
    names = [f"m{i}" for i in range(1 + seed % 3)]
    profiles = {n: _profile(rng, n, maxb) for n in names}
    pipes, slos = [], []
    for n in names:
        for _ in range(int(rng.integers(1, 4))):
            cuts = sorted(rng.choice(np.arange(1, BLOCKS), int(rng.integers(0, 3)), replace=False).tolist())
            bounds = [0, *cuts, BLOCKS]
            stages = tuple(Stage(*KINDS[int(rng.integers(0, len(KINDS)))], bounds[j], bounds[j + 1],
                                 int(rng.integers(1, 4)), 0, 0, 1.0) for j in range(len(bounds) - 1))
            pipes.append(Pipeline(n, int(rng.integers(16 if maxb > 4 else 1, maxb + 1)), stages))
        full = max(sum(int(profiles[n].lat[(s.hardware, s.k)][s.start:s.end, p.batch - 1].sum()) for s in p.stages)
                   for p in pipes if p.model == n)
        slos.append(int(full * float(rng.choice([0.8, 1.2, 3.0]))) + int(rng.integers(0, 100)))
    cluster = custom_cluster({"A": 90, "B": 90}, float(rng.choice([0.1, 0.5, 2.0, 10.0])),
                             {"A": int(rng.integers(1, 7)), "B": int(rng.integers(1, 5))})
    plan = PipelinePlan(pipes, cluster, dict.fromkeys(names, 1.0), dict(zip(names, slos)), 0.0, "verify")
    arrs = [poisson(rng, float(rng.choice([300.0, 2000.0, 8000.0])), 300_000) for _ in names]
    arrs = [np.sort(np.concatenate([a, a[::3]])) if seed % 2 else a for a in arrs]  # equal times in a stream
    k = seed % 9  # the paper's rules, all six artifact rules, or one of them
    rules = {} if k < 2 else dict.fromkeys(RULES, True) if k == 2 else {RULES[k - 3]: True}
    return dict(trace=assemble(arrs, names, slos), profiles=profiles, plan=plan,
                config={"wait": seed % 5 != 4, **rules}, seed=seed, overhead=OverheadConfig(mode="none"),
                engine=EngineConfig(reserved="record", pool_index=seed % 3 != 1))
