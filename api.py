"""The Python API: what the CLI does, as functions returning tables (``import shepherd``).

Each function here is what one command runs, without the printing:
:func:`load_trace` (``--trace``), :func:`load_profiles` (``--profiles``),
:func:`plan` (``shepherd plan``), :func:`simulate` (``shepherd simulate``),
:func:`sweep` (``shepherd sweep``) and :func:`capacity` (``shepherd capacity``).
Options keep the CLI's names and units (STYLE.md pattern 16: one meaning per
name): ``load`` is always a multiplier of the trace's native rate
(:func:`simulate`, :func:`capacity`), ``rate`` always requests/s (a named
trace's aggregate rate in :func:`load_trace`, as ``traces maf --rate`` and a
sweep's ``trace.rate``), ``slo_ms`` in ms, ``seed`` one int, ``seeds`` a list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

DEFAULT_PROFILES = "shepherd-v100"


def load_trace(spec: str | Path, *, seed: int = 0, rate: float | None = None, **options: Any) -> pl.DataFrame:
    """A trace frame (arrival_us, stream, model, slo_us, deadline_us) from a trace artifact or a named
    trace (``"maf-synthetic"``, ``"maf2019"`` …) built with ``options`` (``duration_min=1`` …).

    ``rate``: the aggregate arrival rate in requests/s (thinning or superposing the trace, as
    ``traces maf --rate``); ``load=`` is its deprecated spelling (a DeprecationWarning): ``load`` means a
    multiplier of the native rate everywhere else (:func:`simulate`)."""
    from shepherd.traces.resolve import load_trace as resolve

    return resolve(str(spec), seed=seed, **_rate_option(dict(options, rate=rate))).frame


def _rate_option(options: dict[str, Any]) -> dict[str, Any]:
    """``rate`` (req/s) → the trace builders' ``load`` option; the old ``load=`` keyword with a warning."""
    import warnings

    from shepherd.core.errors import UserError

    rate, old = options.pop("rate", None), options.pop("load", None)
    if old is not None:
        if rate is not None:
            raise UserError("give rate= (requests/s) or its deprecated spelling load=, not both")
        warnings.warn("the trace option load= is deprecated: use rate= (requests/s); load means a multiplier of the "
                      "native rate in simulate() and capacity()", DeprecationWarning, stacklevel=3)
        rate = old
    return options | ({"load": rate} if rate is not None else {})


def load_profiles(spec: str | Path = DEFAULT_PROFILES) -> pl.DataFrame:
    """A profiles frame: a built-in table (``"shepherd-v100"``, Shepherd Table 4) or a profiles artifact."""
    from shepherd.core import profiles as prof
    from shepherd.core.artifacts import read_artifact

    if Path(spec).is_file():
        return read_artifact(Path(spec), "profiles").frame
    return prof.load_builtin(str(spec))


def _trace(trace: Any, seed: int) -> pl.DataFrame:
    return trace if isinstance(trace, pl.DataFrame) else load_trace(trace, seed=seed)


def _profiles(profiles: Any) -> Any:
    if profiles is None:
        return load_profiles(DEFAULT_PROFILES)
    return load_profiles(profiles) if isinstance(profiles, (str, Path)) else profiles


def plan(trace: Any, *, planner: str = "herd", gpus: int = 36, profiles: Any = None, group_limit: int = 12,
         seed: int = 0, **options: Any) -> pl.DataFrame:
    """A plan frame (stream→group, model→group, group→workers) from a planner (Herd by default,
    Shepherd §4); ``options`` are fields of :class:`shepherd.solvers.planners.PlanRequest`."""
    from shepherd.solvers.backend import SolverConfig
    from shepherd.solvers.planners import PlanRequest, get_planner

    run = get_planner(planner)
    solver = options.pop("solver", None) or SolverConfig("highs", 60.0, 0.01).validate()
    request = PlanRequest(_trace(trace, seed), _profiles(profiles), gpus, solver, group_limit, **options)
    return run(request).frame


