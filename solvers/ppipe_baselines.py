"""PPipe's baselines (§7.1 "Baselines"): NP and DART-r, plus the planner adapters.

* **NP** (no partitioning) — "the allocation is done by solving PPipe's MILP
  formulation without model partitioning": :func:`solve_np` is the A.2 MILP
  with one partition per pipeline (MPS shares allowed, as in PPipe's MILP).
* **DART-r** — DART chains one low- and one high-class GPU per pipeline
  (whole GPUs, no MPS); DART-r "replicates DART configurations for pairs of
  low- and high-class GPUs. If one GPU class has more GPUs than the other, the
  leftover GPUs are allocated to individually run entire DNNs." Per DNN the
  best pair configuration (partition point, batch, order low→high or
  high→low) maximises the pair's throughput under SLO·(1 − margin); a small
  MILP then gives each DNN a number of pairs (all ``min(N_high, N_low)``
  pairs are used when any DNN has a feasible pair) and of leftover whole GPUs,
  maximising the min normalised throughput. Each pair is its own pipeline of
  one GPU per stage (chain-based, not pooled).
"""

from __future__ import annotations

import mip

from shepherd.core.errors import UserError
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import ClusterSpec
from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage
from shepherd.solvers.backend import SolverConfig, new_model, solve
from shepherd.solvers.ppipe_configs import Config, enumerate_configs
from shepherd.solvers.ppipe_milp import PPipePlanConfig, build_terms, check_inputs, solve_pipelines


def solve_np(profiles: list[BlockProfile], weights: dict[str, float], cluster: ClusterSpec,
             cfg: PPipePlanConfig, solver: SolverConfig) -> PipelinePlan:
    """NP: the PPipe MILP restricted to whole-DNN (1-partition) pipelines."""
    from dataclasses import replace

    return solve_pipelines(profiles, weights, cluster, replace(cfg, max_partitions=1, candidates=0, mps=cfg.np_mps),
                           solver, "np")


def _best(cfgs: list[Config], key) -> Config | None:
    return max(cfgs, key=key, default=None)


def solve_dart_r(profiles: list[BlockProfile], weights: dict[str, float], cluster: ClusterSpec,
                 cfg: PPipePlanConfig, solver: SolverConfig) -> PipelinePlan:
    """DART-r (see module docstring; ``cfg.dart == "artifact"``: :func:`solve_dart_r_artifact`)."""
    cfg.validate()
    check_inputs(profiles, weights, cluster)
    if cfg.dart == "artifact":
        return solve_dart_r_artifact(profiles, weights, cluster, cfg, solver)
    build = build_terms(profiles, weights, cluster, cfg, solver)
    highs = [p.hardware for p in cluster.pools if p.high and p.count > 0]
    lows = [p.hardware for p in cluster.pools if not p.high and p.count > 0]
    n_pairs = min(sum(cluster.count(h) for h in highs), sum(cluster.count(h) for h in lows))
    pair: dict[str, Config | None] = {}
    whole: dict[tuple[str, str], Config | None] = {}
    for p in profiles:
        budget = p.slo_us(cfg.slo_scale) * (1 - cfg.slo_margin)
        pair[p.model], ones = _dart_options(p, cluster, cfg, build[p.model], highs)
        for h in cluster.hardware:
            whole[(p.model, h)] = ones[h]
        if pair[p.model] is None and all(whole[(p.model, h)] is None for h in cluster.hardware) \
                and weights.get(p.model, 0) > 0:
            raise UserError(f"'{p.model}': no feasible pipeline — SLO·(1−margin) = {budget / 1000:.2f} ms is "
                            "below the fastest possible latency")
    model = new_model(solver, mip.MAXIMIZE, "dart-r")
    t = model.add_var("t", lb=0.0)
    npair = {m: model.add_var(f"pairs_{i}", var_type=mip.INTEGER, lb=0, ub=n_pairs if c else 0)
             for i, (m, c) in enumerate(pair.items())}
    nwhole = {(m, h): model.add_var(f"whole_{i}", var_type=mip.INTEGER, lb=0, ub=cluster.count(h) if c else 0)
              for i, ((m, h), c) in enumerate(whole.items())}
    any_pair = any(c is not None for c in pair.values())
    if any_pair:
        model += mip.xsum(npair.values()) == n_pairs
    used_pairs = n_pairs if any_pair else 0
    for h in cluster.hardware:
        model += mip.xsum(v for (m, hh), v in nwhole.items() if hh == h) <= cluster.count(h) - used_pairs
    norm = []
    for m, w in weights.items():
        if w <= 0:
            continue
        terms = [nwhole[(m, h)] * whole[(m, h)].xput[0] for h in cluster.hardware if whole[(m, h)] is not None]
        if pair[m] is not None:
            terms.append(npair[m] * min(pair[m].xput))
        model += w * t <= mip.xsum(terms)
        norm += [(1.0 / w) * x for x in terms]
    model.objective = mip.maximize(t + 1e-4 * mip.xsum(norm))
    res = solve(model, solver)
    if not res.has_solution:
        raise UserError(f"dart-r: no feasible plan ({res.status})")
    pipes: list[Pipeline] = []
    for m, c in pair.items():
        if c is None:
            continue
        for _ in range(int(round(res.values[npair[m].name]))):
            pipes.append(Pipeline(m, c.batch, tuple(
                Stage(h, 1, c.bounds[d], c.bounds[d + 1], 1, c.latency_us[d], c.transfer_us[d], c.xput[d])
                for d, h in enumerate(c.template))))
    for (m, h), c in whole.items():
        n = int(round(res.values[nwhole[(m, h)].name])) if c is not None else 0
        if n > 0:
            pipes.append(Pipeline(m, c.batch, (Stage(h, 1, 0, c.bounds[1], n, c.latency_us[0], 0, c.xput[0]),)))
    slo = {p.model: p.slo_us(cfg.slo_scale) for p in profiles}
    meta = res.metadata() | {"pairs": used_pairs, "objective_name": "max-min normalised throughput (req/s)",
                             "slo_scale": cfg.slo_scale}
    return PipelinePlan(pipes, cluster, dict(weights), slo, cfg.slo_margin, "dart-r", meta)


