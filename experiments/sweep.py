"""A researcher's own grid: ``shepherd sweep CONFIG.toml`` (DESIGN.md "Experiments and report").

A TOML config names the trace, profiles, cluster (``gpus``) or plan, the
policies with their options, fixed run settings and a grid::

    name = "flex-vs-baselines"
    [trace]                     # a named trace and its options, or path = "trace.parquet"
    name = "maf-synthetic"
    duration_min = 1
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

Grid keys: ``load``, ``slo_ms``, ``seed``, ``gpus``, ``max_batch``,
``trace`` (trace names or files), ``profiles``, ``plan``, ``policy`` (labels of
the listed policies), ``trace.<option>`` and ``policy.<option>``.

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
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from shepherd.core.errors import UserError
from shepherd.experiments.base import Cell, Experiment, Section
from shepherd.experiments.registry import register

EXPERIMENT = "sweep"
RESULTS_NAME = "results.parquet"
CONFIG_NAME = "sweep.json"  # the resolved config: marks a folder as a sweep's results
LOG_NAME = "sweep.log"
TOP_KEYS = ("name", "trace", "profiles", "cluster", "policies", "run", "grid")
RUN_KEYS = {"load": float, "slo_ms": float, "seed": int, "max_batch": int, "overhead": str, "hardware": str}
CLUSTER_KEYS = ("gpus", "plan")
GRID_AXES = {"load": float, "slo_ms": float, "seed": int, "gpus": int, "max_batch": int,
             "trace": str, "profiles": str, "plan": str, "policy": str}
DEFAULT_PROFILES = "shepherd-v100"


def _kind(value: Any, want: type, where: str) -> Any:
    """``value`` as ``want`` (int → float allowed), or a one-line error naming ``where``."""
    ok = (isinstance(value, want) and not isinstance(value, bool)) or \
        (want is float and isinstance(value, int) and not isinstance(value, bool)) or \
        (want is bool and isinstance(value, bool))
    if not ok:
        name = {float: "a number", int: "an integer", str: "a string", bool: "true or false"}.get(want, want.__name__)
        raise UserError(f"{where}: {value!r} is not {name}")
    return float(value) if want is float else value


@dataclass
class PolicyEntry:
    label: str
    name: str
    options: dict = field(default_factory=dict)


@dataclass
class SweepConfig:
    """A parsed, checked sweep config (see the module doc)."""

    name: str
    base_dir: Path
    trace: dict
    profiles: str | None
    gpus: int | None
    plan: str | None
    policies: list[PolicyEntry]
    run: dict
    grid: dict[str, list]

    def resolved(self) -> dict:
        """The config as TOML-like data, every default filled in (stored with the results)."""
        return {"name": self.name, "trace": self.trace, "profiles": self.profiles,
                "cluster": {k: v for k, v in (("gpus", self.gpus), ("plan", self.plan)) if v is not None},
                "policies": [dataclasses.asdict(p) for p in self.policies], "run": self.run, "grid": self.grid}


def read_config(path: Path, overrides: list[str] = ()) -> SweepConfig:
    """Read and check a sweep config; ``overrides`` are ``key=value`` (dotted keys, TOML values)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"sweep config {path} not found")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"sweep config {path} is not valid TOML: {exc}") from None
    for item in overrides:
        _override(data, item)
    return parse(data, path.parent, default_name=path.stem)


def _override(data: dict, item: str) -> None:
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UserError(f"--set expects key=value, got '{item}'")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # a bare word: a string
    parts = key.split(".")
    if parts[0] == "grid" and len(parts) > 2:  # grid."policy.lam"
        parts = ["grid", ".".join(parts[1:])]
    if parts[0] == "trace" and len(parts) > 2:
        parts = ["trace", ".".join(parts[1:])]
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise UserError(f"--set {key}: '{p}' is not a table")
    node[parts[-1]] = value


