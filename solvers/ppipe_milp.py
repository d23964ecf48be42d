"""The PPipe MILP with batch-size unification and virtual GPUs (PPipe §3, §5.3, Appendix A.2).

Formulation (per DNN ``m`` with workload share ``w_m``; configurations from
:mod:`.ppipe_configs`, each fixing what A.2's ``p_{ldvbij}`` selects for
every partition of one pooled pipeline — partition points, the *unified*
batch size ``b`` (Eq. 18) and the vGPU size ``1/v`` of each partition):

* ``z_c ∈ {0,1}`` — configuration ``c`` is the pooled pipeline of its
  template ``l`` (Eqs. 16–20: at most one per template, so ≤ 14 pooled
  pipelines per DNN on a 2-type cluster);
* ``g_{c,d} ∈ ℕ`` — virtual GPUs of partition ``d``; ``z_c ≤ g_{c,d} ≤ U·z_c``
  (Eqs. 21–22);
* ``x_c ≥ 0`` — pipeline throughput, ``x_c ≤ X_{c,d}·g_{c,d}`` ∀d (Eqs. 25, 28);
* ``h_{k,v} ∈ ℕ`` — physical GPUs of type ``k`` run at MPS level ``v``:
  ``v·h_{k,v} ≥ Σ g`` over partitions at ``(k, v)`` and ``Σ_v h_{k,v} ≤ N_k``.
  This is Eq. 23 (``Σ g/v ≤ N_k``) tightened so that every physical GPU hosts
  vGPUs of one level, as profiled (§5.3 footnote) — a documented choice that
  makes every plan placeable. With ``gpu_sharing=False`` (the artifact's
  ``force_sum_gpu_integer_per_partition``) the variables are
  ``h_{k,v,m,d}``, one per DNN ``m`` and partition position ``d``: a DNN's
  partition never shares a physical GPU with another DNN's or another
  position's. (The artifact sums ``g/v`` over all levels of ``(m, d, k)``
  before rounding up; we keep one level per GPU here too — stricter by at
  most one GPU per extra level, documented choice);
* latency (Eq. 27 with the §7.1 margin) holds by construction: only
  configurations with ``Σ C + Σ Y ≤ SLO·(1 − margin)`` exist;
* objective (§3 "Objective"): ``max t`` with ``t ≤ Σ_{c∈m} x_c / w_m`` for
  every DNN (max-min normalised throughput; one DNN: max throughput), plus
  ``ε·Σ_m Σ_c x_c/w_m`` (ε = 10⁻⁴) so capacity left after the minimum is not
  wasted (documented tie-break).

Column pre-selection. Exact dominance pruning (:func:`enumerate_configs`)
leaves up to ~2,000 configurations per DNN. The LP relaxation over all of
them gives shadow prices ``π_k`` of the GPU types; per (DNN, template) the
``candidates`` configurations of lowest priced GPU cost per unit throughput
``Σ_d π_{k_d}/(v_d·X_{c,d})`` are kept, plus every whole-DNN configuration
(NP's search space) and the whole-GPU chain of highest throughput (DART-r's
pair, pooled), so PPipe's optimum is never below NP's or DART-r's;
``candidates = 0`` keeps all. Plans record how many were kept.

Solve strategy (``formulation``). The LP bound of Eqs. 21–28 sits ~2 % above
the optimum on the 100-GPU clusters (whole vGPUs per stage), so plain
branch-and-bound ("counts") stalls at the 60 s limit on 7 of the 24 Table 1
instances. The default, "knapsack", is the same MILP plus two things from
:mod:`.ppipe_knapsack`, an exact DP over a relaxation that keeps vGPUs whole
and counts GPUs as Eq. 23 does: the cut ``t ≤ t*`` (its optimum; valid for
every MILP solution) and, when the DP's pipelines also fit the per-level
physical GPUs, a MIP start at that bound. Under the paper rules the start
was placeable on all 24 instances and the gap closed at once; where it is
not, branch-and-bound starts from the cut (benchmark ``ppipe_milp_speed.py``).
On three or more GPU types the cut comes from the relaxation's surrogate
form (two weighted sums of the types' units; :mod:`.ppipe_knapsack`), which
is rarely a placeable start, so HiGHS's primal heuristics get more of the
search (``mip_heuristic_effort`` 0.3, :data:`SURROGATE_HEURISTIC_EFFORT`):
the bound is in place from the root and finding the incumbent is what is
left (Fig. 14(b), paper rules: three types went from 300 s time-outs to
12–60 s; four types, with the pair splits of :func:`~.ppipe_knapsack.pair_dims`,
50–260 s, one group still at the limit: docs/ppipe-acceptance.md).
"points" (one binary per efficient vGPU vector) and "hybrid" (counts, then
points) are other exact forms of the same MILP, kept for comparison.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import mip

from shepherd.core.errors import UserError
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import ClusterSpec
from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage
from shepherd.solvers.backend import SolveResult, SolverConfig, new_model, relative_gap, solve
from shepherd.solvers.ppipe_knapsack import knapsack_bound
from shepherd.solvers.ppipe_configs import (LINK_SHARES, MAX_PARTITIONS, Config, efficient_points,
                                            enumerate_configs)

TIE_EPSILON = 1e-4
FORMULATIONS = ("counts", "points", "hybrid", "knapsack")
#: "hybrid": the share of the time limit given to "counts" before "points" takes over (at most HYBRID_FIRST_S)
HYBRID_SHARE = 0.2
HYBRID_FIRST_S = 8.0
#: "knapsack": relative slack on the cut ``t ≤ bound`` (solver tolerances, never the proof)
CUT_SLACK = 1e-7
#: "knapsack" on three or more GPU types (surrogate bound, no placeable start so far): HiGHS's primal
#: heuristic effort (default 0.05), as the bound is in place from the start and the incumbent is what is missing
SURROGATE_HEURISTIC_EFFORT = 0.3


@dataclass(frozen=True)
class PPipePlanConfig:
    """Planner knobs (defaults: the paper's §7.1 setting)."""

    slo_margin: float = 0.4  # §7.1: 40 % of the SLO is deducted in the MILP
    slo_scale: float = 5.0  # §7.1: SLO = 5 × L4 batch-1 latency
    max_partitions: int = MAX_PARTITIONS  # §3: at most 3; NP uses 1
    candidates: int = 4  # configurations kept per (DNN, template); 0 = all
    mps: bool = True  # virtual GPUs (§5.3)
    #: "knapsack" (default): "counts" plus the knapsack relaxation's cut on t and MIP start (.ppipe_knapsack);
    #: "counts": integer g per partition; "points": one efficient g-vector per config; "hybrid": counts then points
    formulation: str = "knapsack"
    #: batch-building latency factor: ``factor·10⁶·(bs−1)/est_xput`` µs joins each pipeline's latency,
    #: est_xput = the DNN's NP throughput (artifact MILP: 1.3; paper: 0 = no term). Rule sets: core.pipelines.rules
    batch_build: float = 0.0
    np_mps: bool = True  #: NP may use MPS shares (paper §7.1); the artifact's NP uses whole GPUs
    dart: str = "paper"  #: DART-r: "paper" (pairs over the cluster) or "artifact" (pairs within NP's GPU split)
    #: True (paper, Eq. 23): vGPUs of one MPS level share physical GPUs whatever their DNN; False (artifact
    #: MILP, ``force_sum_gpu_integer_per_partition``): each DNN's partition (position d, type, level) has
    #: whole physical GPUs of its own — the ``h`` variables are keyed (type, level, DNN, d)
    gpu_sharing: bool = True
    #: GPUs the MILP leaves idle: "trim" (paper: none added; stages keep only the vGPUs their pipeline's
    #: bottleneck needs) or "fill" (artifact plans: idle GPUs sit in non-bottleneck pipeline stages —
    #: handed out one GPU at a time to the most loaded such stage, :func:`fill_spare`); PPipe plans only
    spare: str = "trim"
    #: vGPUs per link in the configurations' transfer caps (.ppipe_configs.link_shares): "server" (paper
    #: §4 C3 and the artifact MILP) or "stage" (the links of data-plane rules (c)+(d); off in both rule sets)
    link_share: str = "server"

    def validate(self) -> "PPipePlanConfig":
        if not 0 <= self.slo_margin < 1:
            raise UserError(f"--slo-margin must be in [0, 1), got {self.slo_margin:g}")
        if not self.slo_scale > 0:
            raise UserError(f"--slo-scale must be positive, got {self.slo_scale:g}")
        if not 1 <= self.max_partitions <= 3:
            raise UserError(f"max partitions must be 1–3, got {self.max_partitions}")
        if self.candidates < 0:
            raise UserError(f"candidates must be ≥ 0, got {self.candidates}")
        if not (0 <= self.batch_build < 1e3):
            raise UserError(f"batch-build factor must be in [0, 1000), got {self.batch_build:g}")
        if self.link_share not in LINK_SHARES:
            raise UserError(f"link-share rule must be one of {', '.join(LINK_SHARES)}, got '{self.link_share}'")
        if self.spare not in ("trim", "fill"):
            raise UserError(f"spare-GPU rule must be trim or fill, got '{self.spare}'")
        if self.dart not in ("paper", "artifact"):
            raise UserError(f"DART-r rule must be paper or artifact, got '{self.dart}'")
        if self.formulation not in FORMULATIONS:
            raise UserError(f"unknown MILP formulation '{self.formulation}' (known: {', '.join(FORMULATIONS)})")
        return self


def check_inputs(profiles: list[BlockProfile], weights: dict[str, float], cluster: ClusterSpec) -> None:
    """Bad input → UserError: missing GPU type in a profile, weights, empty cluster."""
    cluster.validate()
    if not profiles:
        raise UserError("no DNNs to plan")
    for p in profiles:
        for h in cluster.hardware:
            if cluster.count(h) > 0 and (h, 1) not in p.lat:
                raise UserError(f"profile of '{p.model}' has no {h} latencies; the cluster needs them")
    if any(not (w >= 0 and math.isfinite(w)) for w in weights.values()) or sum(weights.values()) <= 0:
        raise UserError("workload shares must be non-negative with a positive sum")


def build_terms(profiles: list[BlockProfile], weights: dict[str, float], cluster: ClusterSpec,
                cfg: PPipePlanConfig, solver: SolverConfig) -> dict[str, float]:
    """Per DNN the batch-building latency per extra request, µs: ``factor·10⁶/est_xput`` (0 without the term).

    ``est_xput`` is the DNN's throughput in the NP plan of the same inputs
    (NP as the rule set has it, without the term) — the artifact MILP's
    ``est_xput``.
    """
    if cfg.batch_build <= 0:
        return {p.model: 0.0 for p in profiles}
    from dataclasses import replace

    base = replace(cfg, batch_build=0.0, max_partitions=1, candidates=0, mps=cfg.np_mps)
    np_plan = solve_pipelines(profiles, weights, cluster, base, solver, "np")
    out = {}
    for p in profiles:
        est = np_plan.model_xput(p.model)
        out[p.model] = cfg.batch_build * 1e6 / est if est > 0 else 0.0
    return out


def candidate_configs(profiles: list[BlockProfile], cluster: ClusterSpec, cfg: PPipePlanConfig,
                      weights: dict[str, float], solver: SolverConfig,
                      build_us: dict[str, float] | None = None) -> dict[str, list[Config]]:
    """Feasible, dominance-pruned configurations per DNN, pre-selected by LP prices.

    ``build_us``: per DNN the batch-building latency per extra request
    (:func:`build_terms`; computed here when not given).
    """
    out: dict[str, list[Config]] = {}
    if build_us is None:
        build_us = build_terms(profiles, weights, cluster, cfg, solver)
    for p in profiles:
        budget = p.slo_us(cfg.slo_scale) * (1 - cfg.slo_margin)
        cfgs = enumerate_configs(p, cluster, budget, cfg.max_partitions, mps=cfg.mps,
                                 build_us=build_us.get(p.model, 0.0), link_share=cfg.link_share)
        if not cfgs and weights.get(p.model, 0) > 0:
            fastest = min(p.whole_us(h) for h in cluster.hardware if cluster.count(h) > 0)
            raise UserError(f"'{p.model}': no feasible pipeline — SLO·(1−margin) = {budget / 1000:.2f} ms is below "
                            f"the fastest possible latency ({fastest / 1000:.2f} ms at batch 1)")
        out[p.model] = cfgs
    if cfg.candidates == 0:
        return out
    prices = _lp_prices(out, cluster, weights, solver)
    for m, cfgs in out.items():
        by_tpl: dict[tuple[str, ...], list[Config]] = {}
        for c in cfgs:
            by_tpl.setdefault(c.template, []).append(c)
        keep = []
        for group in by_tpl.values():
            if len(group[0].template) == 1:  # whole-DNN pipelines: few, and NP's whole search space
                keep += group
                continue
            group.sort(key=lambda c: (_priced_cost(c, prices), -c.batch, c.bounds, c.levels))
            best = group[: cfg.candidates]
            whole = [c for c in group if set(c.levels) == {1}]  # DART's whole-GPU chain, pooled
            chain = max(whole, key=lambda c: (min(c.xput), c.batch), default=None)
            if chain is not None and chain not in best:
                best.append(chain)
            keep += best
        out[m] = keep
    return out


def _gpu_cost(c: Config) -> dict[str, float]:
    """Physical GPUs per req/s of pipeline throughput, per GPU type."""
    cost: dict[str, float] = {}
    for h, k, x in zip(c.template, c.levels, c.xput):
        cost[h] = cost.get(h, 0.0) + 1.0 / (k * x)
    return cost


def _priced_cost(c: Config, prices: dict[str, float]) -> float:
    return sum(prices.get(h, 0.0) * v for h, v in _gpu_cost(c).items())


def _lp_prices(configs: dict[str, list[Config]], cluster: ClusterSpec, weights: dict[str, float],
               solver: SolverConfig) -> dict[str, float]:
    """Shadow prices of GPU types in the LP relaxation (fractional GPUs, any number of pipelines)."""
    model = new_model(solver, mip.MAXIMIZE, "ppipe-lp")
    t = model.add_var("t", lb=0.0)
    use: dict[str, list] = {h: [] for h in cluster.hardware}
    for m, cfgs in configs.items():
        xs = []
        for i, c in enumerate(cfgs):
            x = model.add_var(f"x_{len(model.vars)}", lb=0.0)
            xs.append(x)
            for h, v in _gpu_cost(c).items():
                use[h].append(v * x)
        if weights.get(m, 0) > 0:
            model += t * weights[m] <= mip.xsum(xs)
    cons = {}
    for h, terms in use.items():
        if terms:
            cons[h] = model.add_constr(mip.xsum(terms) <= cluster.count(h), name=f"gpu_{h}")
    model.objective = mip.maximize(t)
    status = model.optimize(relax=True)
    if status not in (mip.OptimizationStatus.OPTIMAL, mip.OptimizationStatus.FEASIBLE):
        return {h: 1.0 for h in cluster.hardware}
    prices = {h: abs(float(c.pi)) if c.pi is not None else 0.0 for h, c in cons.items()}
    if all(v <= 1e-12 for v in prices.values()):
        prices = {h: 1.0 for h in cluster.hardware}
    return {h: max(v, 1e-9) for h, v in prices.items()}


def solve_pipelines(profiles: list[BlockProfile], weights: dict[str, float], cluster: ClusterSpec,
                    cfg: PPipePlanConfig, solver: SolverConfig, planner: str = "ppipe") -> PipelinePlan:
    """Solve the A.2 MILP (see module docstring) and return the pooled pipelines it selects."""
    cfg.validate()
    check_inputs(profiles, weights, cluster)
    configs = candidate_configs(profiles, cluster, cfg, weights, solver)
    return solve_configs(configs, profiles, weights, cluster, cfg, solver, planner)


def solve_configs(configs: dict[str, list[Config]], profiles: list[BlockProfile], weights: dict[str, float],
                  cluster: ClusterSpec, cfg: PPipePlanConfig, solver: SolverConfig,
                  planner: str = "ppipe") -> PipelinePlan:
    """The MILP over given candidate configurations.

    ``formulation="hybrid"`` ("counts then points"): "counts" first, with
    ``HYBRID_SHARE`` of the time limit (at most ``HYBRID_FIRST_S``); it
    proves most instances within seconds. If it stops above the gap,
    "points" (the same optimum, a tighter relaxation) gets the rest of the
    limit; the better plan is kept and the gap is taken against the tighter of
    the two proven bounds (both bound the same optimum).
    """
    if cfg.formulation == "hybrid":
        from dataclasses import replace

        first_s = min(HYBRID_FIRST_S, HYBRID_SHARE * solver.time_limit_s)
        t0 = time.perf_counter()
        try:
            a = solve_configs(configs, profiles, weights, cluster, replace(cfg, formulation="counts"),
                              replace(solver, time_limit_s=first_s), planner)
        except UserError as e:  # no incumbent in the first share of the time: points gets all the rest
            if "infeasible" in str(e):
                raise
            a = None
        if a is not None and a.meta.get("status") == "optimal":
            return _hybrid_meta(a, [a], "counts")
        rest = max(solver.time_limit_s - (time.perf_counter() - t0), 1.0)
        try:
            b = solve_configs(configs, profiles, weights, cluster, replace(cfg, formulation="points"),
                              replace(solver, time_limit_s=rest), planner)
        except UserError:
            if a is None:
                raise
            return _hybrid_meta(a, [a], "counts")  # points found nothing better in the rest of the time
        if a is None:
            return _hybrid_meta(b, [b], "points")
        first = (a.meta.get("objective") or -1) > (b.meta.get("objective") or -1)
        return _hybrid_meta(a if first else b, [a, b], "counts" if first else "points")
    model = new_model(solver, mip.MAXIMIZE, planner)
    counts = {h: cluster.count(h) for h in cluster.hardware}
    t = model.add_var("t", lb=0.0)
    level_use: dict[tuple[str, int], list] = {}
    chosen: list[tuple[Config, mip.Var, list[mip.Var], mip.Var]] = []
    norm_terms = []
    for mi, (m, cfgs) in enumerate(configs.items()):
        w = weights.get(m, 0.0)
        per_tpl: dict[tuple[str, ...], list] = {}
        xs = []
        for c in cfgs:
            n = len(chosen)
            if cfg.formulation == "points":
                z, gs, x = _add_points(model, n, c, counts)
            else:
                z, gs, x = _add_counts(model, n, c, cluster)
            for d, (g, h, k) in enumerate(zip(gs, c.template, c.levels)):
                level_use.setdefault(gpu_key(h, k, mi, d, cfg.gpu_sharing), []).append(g)
            per_tpl.setdefault(c.template, []).append(z)
            chosen.append((c, z, gs, x))
            xs.append(x)
        for zs in per_tpl.values():
            model += mip.xsum(zs) <= 1
        if w > 0 and xs:
            model += w * t <= mip.xsum(xs)
            norm_terms += [(1.0 / w) * x for x in xs]
    for h in cluster.hardware:
        hs = []
        for key, gs in level_use.items():
            if key[0] != h:
                continue
            k = key[1]
            phys = model.add_var(gpu_var(key), var_type=mip.INTEGER, lb=0, ub=cluster.count(h))
            model += k * phys >= mip.xsum(gs)
            hs.append(phys)
        if hs:
            model += mip.xsum(hs) <= cluster.count(h)
    model.objective = mip.maximize(t + TIE_EPSILON * mip.xsum(norm_terms))
    extra: dict = {}
    if cfg.formulation == "knapsack":
        extra = _knapsack_guide(model, t, chosen, configs, weights, cluster, cfg.gpu_sharing, solver)
    if extra.get("knapsack_relaxation") == "surrogate" and solver.heuristic_effort == 0:
        from dataclasses import replace

        solver = replace(solver, heuristic_effort=SURROGATE_HEURISTIC_EFFORT)
    res = solve(model, solver)
    if res.status == "infeasible":
        raise UserError(f"{planner}: infeasible — no plan fits the cluster")
    if not res.has_solution:
        raise UserError(f"{planner}: time limit hit with no feasible solution (raise --time-limit)")
    pipes = _extract(chosen, res)
    if cfg.spare == "fill" and planner == "ppipe":
        pipes = fill_spare(pipes, cluster, cfg.gpu_sharing)
    slo = {p.model: p.slo_us(cfg.slo_scale) for p in profiles}
    meta = res.metadata() | {"solve_s": res.solve_s + extra.get("knapsack_s", 0.0), "candidates": sum(len(v) for v in configs.values()), "gap_limit": solver.gap,
                             "objective_name": "max-min normalised throughput (req/s)",
                             "slo_scale": cfg.slo_scale, "max_partitions": cfg.max_partitions,
                             "batch_build": cfg.batch_build, "gpu_sharing": cfg.gpu_sharing,
                             "spare": cfg.spare if planner == "ppipe" else "trim"} | extra
    return PipelinePlan(pipes, cluster, dict(weights), slo, cfg.slo_margin, planner, meta)


def gpu_key(h: str, k: int, model_index: int, d: int, sharing: bool) -> tuple:
    """The physical-GPU group a partition's vGPUs count in: ``(type, level)``, or ``(type, level, DNN, d)``
    without GPU sharing (module docstring)."""
    return (h, k) if sharing else (h, k, model_index, d)


def gpu_var(key: tuple) -> str:
    return "h_" + "_".join(str(x) for x in key)


def _knapsack_guide(model: mip.Model, t: mip.Var, chosen: list, configs: dict[str, list[Config]],
                    weights: dict[str, float], cluster: ClusterSpec, sharing: bool = True,
                    solver: SolverConfig | None = None) -> dict:
    """``formulation="knapsack"``: the counts MILP plus the knapsack relaxation's cut and start.

    :func:`.ppipe_knapsack.knapsack_bound` gives an upper bound on ``t`` that
    every MILP solution meets (a valid cut, far tighter than the LP bound),
    and its selection of pipelines; when that selection also fits the
    per-MPS-level physical GPUs it is a MIP start at the bound (first with
    the GPUs it leaves unused given to one DNN, for the ε tie-break term).
    The start sets the MILP's own physical-GPU variables, keyed as
    :func:`gpu_key` keys them (per DNN and partition without ``sharing``).
    """
    t0 = time.perf_counter()
    in_use = [h for h in cluster.hardware if cluster.count(h) > 0]
    prices = _lp_prices(configs, cluster, weights, solver or SolverConfig()) if len(in_use) > 2 else None
    kb = knapsack_bound(configs, weights, cluster, prices)
    dp_s = time.perf_counter() - t0
    if kb is None:
        return {}
    model += t <= kb.t_upper * (1 + CUT_SLACK)
    index = {c: (z, gs, x) for c, z, gs, x in chosen}
    model_index = {m: i for i, m in enumerate(configs)}
    placeable = False
    for selection in (kb.fuller, kb.selection):  # the first that fits the per-level physical GPUs
        start: list[tuple[mip.Var, float]] = []
        use: dict[tuple, int] = {}
        for m, items in selection.items():
            for it in items:
                z, gs, x = index[it.config]
                start += [(z, 1.0), (x, it.xput)] + [(g, float(n)) for g, n in zip(gs, it.vgpus)]
                for d, (h, k, n) in enumerate(zip(it.config.template, it.config.levels, it.vgpus)):
                    key = gpu_key(h, k, model_index[m], d, sharing)
                    use[key] = use.get(key, 0) + n
        placeable = all(sum(-(-n // key[1]) for key, n in use.items() if key[0] == h) <= cluster.count(h)
                        for h in cluster.hardware)
        if placeable:
            for key, n in use.items():
                start.append((model.var_by_name(gpu_var(key)), float(-(-n // key[1]))))
            start.append((t, kb.t_lower))
            model.start = start
            break
    return {"knapsack_bound": kb.t_upper, "knapsack_start": placeable, "knapsack_s": dp_s,
            "knapsack_relaxation": "exact" if len(kb.hardware) == 2 else "surrogate"}


def _hybrid_meta(best: PipelinePlan, runs: list[PipelinePlan], used: str) -> PipelinePlan:
    """``best`` with the hybrid's combined status, bound, gap and time over the ``runs`` made."""
    bounds = [r.meta["bound"] for r in runs if r.meta.get("bound") is not None]
    obj = best.meta.get("objective")
    bound = min(bounds) if bounds else None
    gap = relative_gap(obj, bound)
    limit = best.meta.get("gap_limit")
    meta = dict(best.meta)
    meta.update(bound=bound, gap=gap, solve_s=sum(float(r.meta.get("solve_s", 0.0)) for r in runs),
                formulation="hybrid", hybrid_used=used)
    if meta.get("status") == "feasible" and gap is not None and limit is not None and gap <= limit + 1e-12:
        meta["status"] = "optimal"
    best.meta = meta
    return best


def _add_counts(model: mip.Model, n: int, c: Config, cluster: ClusterSpec) -> tuple[mip.Var, list[mip.Var], mip.Var]:
    """Eqs. 21–22, 25, 28 with integer vGPU counts ``g_{c,d}`` (formulation "counts")."""
    z = model.add_var(f"z_{n}", var_type=mip.BINARY)
    gs = []
    cap = min(xv * cluster.count(h) * k for h, k, xv in zip(c.template, c.levels, c.xput))
    for d, (h, k, xv) in enumerate(zip(c.template, c.levels, c.xput)):
        u = min(cluster.count(h) * k, math.ceil(cap / xv - 1e-9))  # more never raises x_c
        g = model.add_var(f"g_{n}_{d}", var_type=mip.INTEGER, lb=0, ub=u)
        model += g <= u * z
        model += g >= z
        gs.append(g)
    x = model.add_var(f"x_{n}", lb=0.0, ub=cap)
    model += x <= cap * z
    for g, xv in zip(gs, c.xput):
        model += x <= xv * g
    return z, gs, x


def _add_points(model: mip.Model, n: int, c: Config, counts: dict[str, int]) -> tuple[mip.Var, list[mip.Var], mip.Var]:
    """Same feasible throughputs via one binary per efficient vGPU vector (formulation "points").

    ``λ_{c,p} ∈ {0,1}``, ``Σ_p λ_{c,p} = z_c``, ``g_{c,d} = Σ_p g_{p,d}·λ_{c,p}``,
    ``x_c = Σ_p x_p·λ_{c,p}`` over :func:`.ppipe_configs.efficient_points`:
    an exact reformulation (every integer solution of Eqs. 21–28 is matched
    by one with the same x and no more vGPUs), whose branching on λ closes
    the bound far faster than branching on ``g`` on HC1-L (benchmark
    ``ppipe_milp_speed.py --formulation points``).
    """
    pts = efficient_points(c, counts)
    lam = [model.add_var(f"l_{n}_{p}", var_type=mip.BINARY) for p in range(len(pts))]
    z = model.add_var(f"z_{n}", var_type=mip.BINARY)
    model += z == mip.xsum(lam)
    gs = []
    for d in range(len(c.template)):
        g = model.add_var(f"g_{n}_{d}", lb=0.0)
        model += g == mip.xsum(pt[1][d] * v for pt, v in zip(pts, lam))
        gs.append(g)
    x = model.add_var(f"x_{n}", lb=0.0)
    model += x == mip.xsum(pt[0] * v for pt, v in zip(pts, lam))
    return z, gs, x


def _extract(chosen: list[tuple[Config, mip.Var, list[mip.Var], mip.Var]], res: SolveResult) -> list[Pipeline]:
    pipes = []
    for c, z, gs, _x in chosen:
        if res.values.get(z.name, 0.0) < 0.5:
            continue
        counts = [int(round(res.values[g.name])) for g in gs]
        stages = tuple(Stage(h, k, c.bounds[d], c.bounds[d + 1], n, c.latency_us[d], c.transfer_us[d], c.xput[d])
                       for d, (h, k, n) in enumerate(zip(c.template, c.levels, counts)))
        pipes.append(Pipeline(c.model, c.batch, _trim(stages)))
    return pipes


def fill_spare(pipes: list[Pipeline], cluster: ClusterSpec, sharing: bool) -> list[Pipeline]:
    """Hand the GPUs a plan leaves idle to stages that are not their pipeline's bottleneck.

    The authors' plans keep GPUs their MILP does not need inside pipeline
    stages (Gurobi has no reason to leave them out; e.g. their gcnet plan on
    L4–T4 runs a first stage needing 11 T4 on 17, its pipeline's throughput
    being its L4 stage's), and their simulator then spreads that stage's
    traffic over more GPUs and links. Which stage gets them is the solver's
    accident; here, deterministically, each idle GPU of a type goes, ``k``
    vGPUs at a time, to the stage of that type with the highest load
    ``pipeline throughput / stage throughput`` among the stages whose
    throughput exceeds their pipeline's (first in plan order on a tie), so
    every pipeline's throughput — the plan's objective — is unchanged. Each
    step adds exactly one physical GPU under either counting of
    :func:`shepherd.core.pipelines.plan.physical_gpus`; GPUs no such stage can
    take stay idle (documented choice, artifact rule set only).
    """
    from shepherd.core.pipelines.plan import PipelinePlan, physical_gpus

    pipes = list(pipes)
    for h in cluster.hardware:
        where = [(i, j) for i, p in enumerate(pipes) for j, s in enumerate(p.stages)
                 if s.hardware == h and len(p.stages) > 1 and s.xput > p.xput * (1 + 1e-9)]
        if not where:
            continue
        probe = PipelinePlan(pipes, cluster, {}, {}, 0.0, "", {"gpu_sharing": sharing})
        idle = cluster.count(h) - physical_gpus(probe, sharing).get(h, 0)
        for _ in range(max(idle, 0)):
            i, j = max(where, key=lambda ij: (pipes[ij[0]].xput / pipes[ij[0]].stages[ij[1]].xput,
                                              -ij[0], -ij[1]))
            p = pipes[i]
            s = p.stages[j]
            grown = Stage(s.hardware, s.k, s.start, s.end, s.vgpus + s.k, s.latency_us, s.transfer_us,
                          s.xput_per_vgpu)
            pipes[i] = Pipeline(p.model, p.batch, p.stages[:j] + (grown,) + p.stages[j + 1:])
    return pipes


def _trim(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """Drop vGPUs a stage has beyond what its pipeline's bottleneck needs (they would idle)."""
    target = min(s.xput for s in stages)
    out = []
    for s in stages:
        need = max(1, math.ceil(target / s.xput_per_vgpu - 1e-9))
        out.append(Stage(s.hardware, s.k, s.start, s.end, min(s.vgpus, need), s.latency_us, s.transfer_us,
                         s.xput_per_vgpu))
    return tuple(out)
