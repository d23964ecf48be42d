"""Solver seam: formulations are written once against python-mip; the backend is a name.

Backends (DESIGN.md "Planners"):

* ``highs`` (default) — python-mip with ``solver_name="HIGHS"``; python-mip
  loads the HiGHS library shipped by ``highspy``, so highspy is a runtime
  dependency.
* ``cbc`` — python-mip's bundled CBC.
* ``gurobi`` — through ``gurobipy`` only. The pip-bundled Gurobi licence does
  not work through python-mip and caps a model at 2000 variables and 2000
  linear constraints (error 10010 at optimize()), so the model built with
  python-mip is exported to an LP file, read by gurobipy and solved there,
  after a size check with a clear message.

Facts the seam respects: python-mip silently picks Gurobi whenever gurobipy is
installed, so the solver name is *always* passed explicitly; python-mip's
default relative gap is 1e-4, so the gap is always set from the config.

Every solve returns a :class:`SolveResult` with status
(``optimal`` / ``feasible`` / ``infeasible`` / ``timeout``), objective, best
bound, relative gap and wall-clock solve time — what every plan records.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import mip

from shepherd.core.errors import UserError

GUROBI_PIP_LIMIT = 2000  # variables and linear constraints under the pip licence


@dataclass(frozen=True)
class SolverConfig:
    """Which backend solves a formulation, and how hard it tries."""

    name: str = "highs"
    time_limit_s: float = 60.0
    gap: float = 0.01  # relative MIP gap at which a solve stops as "optimal"
    threads: int = 0  # 0 = the backend's default
    max_solutions: int = 0  # stop after this many feasible solutions (0 = no limit)
    #: HiGHS ``mip_heuristic_effort`` (share of the search spent in primal heuristics); 0 = the backend's
    #: default (HiGHS: 0.05). Other backends ignore it
    heuristic_effort: float = 0.0

    def validate(self) -> "SolverConfig":
        if self.name not in BACKENDS:
            raise UserError(f"unknown solver '{self.name}' (known: {', '.join(BACKENDS)})")
        if not self.time_limit_s > 0:
            raise UserError(f"--time-limit must be positive, got {self.time_limit_s:g}")
        if not 0 <= self.gap < 1:
            raise UserError(f"--gap must be in [0, 1), got {self.gap:g}")
        if self.max_solutions < 0:
            raise UserError(f"--max-solutions must be ≥ 0, got {self.max_solutions}")
        if not 0 <= self.heuristic_effort <= 1:
            raise UserError(f"heuristic effort must be in [0, 1], got {self.heuristic_effort:g}")
        return self


@dataclass
class SolveResult:
    """Outcome of one solve, as recorded in a plan's metadata."""

    solver: str
    status: str  # optimal | feasible | infeasible | timeout
    objective: float | None
    bound: float | None
    gap: float | None
    solve_s: float
    values: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "feasible")

    def metadata(self) -> dict[str, Any]:
        meta = asdict(self)
        meta.pop("values")
        return meta


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """|bound − objective| / max(|objective|, 1e-9); None without a solution."""
    if objective is None or bound is None or not math.isfinite(bound):
        return None
    return abs(bound - objective) / max(abs(objective), 1e-9)


_PREFLIGHT_OK: set[str] = set()

FIXES = {
    "highs": "reinstall the tested versions: pip install -c requirements.lock -e .  (python-mip 2.0 loads highspy 1.15, not 1.16)",
    "cbc": "reinstall python-mip from the lock: pip install -c requirements.lock --force-reinstall mip cbcbox",
    "gurobi": "pip install -c requirements.lock gurobipy (its pip licence caps a model at 2000 variables), or use --solver highs",
}


def preflight(name: str) -> None:
    """Fail fast: load backend ``name`` and solve a one-variable MILP (well under 2 s).

    Called by every command that will solve, before any long work, so a broken
    solver build (highspy 1.16 beside python-mip 2.0 silently disabled HiGHS)
    is one line naming the fix instead of a failure after minutes of compute.
    A backend that passed once in this process is not checked again.
    """
    config = SolverConfig(name=name, time_limit_s=2.0, gap=0.0).validate()
    if name in _PREFLIGHT_OK:
        return
    try:
        model = new_model(config, mip.MAXIMIZE, "preflight")
        x = model.add_var("x", var_type=mip.INTEGER, lb=0, ub=7)
        model += 2 * x <= 9
        model.objective = mip.maximize(x)
        result = solve(model, config)
    except UserError as exc:  # python-mip's own hint (a bare pip install) would not take the lock: ours replaces it
        cause = str(exc).split(" Please install")[0]
        raise UserError(f"{cause}; fix: {FIXES[name]}") from None
    except FileNotFoundError:  # python-mip found no library for it (its text suggests a bare pip install)
        raise UserError(f"solver backend '{name}' cannot load its native library; fix: {FIXES[name]}") from None
    except Exception as exc:  # noqa: BLE001 - a broken native library raises anything
        raise UserError(f"solver backend '{name}' failed a one-variable test solve ({_first_line(exc)}); "
                        f"fix: {FIXES[name]}") from None
    if result.status != "optimal" or result.objective is None or round(result.objective) != 4:
        raise UserError(f"solver backend '{name}' solved max x s.t. 2x ≤ 9, x integer, as {result.objective} "
                        f"({result.status}), not 4; fix: {FIXES[name]}")
    _PREFLIGHT_OK.add(name)