def parse(data: Mapping[str, Any], base_dir: Path = Path("."), default_name: str = "sweep") -> SweepConfig:
    """Check a config's keys and values (one-line errors naming the key) and fill in defaults."""
    for key in data:
        if key not in TOP_KEYS:
            raise UserError(f"unknown config key '{key}' (known: {', '.join(TOP_KEYS)})")
    name = _kind(data.get("name", default_name), str, "name")
    trace = _table(data, "trace")
    if not trace.get("name") and not trace.get("path") and "trace" not in data.get("grid", {}):
        raise UserError("config key 'trace' needs name = \"maf-synthetic\" (a named trace) or path = \"FILE\"")
    profiles = data.get("profiles")
    if isinstance(profiles, dict):
        profiles = profiles.get("path") or profiles.get("name")
    if profiles is not None:
        _kind(profiles, str, "profiles")
    cluster = _table(data, "cluster")
    for key in cluster:
        if key not in CLUSTER_KEYS:
            raise UserError(f"unknown config key 'cluster.{key}' (known: {', '.join(CLUSTER_KEYS)})")
    gpus = _kind(cluster["gpus"], int, "cluster.gpus") if "gpus" in cluster else None
    plan = _kind(cluster["plan"], str, "cluster.plan") if "plan" in cluster else None
    run = _table(data, "run")
    for key, value in run.items():
        if key not in RUN_KEYS:
            raise UserError(f"unknown config key 'run.{key}' (known: {', '.join(RUN_KEYS)})")
        run[key] = _kind(value, RUN_KEYS[key], f"run.{key}")
    policies = _policies(data.get("policies"))
    grid = _grid(_table(data, "grid"), policies)
    if gpus is None and plan is None and "gpus" not in grid and "plan" not in grid:
        raise UserError("config key 'cluster' needs gpus = N or plan = \"FILE\"")
    return SweepConfig(name, Path(base_dir), trace, profiles, gpus, plan, policies, run, grid)


