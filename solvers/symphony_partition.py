"""Symphony's model partitioning across sub-clusters — Appendix A, Eqs. (4)–(11), and the A.2 baseline.

Symphony §4.7 splits the models served by a cluster into disjoint sets, one per
sub-cluster (each served by one dispatcher thread, every backend of the
sub-cluster pre-loading all of its models). Appendix A.1 states the MILP,
for m models and l sub-clusters, x_ij = 1 when model i goes to sub-cluster j::

    minimise   ΔR + w·ΔS                                   (4)
    s.t.       Σ_i r_i x_ij ≤ R_max                  ∀j    (5)  dispatcher rate
               Σ_i s_i x_ij + max_i d_i x_ij ≤ S_max ∀j    (6)  backend memory
               |Σ_i r_i x_ij − R̄| ≤ ΔR               ∀j    (7)
               |Σ_i s_i x_ij − S̄| ≤ ΔS               ∀j    (8)
               Σ_j x_ij = 1                          ∀i    (9)
               x_ij ∈ {0, 1}                               (10)
               Σ_i Σ_j c_ij |x_ij − x'_ij| ≤ C_max         (11)  disruption vs. the previous X'

with R̄ = Σ r_i / l and S̄ = Σ s_i / l. A.2's baseline draws random partitions,
keeps the feasible one with the least objective (4), and stops at the same
time limit as the MILP (10 s in the paper). Partitions are judged by the
imbalance factor (max − min) / avg of the per-sub-cluster request rate and
static memory (A.2).

Ambiguities resolved here (each a documented choice, not the paper's text):

* **w** (A.1: "a coefficient that balances the request rate and model memory
  size", no value given). Default w = R̄ / S̄, so that the objective equals
  R̄·(ΔR/R̄ + ΔS/S̄): both deviations count as fractions of their averages and
  the choice does not depend on units (req/s vs MB). ``weight`` overrides it.
* **max in (6)**: linearised with one variable D_j per sub-cluster, D_j ≥ d_i·x_ij
  (D_j appears only on the ≤ side, so D_j = max_i d_i x_ij is attainable).
  Models sharing a dynamic memory value (zoo variants) form a class k with a
  binary z_jk, n_k·z_jk ≥ Σ_{i∈k} x_ij and D_j ≥ d_k·z_jk: exact for integer x
  and K·l rows instead of m·l (800 × 20 with 6 zoo models: 120, not 16 000). When
  Σ_i s_i + max_i d_i ≤ S_max, (6) holds for every partition and is left out of
  the model (it is still checked on the answer); likewise (5) when Σ_i r_i ≤ R_max.
* **|·| in (7), (8)** as two linear inequalities each; **(11)**: with X' a
  constant, |x_ij − x'_ij| is x_ij where x'_ij = 0 and 1 − x_ij where
  x'_ij = 1 — linear, no y variables needed.
* **c_ij** (A.1: "cost for loading/unloading model i to/from sub-cluster j",
  symmetric; no values given). Default c_ij = 1, so C_max counts load and unload
  operations (moving a model costs 2, placing a new model costs 1). A per-model
  vector (e.g. the static memory s_i, a proxy for load time) or an m × l matrix
  may be given. Models in X' but absent now (departed) unload whatever the
  partition; that constant is left out of (11). A model new in this epoch has
  x'_i· = 0 (its placement costs c_ij, unavoidably).
* **Symmetry breaking** (ours; sound): without X' the sub-clusters are
  interchangeable, so parts are labelled in order of first use along the models
  sorted by r_i/R̄ + s_i/S̄ (descending): the k-th model (k < l) may only use parts
  0…k. With X' given the labels matter and no such constraint is added.
* **Bounds on ΔR, ΔS** (ours; sound): the LP relaxation is 0 on every
  instance (x_ij = 1/l balances exactly), so ΔR and ΔS get the lower bounds of
  :mod:`shepherd.solvers.symphony_bounds` (pigeonhole on the largest models,
  integrality of MB sizes), valid for every integer assignment: the optimum of
  (4) is unchanged, the reported bound is at least their sum, and the plan
  records them (``floor*``).
* **Start** (ours): the MILP is handed a greedy partition (each model, largest
  first, to the feasible part where it least grows Σ_j (R_j/R̄)² + (S_j/S̄)²,
  which balances rate and memory at once; X' for kept
  models when X' is given) as a MIP start when that partition satisfies every
  constraint, improved first by the swap/move local search of
  :mod:`shepherd.solvers.symphony_swap` (not when Eq. (11) binds: then the
  greedy start that honours X'). Appendix A used CPLEX, whose primal
  heuristics find and improve such points on their own; HiGHS on 800 × 20
  finds none without a start in 10 s and, given one, never improves it (still
  at the root node after 60 s, measured), so at that scale the answer's
  quality is the start's and the solver contributes the bound. The start's
  time comes out of the solver's limit (the solver gets at least 10 % of it)
  and is counted in ``solve_s``. The plan records the start (``start``:
  "greedy" or "greedy+swaps"); ``start=False`` solves from scratch.
* **Random search**, brute force and A.2's instances live in
  :mod:`shepherd.solvers.symphony_baselines` (their choices documented there).
* **Imbalance factor** with avg = 0 (no load at all) is 0.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import mip
import numpy as np

from shepherd.core.errors import UserError
from shepherd.solvers.backend import SolveResult, SolverConfig, new_model, solve
from shepherd.solvers.symphony_bounds import objective_floor
from shepherd.solvers.symphony_swap import improve

PAPER_TIME_LIMIT_S = 10.0  # A.2: "which is 10 seconds in our current system"
TOL = 1e-6  # relative tolerance of constraint checks (solver feasibility tolerance)


@dataclass(frozen=True)
class PartitionInstance:
    """m models with rate r_i (req/s), static s_i and dynamic d_i memory (MB), split into l sub-clusters."""

    models: tuple[str, ...]
    rate: np.ndarray
    static_mb: np.ndarray
    dynamic_mb: np.ndarray
    parts: int  # l
    memory_cap_mb: float  # S_max
    rate_cap: float = math.inf  # R_max
    weight: float | None = None  # w; None: R̄ / S̄
    previous: np.ndarray | None = None  # X' as a part per model (−1: new model)
    move_cost: np.ndarray | None = None  # c: (m,) per model or (m, l); None: 1
    max_move_cost: float = math.inf  # C_max

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        for name in ("rate", "static_mb", "dynamic_mb"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=float))
        if self.previous is not None:
            object.__setattr__(self, "previous", np.asarray(self.previous, dtype=np.int64))

    @property
    def m(self) -> int:
        return len(self.models)

    @property
    def mean_rate(self) -> float:  # R̄
        return float(self.rate.sum()) / self.parts

    @property
    def mean_static(self) -> float:  # S̄
        return float(self.static_mb.sum()) / self.parts

    @property
    def w(self) -> float:
        if self.weight is not None:
            return float(self.weight)
        return self.mean_rate / self.mean_static if self.mean_static > 0 else 1.0

    def costs(self) -> np.ndarray:
        """c_ij as an m × l matrix."""
        if self.move_cost is None:
            return np.ones((self.m, self.parts))
        c = np.asarray(self.move_cost, dtype=float)
        return np.repeat(c[:, None], self.parts, axis=1) if c.ndim == 1 else c

    def validate(self) -> "PartitionInstance":
        """Reject input no partition can satisfy, one line each (UserError)."""
        if isinstance(self.parts, bool) or not isinstance(self.parts, (int, np.integer)) or self.parts < 1:
            raise UserError(f"number of sub-clusters must be an integer ≥ 1, got {self.parts}")
        if self.m == 0:
            raise UserError("no models to partition")
        if len(set(self.models)) != self.m:
            raise UserError("model names must be unique")
        for name, arr in (("rate", self.rate), ("static memory", self.static_mb), ("dynamic memory", self.dynamic_mb)):
            if arr.shape != (self.m,):
                raise UserError(f"{name} needs one value per model ({self.m}), got shape {arr.shape}")
            if not np.isfinite(arr).all() or (arr < 0).any():
                raise UserError(f"{name} must be finite and ≥ 0 for every model")
        if not (self.memory_cap_mb > 0) or math.isnan(self.memory_cap_mb):
            raise UserError(f"memory cap must be positive, got {self.memory_cap_mb:g} MB")
        if not (self.rate_cap > 0):
            raise UserError(f"rate cap must be positive, got {self.rate_cap:g} req/s")
        need = self.static_mb + self.dynamic_mb
        big = int(np.argmax(need))
        if need[big] > self.memory_cap_mb * (1 + TOL):
            raise UserError(
                f"memory cap {self.memory_cap_mb:g} MB is below model '{self.models[big]}' alone "
                f"(static {self.static_mb[big]:g} + dynamic {self.dynamic_mb[big]:g} = {need[big]:g} MB; Eq. 6)")
        fast = int(np.argmax(self.rate))
        if self.rate[fast] > self.rate_cap * (1 + TOL):
            raise UserError(f"rate cap {self.rate_cap:g} req/s is below model '{self.models[fast]}' alone "
                            f"({self.rate[fast]:g} req/s; Eq. 5)")
        if self.weight is not None and not (math.isfinite(self.weight) and self.weight >= 0):
            raise UserError(f"balance weight w must be finite and ≥ 0, got {self.weight}")
        if self.previous is not None:
            if self.previous.shape != (self.m,):
                raise UserError(f"previous assignment needs one part per model ({self.m})")
            if ((self.previous < -1) | (self.previous >= self.parts)).any():
                raise UserError(f"previous assignment names a sub-cluster outside 0…{self.parts - 1} (−1 = new model)")
        if self.move_cost is not None:
            c = np.asarray(self.move_cost, dtype=float)
            if c.shape not in ((self.m,), (self.m, self.parts)) or not np.isfinite(c).all() or (c < 0).any():
                raise UserError(f"move costs must be finite, ≥ 0, shaped ({self.m},) or ({self.m}, {self.parts})")
        if not (self.max_move_cost >= 0):
            raise UserError(f"disruption bound C_max must be ≥ 0, got {self.max_move_cost}")
        return self


@dataclass
class Loads:
    """Per-sub-cluster totals of one assignment."""

    rate: np.ndarray  # Σ r_i x_ij
    static_mb: np.ndarray  # Σ s_i x_ij
    dynamic_mb: np.ndarray  # max d_i x_ij (0 for an empty part)
    count: np.ndarray  # models per part

    @property
    def memory_mb(self) -> np.ndarray:  # left side of Eq. (6)
        return self.static_mb + self.dynamic_mb


@dataclass
class Partition:
    """An assignment (part per model) with the solve's metadata."""

    assignment: np.ndarray | None
    result: SolveResult
    method: str  # "milp" | "random"
    samples: int = 0  # random search: partitions drawn
    feasible_samples: int = 0
    start: str | None = None  # MILP: the start handed to the solver
    extra: dict = field(default_factory=dict)