def _dart_options(p: BlockProfile, cluster: ClusterSpec, cfg: PPipePlanConfig, build_us: float,
                  highs: list[str]) -> tuple[Config | None, dict[str, Config | None]]:
    """The best whole-GPU high/low pair configuration of ``p`` and its best whole-DNN one per GPU type."""
    budget = p.slo_us(cfg.slo_scale) * (1 - cfg.slo_margin)
    cfgs = enumerate_configs(p, cluster, budget, 2, prune=False, mps=False, build_us=build_us,
                             link_share=cfg.link_share)
    pairs = [c for c in cfgs if c.partitions == 2 and len(set(c.template)) == 2
             and {c.template[0] in highs, c.template[1] in highs} == {True, False}]
    ones = {h: _best([c for c in cfgs if c.partitions == 1 and c.template == (h,)], lambda c: (c.xput[0], c.batch))
            for h in cluster.hardware}
    return _best(pairs, lambda c: (min(c.xput), c.batch)), ones


def artifact_dart_shares(np_plan: PipelinePlan, models: list[str]) -> dict[str, dict[str, int]]:
    """GPUs of each type per DNN for the artifact's DART-r: NP's whole GPUs, plus an even (floor) share of
    the GPUs of each type NP leaves unused (artifact ``get_multidnn_dart_plan``)."""
    from math import ceil

    cluster = np_plan.cluster
    shares = {m: {h: 0 for h in cluster.hardware} for m in models}
    for pipe in np_plan.pipelines:
        for s in pipe.stages:
            shares[pipe.model][s.hardware] += ceil(s.gpus - 1e-9)
    for h in cluster.hardware:
        spare = (cluster.count(h) - sum(sh[h] for sh in shares.values())) // max(len(models), 1)
        for sh in shares.values():
            sh[h] += max(spare, 0)
    return shares


def solve_dart_r_artifact(profiles: list[BlockProfile], weights: dict[str, float], cluster: ClusterSpec,
                          cfg: PPipePlanConfig, solver: SolverConfig) -> PipelinePlan:
    """DART-r as the authors' artifact plans it (``run_ilp_v4_in_batch.py``, ``get_multidnn_dart_plan``).

    NP (whole GPUs) splits the GPUs between the DNNs; the GPUs of each type
    NP leaves unused are divided evenly among the DNNs (floor division, the
    remainder stays idle). Each DNN then replicates its best 1 high + 1 low
    whole-GPU sub-plan ``min(high, low)`` times — one pooled pipeline of that
    many GPU pairs, or, when the two GPUs serve more running whole DNNs
    apart (the artifact solves that 1 + 1 GPU sub-plan with its MILP, which
    picks either), one whole-DNN pipeline per type — and runs whole DNNs on
    the ``max − min`` GPUs left of its more numerous type (ties: the first
    type of the cluster).
    """
    np_plan = solve_np(profiles, weights, cluster, cfg, solver)
    highs = [p.hardware for p in cluster.pools if p.high and p.count > 0]
    build = build_terms(profiles, weights, cluster, cfg, solver)
    shares = artifact_dart_shares(np_plan, [p.model for p in profiles])
    pipes: list[Pipeline] = []
    for p in profiles:
        share = shares[p.model]
        pair, ones = _dart_options(p, cluster, cfg, build[p.model], highs)

        def whole(h: str, n: int) -> list[Pipeline]:
            c = ones.get(h)
            if n <= 0 or c is None:
                return []
            return [Pipeline(p.model, c.batch, (Stage(h, 1, 0, c.bounds[1], n, c.latency_us[0], 0, c.xput[0]),))]

        hs = list(cluster.hardware)
        n_pairs = min(share[h] for h in hs) if len(hs) == 2 else 0
        excess = max(hs, key=lambda h: (share[h], -hs.index(h)))
        if n_pairs:
            apart = sum(ones[h].xput[0] for h in hs if ones.get(h) is not None)
            if pair is not None and min(pair.xput) > apart:
                pipes.append(Pipeline(p.model, pair.batch, tuple(
                    Stage(h, 1, pair.bounds[d], pair.bounds[d + 1], n_pairs, pair.latency_us[d],
                          pair.transfer_us[d], pair.xput[d]) for d, h in enumerate(pair.template))))
            else:
                for h in hs:
                    pipes += whole(h, n_pairs)
        pipes += whole(excess, share[excess] - n_pairs)
    slo = {p.model: p.slo_us(cfg.slo_scale) for p in profiles}
    meta = {k: np_plan.meta.get(k) for k in ("status", "gap", "solve_s", "objective", "bound") if k in np_plan.meta}
    meta |= {"objective_name": "max-min normalised throughput (req/s)", "slo_scale": cfg.slo_scale,
             "dart": "artifact", "batch_build": cfg.batch_build}
    return PipelinePlan(pipes, cluster, dict(weights), slo, cfg.slo_margin, "dart-r", meta)


PIPELINE_PLANNERS = {
    "ppipe": solve_pipelines,
    "np": solve_np,
    "dart-r": solve_dart_r,
}