def new_model(config: SolverConfig, sense: str = mip.MAXIMIZE, name: str = "plan") -> mip.Model:
    """An empty python-mip model for ``config``'s backend (CBC model for a gurobi export)."""
    config.validate()
    inner = "CBC" if config.name in ("cbc", "gurobi") else "HIGHS"
    try:
        model = mip.Model(name=name, sense=sense, solver_name=inner)
    except Exception as exc:  # noqa: BLE001 - python-mip raises bare Exceptions on load failure
        raise UserError(f"solver backend '{config.name}' is not available: {_first_line(exc)}") from None
    model.verbose = 0
    model.max_mip_gap = config.gap
    model.max_mip_gap_abs = 1e-9
    if config.threads:
        model.threads = config.threads
    return model


def solve(model: mip.Model, config: SolverConfig) -> SolveResult:
    """Optimise ``model`` with the configured backend; never raises for infeasibility."""
    return BACKENDS[config.name](model, config)


def _python_mip(model: mip.Model, config: SolverConfig) -> SolveResult:
    model.max_mip_gap = config.gap
    if config.heuristic_effort > 0 and config.name == "highs":
        # python-mip has no public setter for this HiGHS option; its HiGHS wrapper's own option call
        model.solver._set_double_option_value("mip_heuristic_effort", config.heuristic_effort)
    start = time.perf_counter()
    limits = {"max_solutions": config.max_solutions} if config.max_solutions > 0 else {}
    status = model.optimize(max_seconds=config.time_limit_s, **limits)
    elapsed = time.perf_counter() - start
    has = status in (mip.OptimizationStatus.OPTIMAL, mip.OptimizationStatus.FEASIBLE) and model.num_solutions > 0
    objective = float(model.objective_value) if has else None
    bound = float(model.objective_bound) if has and model.objective_bound is not None else None
    gap = relative_gap(objective, bound)
    if status == mip.OptimizationStatus.OPTIMAL:
        word = "optimal"
    elif has:
        word = "optimal" if gap is not None and gap <= config.gap + 1e-12 else "feasible"
    elif status in (mip.OptimizationStatus.INFEASIBLE, mip.OptimizationStatus.INT_INFEASIBLE):
        word = "infeasible"
    else:
        word = "timeout"
    values = {v.name: float(v.x) for v in model.vars} if has else {}
    return SolveResult(config.name, word, objective, bound, gap, elapsed, values)


def _gurobi(model: mip.Model, config: SolverConfig) -> SolveResult:
    try:
        import gurobipy as gp  # type: ignore[import-not-found]
    except ImportError:
        raise UserError("solver 'gurobi' needs the gurobipy package (pip install gurobipy)") from None
    nvars, ncons = model.num_cols, model.num_rows
    licence_cap = os.environ.get("SHEPHERD_GUROBI_FULL_LICENCE") is None
    if licence_cap and (nvars > GUROBI_PIP_LIMIT or ncons > GUROBI_PIP_LIMIT):
        raise UserError(
            f"model has {nvars} variables and {ncons} constraints; the pip Gurobi licence allows "
            f"{GUROBI_PIP_LIMIT} of each (set SHEPHERD_GUROBI_FULL_LICENCE=1 with a full licence, "
            "or use --solver highs)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.lp")
        model.write(path)  # LP keeps the objective sense (MPS export from CBC drops maximise)
        try:
            env = gp.Env(params={"OutputFlag": 0})
            gm = gp.read(path, env=env)
        except gp.GurobiError as exc:
            raise UserError(f"gurobi could not load the model: {exc}") from None
    gm.Params.TimeLimit = config.time_limit_s
    gm.Params.MIPGap = config.gap
    if config.threads:
        gm.Params.Threads = config.threads
    start = time.perf_counter()
    try:
        gm.optimize()
    except gp.GurobiError as exc:
        raise UserError(f"gurobi failed: {exc}") from None
    elapsed = time.perf_counter() - start
    has = gm.SolCount > 0
    objective = float(gm.ObjVal) if has else None
    bound = float(gm.ObjBound) if has else None
    if gm.Status == gp.GRB.OPTIMAL:
        word = "optimal"
    elif gm.Status in (gp.GRB.INFEASIBLE, gp.GRB.INF_OR_UNBD):
        word = "infeasible"
    else:
        word = "feasible" if has else "timeout"
    values = {v.VarName: float(v.X) for v in gm.getVars()} if has else {}
    return SolveResult("gurobi", word, objective, bound, relative_gap(objective, bound), elapsed, values)


BACKENDS: dict[str, Callable[[mip.Model, SolverConfig], SolveResult]] = {
    "highs": _python_mip,
    "cbc": _python_mip,
    "gurobi": _gurobi,
}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