def loads(inst: PartitionInstance, assignment: np.ndarray) -> Loads:
    a = np.asarray(assignment, dtype=np.int64)
    dyn = np.zeros(inst.parts)
    np.maximum.at(dyn, a, inst.dynamic_mb)
    return Loads(np.bincount(a, inst.rate, inst.parts), np.bincount(a, inst.static_mb, inst.parts), dyn,
                 np.bincount(a, minlength=inst.parts))


def imbalance(values: np.ndarray) -> float:
    """Imbalance factor (max − min) / avg across sub-clusters (A.2); 0 when avg = 0."""
    v = np.asarray(values, dtype=float)
    avg = float(v.mean())
    return float(v.max() - v.min()) / avg if avg > 0 else 0.0


def disruption(inst: PartitionInstance, assignment: np.ndarray) -> float:
    """Left side of Eq. (11): Σ_ij c_ij |x_ij − x'_ij| (0 without a previous assignment)."""
    if inst.previous is None:
        return 0.0
    a = np.asarray(assignment, dtype=np.int64)
    c = inst.costs()
    rows = np.arange(inst.m)
    moved = a != inst.previous
    kept_prev = inst.previous >= 0
    total = c[rows[moved], a[moved]].sum()  # load into the new part
    total += c[rows[moved & kept_prev], inst.previous[moved & kept_prev]].sum()  # unload from the old one
    return float(total)