def _table(data: Mapping[str, Any], key: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise UserError(f"config key '{key}' must be a table ([{key}]), got {value!r}")
    return dict(value)


def _policies(value: Any) -> list[PolicyEntry]:
    from shepherd.core.policies import registry

    if not value:
        raise UserError("config key 'policies' is empty: name at least one policy")
    if not isinstance(value, list):
        raise UserError(f"config key 'policies' must be a list, got {value!r}")
    out: list[PolicyEntry] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or "name" not in item:
            raise UserError(f"policies[{i}]: {item!r} is neither a policy name nor a table with name = …")
        for key in item:
            if key not in ("name", "label", "options"):
                raise UserError(f"unknown config key 'policies[{i}].{key}' (known: name, label, options)")
        name = _kind(item["name"], str, f"policies[{i}].name")
        registry.get(name)  # unknown policy: its own one-line error
        options = item.get("options", {})
        if not isinstance(options, dict):
            raise UserError(f"policies[{i}].options must be a table, got {options!r}")
        checked = {k: _option(name, k, v, f"policies[{i}].options.{k}") for k, v in options.items()}
        out.append(PolicyEntry(_kind(item.get("label", name), str, f"policies[{i}].label"), name, checked))
    labels = [p.label for p in out]
    if len(set(labels)) != len(labels):
        raise UserError("policies repeat a label: give each entry its own label = …")
    return out


def _option(policy: str, key: str, value: Any, where: str) -> Any:
    """A policy option checked against the field type of the policy's config dataclass."""
    from shepherd.core.policies import registry

    cls = registry.get(policy).config_cls
    fields = {f.name for f in dataclasses.fields(cls)}
    if key not in fields:
        raise UserError(f"unknown config key '{where}': policy '{policy}' has no option '{key}' "
                        f"(known: {', '.join(sorted(fields)) or 'none'})")
    kind = typing.get_type_hints(cls).get(key, str)
    return _kind(value, kind, where) if kind in (int, float, str, bool) else value


def _grid(grid: dict, policies: list[PolicyEntry]) -> dict[str, list]:
    from shepherd.core.policies import registry

    out: dict[str, list] = {}
    for key, values in grid.items():
        where = f"grid.{key}"
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise UserError(f"{where} is empty: give at least one value")
        if key in GRID_AXES:
            values = [_kind(v, GRID_AXES[key], where) for v in values]
            if key == "policy":
                labels = [p.label for p in policies]
                bad = [v for v in values if v not in labels]
                if bad:
                    raise UserError(f"{where}: '{bad[0]}' is not a listed policy (listed: {', '.join(labels)})")
        elif key.startswith("policy."):
            option = key.split(".", 1)[1]
            having = [p for p in policies if option in {f.name for f in dataclasses.fields(registry.get(p.name).config_cls)}]
            if not having:
                raise UserError(f"unknown grid key '{key}': no listed policy has option '{option}'")
            values = [_option(having[0].name, option, v, where) for v in values]
        elif key.startswith("trace."):
            if any(isinstance(v, (dict, list)) for v in values):
                raise UserError(f"{where}: values must be numbers or strings")
        else:
            known = ", ".join(list(GRID_AXES) + ["policy.<option>", "trace.<option>"])
            raise UserError(f"unknown grid key '{key}' (known: {known})")
        if len(set(map(repr, values))) != len(values):
            raise UserError(f"{where} repeats a value")
        out[key] = values
    return out


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


def cells(config: SweepConfig) -> list[Cell]:
    """The grid, expanded: one :class:`Cell` per combination, in the config's order."""
    from shepherd.core import profiles as prof
    from shepherd.traces import registry as traces

    axes = list(config.grid)
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
            if "load" in trace_opts:
                raise UserError("trace.load: a trace's rate in req/s is trace.rate (the load multiplier is "
                                "run.load or grid.load)")
            if "rate" in trace_opts:  # --rate of `traces maf`: the trace options call it load (req/s)
                trace_opts["load"] = trace_opts.pop("rate")
            if traces.lookup(str(trace_spec)) is not None and not (config.base_dir / str(trace_spec)).is_file():
                trace = {"name": trace_spec, "sha256": None, "path": None}
                key = repr(sorted(trace_opts.items()))
                if key not in files:  # a bad trace option fails here, before any cell runs
                    traces.TraceOptions.from_kwargs(**trace_opts).validate()
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
    return out


def _config_cls(policy: str) -> type:
    from shepherd.core.policies import registry

    return registry.get(policy).config_cls


def swept(config: SweepConfig) -> list[str]:
    """Columns that vary over the grid (axes with more than one value), in config order."""
    return [k for k, v in config.grid.items() if len(v) > 1]


# --------------------------------------------------------------------------- one cell

def run_params(p: Mapping[str, Any]) -> pl.DataFrame:
    """Simulate one cell from its parameters alone; the one-row summary with its run columns."""
    from shepherd.core import profiles as prof
    from shepherd.core.engine import simulate as run_simulation
    from shepherd.core.policies import registry
    from shepherd.cli.simulate import _read_inputs
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
    prof_obj, plan_obj, extra = _read_inputs(profiles_path, Path(p["_plan_path"]) if p["_plan_path"] else None,
                                             loaded.frame, builtin)
    if prof_obj is not None and profiles_path is None and p["_profiles_name"] != DEFAULT_PROFILES:
        prof_obj = prof.load_builtin(p["_profiles_name"], max_batch)
    ovh = spec.cls.default_overhead
    if p["overhead"]:
        ovh = dataclasses.replace(ovh, mode=p["overhead"])
        ovh.validate()
    result = run_simulation(loaded.frame, prof_obj, p["policy_name"], config, gpus=p["gpus"], plan=plan_obj,
                            artifacts=extra, seed=int(p["seed"]), load=float(p["load"]), slo_ms=p["slo_ms"],
                            overhead=ovh, max_batch=max_batch, hardware=p["hardware"])
    summary = result.summary_frame()
    from shepherd.core.runinfo import with_run_columns

    return with_run_columns(summary, policy=p["policy"], trace=loaded.name, load=p["load"], slo_ms=p["slo_ms"],
                            seed=p["seed"], gpus=p["gpus"], plan=p["_plan_name"], config=dataclasses.asdict(config),
                            synthetic=loaded.synthetic)


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
