"""A researcher's own grid: ``shepherd sweep CONFIG.toml`` (DESIGN.md "Experiments and report").

A TOML config names the trace, profiles, cluster (``gpus``) or plan, the
policies with their options, fixed run settings and a grid::

    name = "flex-vs-baselines"
    [trace]                     # a named trace and its options, or path = "trace.parquet"
    name = "maf-synthetic"
    duration_min = 1
    models = "ResNet50,BERT"    # streams → models round-robin (a list, or one comma-separated string)
    slo_from = "symphony-a100"  # optional: each model's SLO from this table (Symphony Table 6), any trace
    [cluster]
    gpus = 32                   # or plan = "plan.parquet"
    [[policies]]                # or policies = ["flex", "clockwork"]
    name = "flex"
    options = { lam = 3.03 }
    [run]                       # fixed settings: load, slo_ms, seed, max_batch, overhead, hardware
    max_batch = 128
    [grid]                      # every combination is one cell
    load = [1, 2, 4, 8]
    seed = [0, 1, 2]
    "policy.lam" = [2.0, 3.0]   # a policy option (for the policies that have it)
    "trace.synthetic_rate" = [1000, 3000]   # trace options as in `shepherd traces maf` (rate = --rate, req/s)

    [capacity]                  # optional: `shepherd capacity CONFIG.toml` (experiments/capacity_sweep.py)
    target = "attainment=0.99"  # or "goodput=0.95" (per request) or "p99-slo" (Symphony); or a list
    [capacity.grid]             # any axis but load (default: [grid] without load)
    slo_ms = [100, 150, 250]
    seed = [0, 1, 2]

Grid keys: ``load``, ``slo_ms``, ``seed``, ``gpus``, ``max_batch``,
``trace`` (trace names or files), ``profiles``, ``plan``, ``policy`` (labels of
the listed policies), ``trace.<option>`` and ``policy.<option>``.

The schema is :class:`shepherd.experiments.sweep_config.SweepFile` (``shepherd
sweep --schema`` prints it as JSON schema): ``trace.models`` is a list or one
comma-separated string; ``policies`` likewise. Everything a run would reject —
the trace's models against the *chosen* profile table, each policy's options,
the overhead mode, each input file's artifact kind — is checked before any cell
runs or any folder is made (:mod:`shepherd.experiments.sweep_checks`).

Seeds are real replicas. A named trace is rebuilt from each seed. A trace
*file* is fixed data, so a seed axis over it is refused unless
``trace.redraw_window_s`` is set: each seed then re-draws every arrival
uniformly within its stream's window of that many seconds (60: per-minute
counts kept; models and SLOs kept; :mod:`shepherd.traces.redraw`).

Each cell is one simulation; its key is the content hash of every parameter
that changes results — input *files* enter by the SHA-256 of their contents,
their paths travel under ``_``-prefixed keys that are not hashed
(:meth:`Cell.key`) — so a moved file keeps its cells and an edited one reruns
them. Cells run through :mod:`shepherd.experiments.runner` (resumable, local
processes or Ray) as the registered experiment ``sweep``, whose
:meth:`SweepExperiment.run_cell` reads everything from the cell's parameters.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any, Callable, Mapping

import polars as pl

from shepherd.core import bounds
from shepherd.core.errors import UserError
from shepherd.experiments.base import Cell, Experiment, Section
from shepherd.experiments.registry import register
from shepherd.experiments.sweep_config import (  # noqa: F401 - the config API, re-exported
    GRID_AXES,
    RUN_KEYS,
    PolicyEntry,
    SweepConfig,
    parse,
    read_config,
)

EXPERIMENT = "sweep"
RESULTS_NAME = "results.parquet"
CONFIG_NAME = "sweep.json"  # the resolved config: marks a folder as a sweep's results
LOG_NAME = "sweep.log"
DEFAULT_PROFILES = "shepherd-v100"


# --------------------------------------------------------------------------- expansion

def _file_param(spec: str | None, base_dir: Path, builtin: set[str] | None = None) -> dict:
    """A file input as cell parameters: its name, SHA-256 of its contents and its path (not hashed)."""
    from shepherd.core.artifacts import sha256_file

    if spec is None:
        return {"name": None, "sha256": None, "path": None}
    path = Path(spec) if Path(spec).is_absolute() else base_dir / spec
    if path.is_file():
        return {"name": path.name, "sha256": sha256_file(path), "path": str(path.resolve())}
    if builtin is not None and spec in builtin:
        return {"name": spec, "sha256": None, "path": None}
    raise UserError(f"{spec}: no such file" + (f" (nor a built-in table: {', '.join(sorted(builtin))})" if builtin else ""))


def _named_options(trace_opts: dict) -> dict:
    """A named trace's own options (:class:`~shepherd.traces.registry.TraceOptions`), without those
    :func:`~shepherd.traces.resolve.load_trace` applies to any trace (``slo_from``)."""
    return {k: v for k, v in trace_opts.items() if k != "slo_from"}


def _check_slo_from(table: str, slo_ms: float | None) -> None:
    """``trace.slo_from`` names a built-in table with per-model SLOs, and no uniform SLO overrides them."""
    from shepherd.core import profiles as prof
    from shepherd.traces.slos import table_slos, tables_with_slos

    if table not in prof.table_names():
        raise UserError(f"trace.slo_from = '{table}': not a built-in profile table (with per-model SLOs: "
                        f"{', '.join(tables_with_slos())})")
    table_slos(table)
    if slo_ms is not None:
        raise UserError(f"trace.slo_from = '{table}' gives each model its SLO; slo_ms = {slo_ms:g} would override "
                        "them all: drop one")


def cells(config: SweepConfig) -> list[Cell]:
    """The grid, expanded: one :class:`Cell` per combination, in the config's order."""
    from shepherd.core import profiles as prof
    from shepherd.traces import registry as traces

    axes = list(config.grid)
    size = len(config.policies) * math.prod(len(config.grid[a]) for a in axes)
    bounds.check_bound("grid_cells", size, f"the grid's size ({len(config.policies)} policies × "
                       + " × ".join(f"{len(config.grid[a])} {a}" for a in axes) + " cells)")
    combos = list(itertools.product(*(config.grid[a] for a in axes))) if axes else [()]
    by_label = {p.label: p for p in config.policies}
    files: dict[tuple, dict] = {}

    def file_param(kind: str, spec: str | None) -> dict:
        if (kind, spec) not in files:
            builtin = set(prof.table_names()) if kind == "profiles" else None
            files[(kind, spec)] = _file_param(spec, config.base_dir, builtin)
        return files[(kind, spec)]

    out: list[Cell] = []
    for combo in combos:
        point = dict(zip(axes, combo))
        for entry in config.policies:
            if "policy" in point and point["policy"] != entry.label:
                continue
            options = dict(entry.options)
            for key, value in point.items():
                if key.startswith("policy."):
                    option = key.split(".", 1)[1]
                    if option in {f.name for f in dataclasses.fields(_config_cls(entry.name))}:
                        options[option] = value
            trace_spec = point.get("trace", config.trace.get("name") or config.trace.get("path"))
            trace_opts = {k: v for k, v in config.trace.items() if k not in ("name", "path")}
            trace_opts.update({k.split(".", 1)[1]: v for k, v in point.items() if k.startswith("trace.")})
            if "rate" in trace_opts:  # --rate of `traces maf`: the trace options call it load (req/s)
                trace_opts["load"] = trace_opts.pop("rate")
            if traces.lookup(str(trace_spec)) is not None and not (config.base_dir / str(trace_spec)).is_file():
                trace = {"name": trace_spec, "sha256": None, "path": None}
                if "redraw_window_s" in trace_opts:
                    raise UserError(f"trace.redraw_window_s re-draws a trace FILE per seed; '{trace_spec}' is a "
                                    "named trace, already drawn afresh from each seed: drop the option")
                key = repr(sorted(trace_opts.items()))
                if key not in files:  # a bad trace option fails here, before any cell runs
                    traces.TraceOptions.from_kwargs(**_named_options(trace_opts)).validate()
                    files[key] = {}
            else:
                trace = file_param("trace", trace_spec)
            gpus = point.get("gpus", config.gpus)
            plan_spec = point.get("plan", config.plan if "gpus" not in point else None)
            plan = file_param("plan", plan_spec) if plan_spec else {"name": None, "sha256": None, "path": None}
            profiles = file_param("profiles", point.get("profiles", config.profiles or DEFAULT_PROFILES))
            run = {"load": 1.0, "slo_ms": None, "seed": 0, "max_batch": None, "overhead": None, "hardware": None}
            run.update(config.run)
            run.update({k: v for k, v in point.items() if k in RUN_KEYS})
            if trace_opts.get("slo_from") is not None:
                _check_slo_from(trace_opts["slo_from"], run["slo_ms"])
            # A file enters by its contents (sha256); its name and path are locations (``_`` keys: not hashed).
            params = {
                "policy": entry.label, "policy_name": entry.name, "options": options,
                "trace": None if trace["sha256"] else trace["name"], "trace_options": trace_opts,
                "trace_sha256": trace["sha256"],
                "profiles": None if profiles["sha256"] else profiles["name"], "profiles_sha256": profiles["sha256"],
                "gpus": None if plan["name"] else gpus, "plan_sha256": plan["sha256"],
                **run,
                "_sweep": config.name, "_trace_name": trace["name"], "_profiles_name": profiles["name"],
                "_plan_name": plan["name"],
                "_trace_path": trace["path"], "_profiles_path": profiles["path"], "_plan_path": plan["path"],
            }
            out.append(Cell(EXPERIMENT, params))
    if not out:
        raise UserError("the grid is empty: no policy matches grid.policy")
    keys = [c.key() for c in out]
    if len(set(keys)) != len(keys):
        raise UserError("the grid repeats a cell (two policies with the same name and options?)")
    check_replicas(out)
    from shepherd.experiments.sweep_checks import check

    check(out)
    return out