def simulate(trace: Any, *, policy: str = "flex", gpus: int | None = None, plan: Any = None, profiles: Any = None,
             load: float = 1.0, slo_ms: float | None = None, seed: int = 0,
             options: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """Run ``policy`` over ``trace`` (a frame, a file or a trace name) on ``gpus`` workers or a ``plan``;
    returns a :class:`~shepherd.core.engine.result.SimulationResult` (``.summary_frame()``,
    ``.requests_frame()`` …). ``options`` are the policy's config fields (``{"lam": 3.03}``)."""
    from shepherd.core.engine import simulate as run
    from shepherd.core.policies import registry

    config = registry.make_config(policy, dict(options or {}))
    frame = _trace(trace, seed)
    if isinstance(plan, (str, Path)) or (isinstance(profiles, (str, Path)) and Path(profiles).is_file()):
        # files by their artifact kind, as `shepherd simulate` reads them (plan or pipeline plan, block profiles …)
        from shepherd.core.sim_inputs import read_simulation_inputs

        builtin = "profiles" in registry.get(policy).cls.requires
        prof_path = Path(profiles) if isinstance(profiles, (str, Path)) and Path(profiles).is_file() else None
        plan_path = Path(plan) if isinstance(plan, (str, Path)) else None
        prof_obj, plan_obj, extra = read_simulation_inputs(prof_path, plan_path, frame, builtin)
        if prof_path is None and profiles is not None:
            prof_obj = _profiles(profiles)
        kwargs.setdefault("artifacts", extra)
        return run(frame, prof_obj, policy, config, gpus=gpus, plan=plan_obj if plan_path else plan, seed=seed,
                   load=load, slo_ms=slo_ms, **kwargs)
    return run(frame, _profiles(profiles), policy, config, gpus=gpus, plan=plan, seed=seed,
               load=load, slo_ms=slo_ms, **kwargs)


def sweep(config: str | Path, *, results: str | Path | None = None, overrides: Sequence[str] = (),
          executor: str = "local", jobs: int | None = None) -> pl.DataFrame:
    """Run a sweep config (see :mod:`shepherd.experiments.sweep`) and return its tidy results table
    (one row per cell: every parameter a column, the summary metrics beside). ``jobs``: local processes
    (default: every core, as on the CLI)."""
    import os

    from shepherd.experiments import runner
    from shepherd.experiments import sweep as sw

    cfg = sw.read_config(Path(config), list(overrides))
    grid = sw.cells(cfg)
    out = Path(results) if results is not None else Path("results/sweeps") / cfg.name
    runner.run_cells(grid, out, executor=executor, jobs=jobs or os.cpu_count() or 1)
    return sw.table(cfg, grid, out)


def capacity_sweep(config: str | Path, *, results: str | Path | None = None, overrides: Sequence[str] = (),
                   executor: str = "local", jobs: int | None = None) -> pl.DataFrame:
    """Run a sweep config's ``[capacity]`` grid (what ``shepherd capacity CONFIG`` runs, without the figure):
    one row per search (policy × grid point × seed × target) with the capacity, the binding model and its
    attainment at the capacity, and whether the target was monotone in load."""
    import os

    from shepherd.experiments import capacity_sweep as cs
    from shepherd.experiments import runner
    from shepherd.experiments import sweep as sw

    cfg = sw.read_config(Path(config), list(overrides))
    grid = cs.cells(cfg)
    out = Path(results) if results is not None else Path("results/capacity") / cfg.name
    runner.run_cells(grid, out, executor=executor, jobs=jobs or os.cpu_count() or 1)
    return cs.table(grid, out)


def capacity(trace: Any, *, target: str = "attainment=0.99", policy: str = "flex", gpus: int | None = None,
             plan: Any = None, profiles: Any = None, seeds: Sequence[int] | None = None, seed: int = 0,
             replicas: int = 1, slo_ms: float | None = None, options: Mapping[str, Any] | None = None,
             trace_options: Mapping[str, Any] | None = None, start: float = 1.0, rel_tol: float = 0.01,
             max_load: float = 1e4, probes: int = 3, **kwargs: Any) -> Any:
    """The highest load (multiplier of the trace's native rate) at which ``target`` holds
    (``attainment=0.99`` | ``p99-slo`` | ``goodput=0.95``), searched per seed by
    :func:`shepherd.core.capacity_search.search`; returns a :class:`~shepherd.core.capacity.Capacity`
    (``.per_seed``, ``.mean``, ``.half_width``, ``.brackets``, ``.searches`` — each with its binding model and
    monotonicity check). Seeds as on the CLI: ``seeds`` explicitly, else ``seed`` … ``seed + replicas − 1``.
    A trace name is rebuilt per seed with ``trace_options`` (``{"duration_min": 1}``); a trace file is used
    as is, or re-drawn per seed with ``trace_options={"redraw_window_s": 60}`` (:mod:`shepherd.traces.redraw`)."""
    from shepherd.core.capacity import Capacity, Target
    from shepherd.core.capacity_search import search
    from shepherd.core.errors import UserError

    goal = target if not isinstance(target, str) else Target.parse(target)
    chosen = list(seeds) if seeds is not None else list(range(seed, seed + replicas))
    if not chosen or len(set(chosen)) != len(chosen):
        raise UserError(f"capacity needs distinct seeds, got {chosen}")
    topts = _rate_option(dict(trace_options or {}))  # {"rate": req/s}, as in load_trace
    fixed = isinstance(trace, pl.DataFrame) or Path(str(trace)).exists()
    if fixed and len(chosen) > 1 and "redraw_window_s" not in topts:
        raise UserError("several seeds over a fixed trace (a file or a frame) would be identical replicas: pass "
                        "trace_options={'redraw_window_s': 60} to re-draw arrivals per seed, or one seed")
    prof = profiles if isinstance(profiles, (str, Path)) else _profiles(profiles)  # files: read by their kind
    found = {}
    for s in chosen:
        if isinstance(trace, pl.DataFrame):
            from shepherd.traces.redraw import redraw

            frame = redraw(trace, s, int(topts["redraw_window_s"] * 1e6)) if "redraw_window_s" in topts else trace
        else:
            frame = load_trace(trace, seed=s, **topts)

        def evaluate(load: float, frame: pl.DataFrame = frame, s: int = s) -> pl.DataFrame:
            return simulate(frame, policy=policy, gpus=gpus, plan=plan, profiles=prof, load=load,
                            slo_ms=slo_ms, seed=s, options=options, **kwargs).requests_frame()

        found[s] = search(evaluate, goal, start=start, rel_tol=rel_tol, max_load=max_load, probes=probes)
    return Capacity(goal, {s: f.bracket for s, f in found.items()}, searches=found)