def objective(inst: PartitionInstance, assignment: np.ndarray) -> float:
    """Eq. (4) at the smallest feasible ΔR, ΔS: max_j |R_j − R̄| + w·max_j |S_j − S̄|."""
    ld = loads(inst, assignment)
    return float(np.abs(ld.rate - inst.mean_rate).max() + inst.w * np.abs(ld.static_mb - inst.mean_static).max())


def verify(inst: PartitionInstance, assignment: np.ndarray | None) -> list[str]:
    """Check Eqs. (5), (6), (9)–(11) on an assignment; the violations (empty when valid)."""
    if assignment is None:
        return ["no assignment"]
    a = np.asarray(assignment)
    if a.shape != (inst.m,):
        return [f"(9) assignment has shape {a.shape}, not one part per model ({inst.m})"]
    if not np.issubdtype(a.dtype, np.integer) or ((a < 0) | (a >= inst.parts)).any():
        return [f"(9)/(10) a model is assigned outside sub-clusters 0…{inst.parts - 1}"]
    problems = []
    ld = loads(inst, a)
    for j in range(inst.parts):
        if ld.rate[j] > inst.rate_cap * (1 + TOL) + TOL:
            problems.append(f"(5) sub-cluster {j} rate {ld.rate[j]:.6g} > R_max {inst.rate_cap:g}")
        if ld.memory_mb[j] > inst.memory_cap_mb * (1 + TOL) + TOL:
            problems.append(f"(6) sub-cluster {j} memory {ld.memory_mb[j]:.6g} MB > S_max {inst.memory_cap_mb:g}")
    if math.isfinite(inst.max_move_cost):
        cost = disruption(inst, a)
        if cost > inst.max_move_cost * (1 + TOL) + TOL:
            problems.append(f"(11) disruption {cost:.6g} > C_max {inst.max_move_cost:g}")
    return problems