def check_replicas(grid: list[Cell]) -> None:
    """Refuse seeds that would replicate nothing: a seed axis over a trace FILE without ``trace.redraw_window_s``
    gives the same arrivals under every seed (see :mod:`shepherd.traces.redraw`)."""
    seeds: dict[str, set] = {}
    for cell in grid:
        p = cell.params
        if p["trace_sha256"] is None or "redraw_window_s" in p["trace_options"]:
            continue
        rest = repr(sorted((k, v) for k, v in p.items() if k != "seed" and not k.startswith("_")))
        seeds.setdefault(rest, set()).add(p["seed"])
        if len(seeds[rest]) > 1:
            raise UserError(f"seeds over the trace file {p['_trace_name']} would be identical replicas: set "
                            "trace.redraw_window_s = 60 (each seed re-draws every arrival within its stream's "
                            "minute, counts, models and SLOs kept) or use one seed")


def _config_cls(policy: str) -> type:
    from shepherd.core.policies import registry

    return registry.get(policy).config_cls


def swept(config: SweepConfig) -> list[str]:
    """Columns that vary over the grid (axes with more than one value), in config order."""
    return [k for k, v in config.grid.items() if len(v) > 1]


# --------------------------------------------------------------------------- one cell

@dataclasses.dataclass
class Prepared:
    """A cell's inputs, read once (trace, profiles, plan, policy config): :meth:`run` simulates at any load."""

    params: Mapping[str, Any]
    loaded: Any
    run: Callable[[float], Any]
    config: Any


