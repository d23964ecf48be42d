"""HERD: group model-streams and GPUs into serving groups — Shepherd §4, Table 2, constraints (a)–(e).

Objective: maximise t = min_i bt(i), bt(i) = Σ_j size_j·x_ij / n_i, over
model-streams i (§4 "HERD complexity": streams of one model are aggregated).

Formulation (the "group-size class" form; the paper omits its linearised ILP).
The direct big-M product form (:mod:`shepherd.solvers.herd_direct`) does not
scale: at 1000 model-streams × 100 groups it finds no solution in 60 s.
Here a model-stream's burst tolerance depends only on the *size* of its group,
so instead of naming groups we enumerate size classes s = 1…Ḡ per affinity set a:

* u[i,s] ∈ {0,1}: model-stream i sits in a group of size s   (d: Σ_s u[i,s] = 1)
* c[s,a] ∈ ℕ: number of groups of size s built from affinity set a   (e)
* max-min linearised with a free variable t: n_i·t ≤ Σ_s s·u[i,s]   (product gone:
  size·x is the constant s inside a class)
* (a) Σ s·c[s,a] ≤ N;  (b) s ≤ Ḡ by construction;
* (c) memory aggregated per class: Σ_{i∈a} mem_i·u[i,s] ≤ cap·c[s,a]
  — a relaxation (memory may split across a class's groups);
* every group hosts ≥ 1 model: c[s,a] ≤ Σ_{i∈a} u[i,s].

Packing repair: each class's models are placed into its c[s,a] real groups by
an any-fit rule (empty groups first, then the least loaded per GPU, among
groups with memory room); if that fails, by an exact small bin-packing MIP.
If the class's items truly need more than c groups, a valid cut is added —
c[s,a] ≥ (c+1)·(1 − Σ_{i∈items}(1 − u[i,s])) (any superset of those items
needs as many groups) — and the problem is re-solved. Cuts never remove a
real plan, so every round's bound is a valid upper bound and a converged
result is optimal. After ``MAX_CUT_ROUNDS`` the failing classes fall back to
capacity cap − max_mem, where any-fit provably succeeds (a group rejecting
an item is already fuller than cap − max_mem) — feasible, maybe not optimal.

Second phase (documented choice; the max-min objective is indifferent to idle
GPUs): with t held at its phase-one value, maximise the GPUs used, Σ s·c[s,a],
then (lexicographically) minimise the number of groups — larger groups
multiplex better (§3.1) — so e.g. 36 GPUs with Ḡ = 12 become three groups of 12.

Third phase (load balance; documented choice, §4's intent): bt(i) as printed,
size_j / n_i, counts only stream i's own demand, so the max-min objective is
indifferent to *how much* other demand shares i's group — yet bt is defined
"relative to the average-load based assignment of GPUs", which presumes every
group can carry its members' average load Σ n_i. Left to phases 1–2, classes
came out 0×…16× the cluster's mean demand per GPU (Fig. 10 at N = 400: most of
the offered load in a few 12-GPU groups while others idled). So, with t and
the class counts fixed, phase 3 minimises the largest class demand per GPU,
L (Σ_{i∈a} n_i·u[i,s] ≤ L·s·c[s,a]); then :func:`~shepherd.solvers.herd_packing.any_fit`
spreads each class over its groups heaviest-first to the least-loaded group,
so a group's demand per GPU is at most L plus its largest model-stream's n / s.
Balance therefore needs model-streams that are small next to a group: see
:func:`shepherd.solvers.demand.shard_streams` and
:func:`shepherd.solvers.demand.split_streams`. Phase 3 is capped at
``PHASE3_LIMIT_S``; without a solution by then phase 2's assignment stands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mip
import numpy as np

from shepherd.core.errors import UserError
from shepherd.solvers.affinity import affinity
from shepherd.solvers.backend import SolveResult, SolverConfig, new_model, relative_gap, solve
from shepherd.solvers.herd_packing import Group, any_fit, exact_pack


@dataclass(frozen=True)
class HerdConfig:
    """Cluster and constraint parameters of HERD (Shepherd §4, Table 2)."""

    gpus: int  # N
    group_limit: int = 12  # Ḡ (the paper's §7 setting)
    gpu_memory_mb: float = 16384.0  # mem: V100 16 GB (p3.2xlarge, §7)
    reserve_mb: float = 4096.0  # set aside for FLEX's batches (§4 "some memory set aside")
    affinity_k: float = math.inf  # K̄; ∞ = one affinity set (§7)

    @property
    def capacity_mb(self) -> float:
        return self.gpu_memory_mb - self.reserve_mb

    def validate(self) -> "HerdConfig":
        if self.gpus < 1:
            raise UserError(f"--gpus must be ≥ 1, got {self.gpus}")
        if self.group_limit < 1:
            raise UserError(f"--group-limit must be ≥ 1, got {self.group_limit}")
        if self.capacity_mb <= 0:
            raise UserError(f"--gpu-memory-mb ({self.gpu_memory_mb:g}) must exceed the reserve ({self.reserve_mb:g})")
        if not self.affinity_k >= 1:
            raise UserError(f"--affinity-k must be ≥ 1, got {self.affinity_k:g}")
        return self


@dataclass
class HerdInstance:
    """Model-streams to group: demand n_i (GPUs for average load), memory, affinity set."""

    models: list[str]
    demand: np.ndarray
    memory_mb: np.ndarray
    affinity_set: np.ndarray  # int set id per model


@dataclass
class HerdPlan:
    groups: list[Group]
    objective: float  # min bt over model-streams with demand > 0
    result: SolveResult
    rounds: int = 1
    phases: list[dict] = field(default_factory=list)


def min_burst_tolerance(inst: HerdInstance, groups: list[Group]) -> float:
    """min_i size(group of i) / n_i over model-streams with n_i > 0 (∞ if none)."""
    best = math.inf
    for g in groups:
        for i in g.models:
            if inst.demand[i] > 0:
                best = min(best, g.size / inst.demand[i])
    return best


#: The burst tolerance Herd is meant for: bt(i) is the load increase a stream tolerates "relative to the
#: average-load based assignment of GPUs" (Shepherd §4), so below 1 a model-stream's group cannot carry even
#: its average load — every plan is overloaded, and maximising t only ranks degrees of overload.
MIN_MEANT_TOLERANCE = 1.0


def tolerance_warning(t: float, demand: np.ndarray, cfg: HerdConfig) -> str | None:
    """A warning when the optimal min burst tolerance ``t`` is below :data:`MIN_MEANT_TOLERANCE`, else None."""
    if not (math.isfinite(t) and t < MIN_MEANT_TOLERANCE):
        return None
    need = float(demand.sum())
    widest = float(demand.max()) if demand.size else 0.0
    fixes = [f"add GPUs (the trace's average load needs ≈ {math.ceil(need)}; the cluster has {cfg.gpus})"]
    if widest > cfg.group_limit:
        fixes.append(f"raise --group-limit (a model-stream needs {widest:.3g} GPUs; groups hold ≤ {cfg.group_limit})")
    fixes.append("or lower the trace's load")
    return (f"min burst tolerance {t:.4g} is below {MIN_MEANT_TOLERANCE:g}, outside the range Herd is meant for "
            f"(Shepherd §4): some model-stream's group has {100 * t:.3g} % of the GPUs its average load needs, so "
            f"it is overloaded under any plan; {', '.join(fixes)}")


def _t_upper(inst: HerdInstance, cfg: HerdConfig) -> float:
    pos = inst.demand[inst.demand > 0]
    return cfg.group_limit / float(pos.min()) if pos.size else float(cfg.group_limit)


MAX_CUT_ROUNDS = 20
PHASE2_GAP = 1e-7  # phase 2's objective mixes two integer criteria; solve it (near) exactly
PHASE3_LIMIT_S = 10.0  # load balancing is a refinement: past this, phase 2's assignment stands

Cut = tuple[int, int, tuple[int, ...], int]  # (s, a, items, groups needed)


def _build(inst: HerdInstance, cfg: HerdConfig, solver: SolverConfig, safe: set[tuple[int, int]], cuts: list[Cut]):
    model = new_model(solver, mip.MAXIMIZE, "herd")
    sets = sorted(set(int(a) for a in inst.affinity_set))
    sizes = range(1, cfg.group_limit + 1)
    t = model.add_var("t", lb=0.0, ub=_t_upper(inst, cfg))
    u = {(i, s): model.add_var(f"u_{i}_{s}", var_type=mip.BINARY) for i in range(len(inst.models)) for s in sizes}
    members = {a: [i for i in range(len(inst.models)) if inst.affinity_set[i] == a] for a in sets}
    c = {(s, a): model.add_var(f"c_{s}_{a}", var_type=mip.INTEGER, lb=0, ub=min(len(members[a]), cfg.gpus // s))
         for a in sets for s in sizes}
    for i in range(len(inst.models)):
        model += mip.xsum(u[i, s] for s in sizes) == 1
        if inst.demand[i] > 0:
            model += float(inst.demand[i]) * t <= mip.xsum(s * u[i, s] for s in sizes)
    model += mip.xsum(s * c[s, a] for (s, a) in c) <= cfg.gpus
    for (s, a), cnt in c.items():
        cap = cfg.capacity_mb
        if (s, a) in safe:
            cap -= float(inst.memory_mb[members[a]].max())
        model += mip.xsum(float(inst.memory_mb[i]) * u[i, s] for i in members[a]) <= cap * cnt
        model += cnt <= mip.xsum(u[i, s] for i in members[a])
    for s, a, items, need in cuts:
        model += c[s, a] >= need * (1 - mip.xsum(1 - u[i, s] for i in items))
    model.objective = mip.maximize(t)
    return model, t, u, c, members


def solve_herd(inst: HerdInstance, cfg: HerdConfig, solver: SolverConfig) -> HerdPlan:
    """Solve HERD with the class formulation + packing repair (see module docstring)."""
    cfg.validate()
    _precheck(inst, cfg)
    safe: set[tuple[int, int]] = set()
    cuts: list[Cut] = []
    total = 0.0
    bound: float | None = None
    for rounds in range(1, MAX_CUT_ROUNDS + 2 + cfg.group_limit * (1 + int(inst.affinity_set.max(initial=0)))):
        remaining = SolverConfig(solver.name, max(solver.time_limit_s - total, 1e-3), solver.gap, solver.threads)
        model, t, u, c, members = _build(inst, cfg, solver, safe, cuts)
        res1 = solve(model, remaining)
        total += res1.solve_s
        if not res1.has_solution:
            status = res1.status if rounds == 1 or res1.status == "timeout" or not safe else "infeasible"
            return HerdPlan([], 0.0, _final(res1, None, total, solver, bound, status), rounds)
        if not safe and res1.bound is not None:
            bound = res1.bound if bound is None else min(bound, res1.bound)  # cuts are valid: bounds stay valid
        t_star = res1.objective or 0.0
        # Phase 2: keep t, use as many GPUs as possible.
        model += t >= t_star * (1 - 1e-9) - 1e-12
        weight = len(inst.models) + 1  # lexicographic: GPUs used first, then fewer (larger) groups
        model.objective = mip.maximize(mip.xsum((weight * s - 1) * v for (s, _), v in c.items()))
        remaining = SolverConfig(solver.name, max(solver.time_limit_s - total, 1e-3), PHASE2_GAP, solver.threads)
        res2 = solve(model, remaining)
        total += res2.solve_s
        res = res2 if res2.has_solution else res1
        res3 = _balance(model, inst, u, c, members, res, SolverConfig(
            solver.name, max(min(solver.time_limit_s - total, PHASE3_LIMIT_S), 1e-3), solver.gap, solver.threads))
        total += res3.solve_s
        res = res3 if res3.has_solution else res
        groups: list[Group] = []
        failed: set[tuple[int, int]] = set()
        for (s, a), var in sorted(c.items()):
            count = int(round(res.values.get(var.name, 0.0)))
            items = [i for i in members[a] if res.values.get(u[i, s].name, 0.0) > 0.5]
            if not count:
                continue
            packed = any_fit(inst, cfg, s, a, count, items)
            if packed is None:
                packed = exact_pack(inst, cfg, s, a, count, items, solver)
                if packed is None and rounds <= MAX_CUT_ROUNDS:
                    cuts.append((s, a, tuple(items), count + 1))
            if isinstance(packed, list):
                groups.extend(packed)
            else:
                failed.add((s, a))
        if not failed:
            objective = min_burst_tolerance(inst, groups)
            objective = objective if math.isfinite(objective) else t_star
            phases = [res1.metadata(), res2.metadata(), res3.metadata()]
            return HerdPlan(groups, objective, _final(res1, objective, total, solver, bound), rounds, phases)
        if rounds > MAX_CUT_ROUNDS or any(f not in {(s, a) for s, a, _, _ in cuts} for f in failed):
            safe |= failed
    raise UserError("herd: packing repair did not converge (memory too tight for the groups)")


def _balance(model: mip.Model, inst: HerdInstance, u, c, members, res: SolveResult,
             solver: SolverConfig) -> SolveResult:
    """Phase 3: with t and the class counts of phase 2 fixed, minimise the largest demand per GPU
    of any size class, L: Σ_{i∈a} n_i·u[i,s] ≤ L·s·c[s,a] (linear: c is fixed here)."""
    load = model.add_var("max_load_per_gpu", lb=0.0)
    for (s, a), var in c.items():
        count = int(round(res.values.get(var.name, 0.0)))
        model += var == count
        if count:
            model += mip.xsum(float(inst.demand[i]) * u[i, s] for i in members[a]) <= s * count * load
    model.objective = mip.minimize(load)
    return solve(model, solver)


def _final(res: SolveResult, objective: float | None, total: float, solver: SolverConfig,
           bound: float | None = None, status: str | None = None) -> SolveResult:
    if objective is None:
        return SolveResult(res.solver, status or res.status, None, bound, None, total)
    bound = res.bound if bound is None else bound
    gap = relative_gap(objective, bound)
    status = "optimal" if gap is not None and gap <= solver.gap + 1e-9 else "feasible"
    return SolveResult(res.solver, status, objective, bound, gap, total)


def _precheck(inst: HerdInstance, cfg: HerdConfig) -> None:
    """Clear messages for instances that are infeasible on their face."""
    if len(inst.models) == 0:
        raise UserError("herd: no model-streams to place (empty trace?)")
    too_big = [m for m, mb in zip(inst.models, inst.memory_mb) if mb > cfg.capacity_mb]
    if too_big:
        raise UserError(
            f"infeasible: model {too_big[0]} needs {inst.memory_mb[inst.models.index(too_big[0])]:g} MB, more than "
            f"the {cfg.capacity_mb:g} MB a GPU offers after the reserve (--gpu-memory-mb/--reserve-mb)"
        )


def verify(inst: HerdInstance, cfg: HerdConfig, groups: list[Group]) -> list[str]:
    """Check constraints (a)–(e); returns the violations (empty when the plan is valid)."""
    problems: list[str] = []
    if sum(g.size for g in groups) > cfg.gpus:
        problems.append("(a) more GPUs than the cluster has")
    seen: dict[int, int] = {}
    for j, g in enumerate(groups):
        if not 1 <= g.size <= cfg.group_limit:
            problems.append(f"(b) group {j} has {g.size} GPUs")
        if inst.memory_mb[g.models].sum() > cfg.capacity_mb + 1e-6:
            problems.append(f"(c) group {j} exceeds GPU memory")
        for i in g.models:
            seen[i] = seen.get(i, 0) + 1
            if inst.affinity_set[i] != g.affinity_set:
                problems.append(f"(e) model {inst.models[i]} outside its affinity set in group {j}")
    if sorted(seen) != list(range(len(inst.models))) or any(v != 1 for v in seen.values()):
        problems.append("(d) not every model-stream is in exactly one group")
    return problems


def pairwise_ok(alpha: np.ndarray, beta: np.ndarray, groups: list[Group], k_bar: float) -> bool:
    """(e) in its original form: every ordered pair in a group has A ≤ K̄."""
    for g in groups:
        for i in g.models:
            for j in g.models:
                if i != j and affinity(alpha[i], beta[i], alpha[j], beta[j]) > k_bar * (1 + 1e-12):
                    return False
    return True