def summary(inst: PartitionInstance, assignment: np.ndarray) -> dict:
    """Imbalance factors and per-part totals of a valid assignment (what plans and Fig. 15 report)."""
    ld = loads(inst, assignment)
    return {
        "objective": objective(inst, assignment),
        "delta_rate": float(np.abs(ld.rate - inst.mean_rate).max()),
        "delta_static_mb": float(np.abs(ld.static_mb - inst.mean_static).max()),
        "imbalance_rate": imbalance(ld.rate),
        "imbalance_memory": imbalance(ld.static_mb),
        "disruption": disruption(inst, assignment),
        "part_rate": ld.rate.round(6).tolist(),
        "part_static_mb": ld.static_mb.round(6).tolist(),
        "part_memory_mb": ld.memory_mb.round(6).tolist(),
        "part_models": ld.count.tolist(),
    }


# --------------------------------------------------------------------------- greedy start

def _order(inst: PartitionInstance) -> np.ndarray:
    """Models by normalised size r_i/R̄ + s_i/S̄, largest first (ties: index)."""
    score = inst.rate / max(inst.mean_rate, 1e-300) + inst.static_mb / max(inst.mean_static, 1e-300)
    return np.lexsort((np.arange(inst.m), -score))


def greedy(inst: PartitionInstance) -> np.ndarray | None:
    """A start: X' for kept models, the rest largest-first to the least-loaded feasible part; None if stuck."""
    rate = np.zeros(inst.parts)
    stat = np.zeros(inst.parts)
    dyn = np.zeros(inst.parts)
    a = np.full(inst.m, -1, dtype=np.int64)
    if inst.previous is not None:
        for i in np.flatnonzero(inst.previous >= 0):
            j = int(inst.previous[i])
            a[i] = j
            rate[j] += inst.rate[i]
            stat[j] += inst.static_mb[i]
            dyn[j] = max(dyn[j], inst.dynamic_mb[i])
    rbar, sbar = max(inst.mean_rate, 1e-300), max(inst.mean_static, 1e-300)
    for i in _order(inst):
        if a[i] >= 0:
            continue
        ok = ((rate + inst.rate[i] <= inst.rate_cap)
              & (stat + inst.static_mb[i] + np.maximum(dyn, inst.dynamic_mb[i]) <= inst.memory_cap_mb))
        if not ok.any():
            return None
        # vector balancing: the part where adding i grows Σ_j (R_j/R̄)² + (S_j/S̄)² least
        load = np.where(ok, rate * inst.rate[i] / rbar**2 + stat * inst.static_mb[i] / sbar**2, np.inf)
        j = int(np.argmin(load))
        a[i] = j
        rate[j] += inst.rate[i]
        stat[j] += inst.static_mb[i]
        dyn[j] = max(dyn[j], inst.dynamic_mb[i])
    if inst.previous is None:
        a = _relabel(inst, a)
    return a if not verify(inst, a) else None