def prepare(p: Mapping[str, Any]) -> Prepared:
    """Read a cell's inputs from its parameters alone; ``.run(load)`` simulates them at ``load``."""
    from shepherd.core import profiles as prof
    from shepherd.core.engine import simulate as run_simulation
    from shepherd.core.policies import registry
    from shepherd.core.sim_inputs import read_simulation_inputs
    from shepherd.traces.resolve import load_trace

    spec = registry.get(p["policy_name"])
    config = registry.make_config(p["policy_name"], dict(p["options"]))
    if hasattr(config, "validate"):
        config.validate()
    loaded = load_trace(p["_trace_path"] or p["_trace_name"], seed=int(p["seed"]), **dict(p["trace_options"]))
    if loaded.frame.height == 0:
        raise UserError(f"trace {loaded.name} has no requests")
    max_batch = p["max_batch"] or prof.DEFAULT_MAX_BATCH
    builtin = "profiles" in spec.cls.requires
    profiles_path = Path(p["_profiles_path"]) if p["_profiles_path"] else None
    other_table = builtin and profiles_path is None and p["_profiles_name"] != DEFAULT_PROFILES
    prof_obj, plan_obj, extra = read_simulation_inputs(profiles_path, Path(p["_plan_path"]) if p["_plan_path"] else None,
                                             loaded.frame, builtin and not other_table)
    if other_table:  # a built-in table other than the default: the trace's models are checked against it
        from shepherd.experiments.sweep_checks import check_models

        prof_obj = prof.load_builtin(p["_profiles_name"], max_batch)
        check_models(loaded.frame["model"].unique().to_list(), prof_obj["model"].unique().to_list(),
                     p["_profiles_name"])
    ovh = spec.cls.default_overhead
    if p["overhead"]:
        ovh = dataclasses.replace(ovh, mode=p["overhead"])
        ovh.validate()

    def run(load: float) -> Any:
        return run_simulation(loaded.frame, prof_obj, p["policy_name"], config, gpus=p["gpus"], plan=plan_obj,
                              artifacts=extra, seed=int(p["seed"]), load=float(load), slo_ms=p["slo_ms"],
                              overhead=ovh, max_batch=max_batch, hardware=p["hardware"])

    return Prepared(p, loaded, run, config)


def run_params(p: Mapping[str, Any]) -> pl.DataFrame:
    """Simulate one cell from its parameters alone; the one-row summary with its run columns."""
    from shepherd.core.runinfo import with_run_columns

    prepared = prepare(p)
    summary = prepared.run(float(p["load"])).summary_frame()
    return with_run_columns(summary, policy=p["policy"], trace=prepared.loaded.name, load=p["load"],
                            slo_ms=p["slo_ms"], seed=p["seed"], gpus=p["gpus"], plan=p["_plan_name"],
                            config=dataclasses.asdict(prepared.config), synthetic=prepared.loaded.synthetic)


class SweepExperiment(Experiment):
    """The generic experiment behind ``shepherd sweep``: a cell is one simulation named by its parameters."""

    name = EXPERIMENT
    paper = ""
    title = "a sweep from a config file"

    def cells(self, scale):  # noqa: ANN001 - no grid of its own
        raise UserError("the sweep experiment's grid comes from a config: run `shepherd sweep CONFIG.toml`")

    def run_cell(self, params: Mapping[str, Any]) -> pl.DataFrame:
        return run_params(params)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments.sweep_report import draw

        return draw(results, figures_dir)


SWEEP = register(SweepExperiment())


# --------------------------------------------------------------------------- the table

METRIC_COLUMNS = ("slo_attainment", "goodput_rps", "p99_latency_ms", "utilization", "drop_rate", "mean_batch")


def flat_params(cell: Cell) -> dict:
    """A cell's parameters as flat columns: options as ``option.<k>``, trace options as ``trace.<k>``;
    locations (``_``-keys) left out."""
    p = cell.params
    params = {"sweep": p.get("_sweep")}
    params.update({k: v for k, v in p.items() if not k.startswith("_") and k not in ("options", "trace_options")})
    for name in ("trace", "profiles", "plan"):  # files by their name
        params[name] = p.get(f"_{name}_name")
    params.update({f"option.{k}": v for k, v in p["options"].items()})
    params.update({f"trace.{k}": v for k, v in p["trace_options"].items()})
    return params


def table(config: SweepConfig, grid: list[Cell], results_dir: Path) -> pl.DataFrame:
    """One row per finished cell: every parameter a column (options as ``option.<k>``,
    trace options as ``trace.<k>``), the summary metrics beside, and ``cell`` (its key)."""
    from shepherd.experiments.runner import read_cell

    rows = []
    for cell in grid:
        frame = read_cell(cell, results_dir)
        if frame is None:
            continue
        params = flat_params(cell)
        row = frame.row(0, named=True)
        row.pop("seed", None)
        for k in ("policy", "trace", "load", "slo_ms"):
            row.pop(k, None)
        rows.append({**params, **row, "cell": cell.key()})
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows, infer_schema_length=None)