def _relabel(inst: PartitionInstance, a: np.ndarray) -> np.ndarray:
    """Parts renamed by first use along _order: the form the symmetry-breaking rows of the MILP accept."""
    first: dict[int, int] = {}
    for i in _order(inst):
        first.setdefault(int(a[i]), len(first))
    for j in range(inst.parts):
        first.setdefault(j, len(first))
    return np.array([first[int(j)] for j in a], dtype=np.int64)


def start_partition(inst: PartitionInstance) -> tuple[np.ndarray | None, str | None]:
    """The MIP start and its name: greedy, then pairwise swaps (symphony_swap) unless Eq. (11) binds."""
    g = greedy(inst)
    if g is None:
        return None, None
    name = "greedy" if inst.previous is None else "previous+greedy"
    if inst.previous is not None and math.isfinite(inst.max_move_cost):
        return g, name  # swaps would have to price every move against C_max: keep the start that honours X'
    better = improve(g, inst.rate, inst.static_mb, inst.dynamic_mb, inst.parts, inst.w, inst.rate_cap,
                     inst.memory_cap_mb)
    if inst.previous is None:
        better = _relabel(inst, better)
    if verify(inst, better) or objective(inst, better) >= objective(inst, g):
        return g, name
    return better, name + "+swaps"


# --------------------------------------------------------------------------- MILP

def solve_partition(inst: PartitionInstance, config: SolverConfig | None = None, *, start: bool = True) -> Partition:
    """Solve Eqs. (4)–(11) with the configured backend (``config.time_limit_s``; A.2 used 10 s)."""
    inst.validate()
    config = (config or SolverConfig(time_limit_s=PAPER_TIME_LIMIT_S)).validate()
    m, l = inst.m, inst.parts
    model = new_model(config, mip.MINIMIZE, "symphony-partition")
    x = [[model.add_var(f"x_{i}_{j}", var_type=mip.BINARY) for j in range(l)] for i in range(m)]
    floor_r, floor_s, floor = objective_floor(inst.rate, inst.static_mb, l, inst.w)
    # valid for every integer assignment (symphony_bounds); shaved by 1e-9 so rounding never cuts the optimum
    d_rate = model.add_var("dR", lb=floor_r * (1 - 1e-9))
    d_stat = model.add_var("dS", lb=floor_s * (1 - 1e-9))
    rbar, sbar = inst.mean_rate, inst.mean_static
    for i in range(m):  # (9)
        model += mip.xsum(x[i]) == 1, f"one_{i}"
    rate_binds = inst.rate.sum() > inst.rate_cap
    mem_binds = inst.static_mb.sum() + inst.dynamic_mb.max() > inst.memory_cap_mb
    by_value: dict[float, list[int]] = {}
    for i in range(m):
        if inst.dynamic_mb[i] > 0:
            by_value.setdefault(float(inst.dynamic_mb[i]), []).append(i)
    classes = sorted(by_value.items())
    for j in range(l):
        r_j = mip.xsum(float(inst.rate[i]) * x[i][j] for i in range(m) if inst.rate[i] > 0)
        s_j = mip.xsum(float(inst.static_mb[i]) * x[i][j] for i in range(m) if inst.static_mb[i] > 0)
        if rate_binds:  # (5)
            model += r_j <= inst.rate_cap, f"rate_cap_{j}"
        if mem_binds:  # (6) with D_j = max_i d_i x_ij
            dmax = model.add_var(f"D_{j}", lb=0.0, ub=float(inst.dynamic_mb.max()))
            for k, (value, members) in enumerate(classes):
                if len(members) == 1:
                    model += dmax >= value * x[members[0]][j], f"dyn_{members[0]}_{j}"
                else:  # z = 1 when part j holds any model of this dynamic-memory class
                    z = model.add_var(f"z_{k}_{j}", var_type=mip.BINARY)
                    model += len(members) * z >= mip.xsum(x[i][j] for i in members), f"any_{k}_{j}"
                    model += dmax >= value * z, f"dyn_class_{k}_{j}"
            model += s_j + dmax <= inst.memory_cap_mb, f"mem_cap_{j}"
        model += r_j - rbar <= d_rate, f"rate_hi_{j}"  # (7)
        model += rbar - r_j <= d_rate, f"rate_lo_{j}"
        model += s_j - sbar <= d_stat, f"stat_hi_{j}"  # (8)
        model += sbar - s_j <= d_stat, f"stat_lo_{j}"
    if inst.previous is not None and math.isfinite(inst.max_move_cost):  # (11)
        c = inst.costs()
        terms, const = [], 0.0
        for i in range(m):
            for j in range(l):
                if inst.previous[i] == j:
                    const += c[i, j]
                    terms.append(-float(c[i, j]) * x[i][j])
                elif c[i, j] > 0:
                    terms.append(float(c[i, j]) * x[i][j])
        model += mip.xsum(terms) <= inst.max_move_cost - const, "disruption"
    if inst.previous is None:  # symmetry breaking (module docstring)
        for k, i in enumerate(_order(inst)[: l - 1]):
            for j in range(k + 1, l):
                model += x[i][j] == 0, f"sym_{i}_{j}"
    model.objective = mip.minimize(d_rate + inst.w * d_stat)
    used = None
    start_s = 0.0
    if start:
        clock = time.perf_counter()
        g, used = start_partition(inst)
        start_s = time.perf_counter() - clock
        if g is not None:
            ld = loads(inst, g)
            model.start = ([(x[i][j], 1.0 if g[i] == j else 0.0) for i in range(m) for j in range(l)]
                           + [(d_rate, float(np.abs(ld.rate - rbar).max())),
                              (d_stat, float(np.abs(ld.static_mb - sbar).max()))]
                           + ([(model.var_by_name(f"D_{j}"), float(ld.dynamic_mb[j])) for j in range(l)]
                              if mem_binds else [])
                           + ([(model.var_by_name(f"z_{k}_{j}"), float((g[members] == j).any()))
                               for k, (_, members) in enumerate(classes) if len(members) > 1 for j in range(l)]
                              if mem_binds else []))
    # the start's time comes out of the limit, so start + solve stays within the window A.2 gives the MILP
    result = solve(model, replace(config, time_limit_s=max(config.time_limit_s - start_s, 0.1 * config.time_limit_s)))
    result.solve_s += start_s
    assignment = None
    if result.has_solution:
        xs = np.array([[result.values.get(f"x_{i}_{j}", 0.0) for j in range(l)] for i in range(m)])
        assignment = xs.argmax(axis=1).astype(np.int64)
        problems = verify(inst, assignment)
        if problems:  # pragma: no cover - a solver bug, not a user error
            raise AssertionError(f"symphony-partition MILP answer violates {problems}")
        result.objective = objective(inst, assignment)  # recomputed from the rounded x
        result.bound = min(max(result.bound if result.bound is not None else 0.0, floor), result.objective)
        result.gap = (result.objective - result.bound) / max(abs(result.objective), 1e-9)
    return Partition(assignment, result, "milp", start=used,
                     extra={"rate_cap_in_model": bool(rate_binds), "memory_cap_in_model": bool(mem_binds),
                            "floor_delta_rate": floor_r, "floor_delta_static_mb": floor_s, "floor": floor,
                            "start_s": start_s})
