"""A sweep's TOML config as a schema (pydantic): read, check, resolve; and its JSON schema for editors.

The format is documented in :mod:`shepherd.experiments.sweep`. :class:`SweepFile`
is the schema — every section a model that forbids unknown keys, values
checked strictly (an integer where a number is expected is fine; a string, a
bool or a float where an integer is expected is not) — and :func:`parse` turns
it into the :class:`SweepConfig` the expansion reads. A failure is one line
naming the key (``policies[0].options.lam: 'big' is not a number``).
``shepherd sweep --schema`` prints :func:`json_schema`.

Checks that need the policy registry or the trace options (option names and
types per policy, grid axes, trace options) run here too; what needs the
files themselves (a trace's models against the profiles, a plan's kind) runs
in :func:`shepherd.experiments.sweep_checks.check` before any folder is made.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from shepherd.core.errors import UserError

RUN_KEYS = {"load": float, "slo_ms": float, "seed": int, "max_batch": int, "overhead": str, "hardware": str}
GRID_AXES = {"load": float, "slo_ms": float, "seed": int, "gpus": int, "max_batch": int,
             "trace": str, "profiles": str, "plan": str, "policy": str}
#: positive axes (> 0) and non-negative ones (≥ 0); the rest are names
POSITIVE = {"load", "slo_ms", "gpus", "max_batch"}
#: trace options that are not options of a named trace's builder (see :class:`TraceSection`)
TRACE_OWN = ("name", "path", "rate", "redraw_window_s")
#: TraceOptions fields a sweep sets elsewhere: ``load`` is ``rate``, ``seed`` is run.seed / grid.seed,
#: ``path`` is the trace file here (a MAF directory is not a sweep option)
TRACE_NOT_OPTIONS = ("load", "seed", "path")


def _component(value: str, where: str) -> str:
    """A name that becomes a folder: one path component (no separator, not ``.``/``..``, printable)."""
    if not value or value in (".", "..") or any(c in value for c in "/\\\0") or not value.isprintable() \
            or len(value) > 100 or value.startswith("-"):
        raise ValueError(f"{value!r} must be one plain folder name (no '/', '..', control characters; "
                         f"at most 100 characters)")
    return value


def _comma_list(value: Any) -> Any:
    """``"A,B"`` → ``["A", "B"]`` (a string is never iterated by character)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _trace_option_fields() -> dict[str, Any]:
    """The named traces' options (:class:`shepherd.traces.registry.TraceOptions`) as schema fields."""
    from shepherd.traces.registry import TraceOptions

    hints = typing.get_type_hints(TraceOptions)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(TraceOptions):
        if f.name in TRACE_NOT_OPTIONS or f.name == "models":
            continue
        kind = hints[f.name]
        if Path in typing.get_args(kind):
            kind = Optional[str]
        out[f.name] = (Optional[kind], Field(None, description=f"option '{f.name}' of a named trace "
                                                               f"(as --{f.name.replace('_', '-')} of `traces maf`)"))
    return out


class _TraceBase(_Section):
    name: Optional[str] = Field(None, description="a named trace (maf-synthetic, maf2019, …)")
    path: Optional[str] = Field(None, description="a trace artifact (relative to the config's folder)")
    models: Optional[list[str]] = Field(None, description="models the streams map to, round-robin "
                                                          "(a list, or one comma-separated string)")
    rate: Optional[float] = Field(None, gt=0, allow_inf_nan=False,
                                  description="the trace's rate in req/s (--rate of `traces maf`)")
    redraw_window_s: Optional[float] = Field(
        None, gt=0, allow_inf_nan=False,
        description="trace FILE only: per seed, re-draw each request's arrival uniformly within its "
                    "stream's window of this many seconds (60: per-minute counts kept), models and SLOs "
                    "kept; required for a seed axis over a file")

    @field_validator("models", mode="before")
    @classmethod
    def _models(cls, value: Any) -> Any:
        value = _comma_list(value)
        if value == []:
            raise ValueError("the model list is empty")
        return value


TraceSection = create_model("TraceSection", __base__=_TraceBase, **_trace_option_fields())


class ClusterSection(_Section):
    gpus: Optional[int] = Field(None, ge=1, description="identical workers, one serving group")
    plan: Optional[str] = Field(None, description="a plan artifact (serving groups)")


class PolicySection(_Section):
    name: str = Field(description="a registered policy (`shepherd simulate --help` lists them)")
    label: Optional[str] = Field(None, description="its name in the results (default: name)")
    options: dict[str, Any] = Field(default_factory=dict, description="fields of the policy's config")


class RunSection(_Section):
    load: Optional[float] = Field(None, gt=0, allow_inf_nan=False, description="× the trace's native rate")
    slo_ms: Optional[float] = Field(None, gt=0, allow_inf_nan=False, description="every request's SLO, ms")
    seed: Optional[int] = Field(None, ge=0)
    max_batch: Optional[int] = Field(None, ge=1)
    overhead: Optional[str] = Field(None, description="scheduler overhead mode")
    hardware: Optional[str] = None


class CapacitySection(_Section):
    """``shepherd capacity CONFIG``: per grid point, policy and seed, the highest load meeting ``target``."""

    target: list[str] = Field(["attainment=0.99"], description="attainment=X (every model's) | goodput=Y "
                              "(per-request, all models) | p99-slo (every model's p99 ≤ SLO); one or a list")
    start: float = Field(1.0, gt=0, allow_inf_nan=False, description="first load tried")
    rel_tol: float = Field(0.01, gt=0, le=1, description="stop when the bracket's hi/lo − 1 is below this")
    min_load: float = Field(1e-3, gt=0, allow_inf_nan=False)
    max_load: float = Field(1e4, gt=0, allow_inf_nan=False)
    probes: int = Field(3, ge=0, le=20, description="extra loads below the capacity checked for monotonicity")
    grid: dict[str, Any] = Field(default_factory=dict, description="the capacity grid (any axis but load; "
                                 "default: the sweep's grid without load)")

    @field_validator("target", mode="before")
    @classmethod
    def _targets(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class SweepFile(_Section):
    """A sweep config (see :mod:`shepherd.experiments.sweep`)."""

    name: Optional[str] = Field(None, description="the results folder's name (default: the file's stem)")
    trace: TraceSection = Field(default_factory=TraceSection)  # type: ignore[valid-type]
    profiles: Optional[str | dict[str, str]] = Field(None, description="a built-in table or a profiles file")
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    policies: list[str | PolicySection] = Field(description="policy names, or tables with name/label/options")
    run: RunSection = Field(default_factory=RunSection)
    grid: dict[str, Any] = Field(default_factory=dict, description="axis → values; every combination is a cell")
    capacity: Optional[CapacitySection] = None

    @field_validator("policies", mode="before")
    @classmethod
    def _policies(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = _comma_list(value)
        if isinstance(value, list) and not value:
            raise ValueError("empty: name at least one policy")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else _component(value, "name")


def json_schema() -> dict:
    """The config's JSON schema (for editors: ``shepherd sweep --schema > sweep.schema.json``)."""
    return SweepFile.model_json_schema()


# --------------------------------------------------------------------------- the resolved config

@dataclass
class PolicyEntry:
    label: str
    name: str
    options: dict = field(default_factory=dict)


@dataclass
class Capacity:
    """The ``[capacity]`` table, resolved: targets, search settings and its grid."""

    targets: list[str]
    start: float
    rel_tol: float
    min_load: float
    max_load: float
    probes: int
    grid: dict[str, list]


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
    capacity: Capacity | None = None

    def resolved(self) -> dict:
        """The config as TOML-like data, every default filled in (stored with the results)."""
        out = {"name": self.name, "trace": self.trace, "profiles": self.profiles,
               "cluster": {k: v for k, v in (("gpus", self.gpus), ("plan", self.plan)) if v is not None},
               "policies": [dataclasses.asdict(p) for p in self.policies], "run": self.run, "grid": self.grid}
        if self.capacity is not None:
            out["capacity"] = dataclasses.asdict(self.capacity)
        return out


def read_config(path: Path, overrides: list[str] = ()) -> SweepConfig:
    """Read and check a sweep config; ``overrides`` are ``key=value`` (dotted keys, TOML values)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"sweep config {path} not found" + (" (it is a folder)" if path.is_dir() else ""))
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"sweep config {path} is not UTF-8 text (byte {exc.start})") from None
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
    for table in ("grid", "trace"):  # grid."policy.lam", trace."x"
        if parts[0] == table and len(parts) > 2:
            parts = [table, ".".join(parts[1:])]
    if parts[:2] == ["capacity", "grid"] and len(parts) > 3:
        parts = ["capacity", "grid", ".".join(parts[2:])]
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            raise UserError(f"--set {key}: '{p}' is not a table")
    node[parts[-1]] = value


def parse(data: Mapping[str, Any], base_dir: Path = Path("."), default_name: str = "sweep") -> SweepConfig:
    """Check a config against :class:`SweepFile` and the registries (one-line errors naming the key)."""
    try:
        model = SweepFile.model_validate(dict(data))
    except ValidationError as exc:
        raise UserError(_one_line(exc)) from None
    name = model.name if model.name is not None else _component_or_error(default_name)
    trace = model.trace.model_dump(exclude_none=True)
    if not trace.get("name") and not trace.get("path") and "trace" not in model.grid:
        raise UserError("config key 'trace' needs name = \"maf-synthetic\" (a named trace) or path = \"FILE\"")
    if trace.get("name") and trace.get("path"):
        raise UserError("config key 'trace' has both name and path: give one")
    if "models" in trace:
        trace["models"] = list(trace["models"])
    profiles = model.profiles
    if isinstance(profiles, dict):
        unknown = sorted(set(profiles) - {"name", "path"})
        if unknown:
            raise UserError(f"unknown config key 'profiles.{unknown[0]}' (known: name, path)")
        profiles = profiles.get("path") or profiles.get("name")
    run = model.run.model_dump(exclude_none=True)
    policies = _policies(model.policies)
    grid = _grid(model.grid, policies, "grid")
    cluster = model.cluster
    if cluster.gpus is None and cluster.plan is None and "gpus" not in grid and "plan" not in grid:
        raise UserError("config key 'cluster' needs gpus = N or plan = \"FILE\"")
    capacity = None
    if model.capacity is not None:
        capacity = _capacity(model.capacity, grid, policies)
    return SweepConfig(name, Path(base_dir), trace, profiles, cluster.gpus, cluster.plan, policies, run, grid,
                       capacity)


def _component_or_error(name: str) -> str:
    try:
        return _component(name, "name")
    except ValueError as exc:
        raise UserError(f"name: {exc} (give name = \"…\" in the config)") from None


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_KINDS = {"float_type": "a number", "float_parsing": "a number", "int_type": "an integer",
          "int_from_float": "an integer", "string_type": "a string", "bool_type": "true or false",
          "list_type": "a list", "dict_type": "a table", "model_type": "a table"}


def _one_line(exc: ValidationError) -> str:
    """The first error of a validation as one line naming its key, in the words the CLI uses."""
    errors = exc.errors()
    # a union (a name or a table): the table's own error, not "is not a string"
    err = next((e for e in errors if not (e["type"] == "string_type" and isinstance(e.get("input"), dict))),
               errors[0])
    loc = tuple(p for p in err["loc"] if p not in ("str", "PolicySection", "dict[str,str]"))
    where, kind, value = _loc(loc), err["type"], err.get("input")
    if kind == "extra_forbidden":
        known = _known(loc[:-1])
        return f"unknown config key '{where}'" + (f" (known: {', '.join(known)})" if known else "")
    if kind == "missing":
        return f"config key '{where}' is missing"
    if kind in _KINDS:
        return f"{where}: {value!r} is not {_KINDS[kind]}"
    if kind == "value_error":
        return f"{where}: {err['msg'].removeprefix('Value error, ')}"
    if kind in ("greater_than", "greater_than_equal", "less_than_equal", "finite_number", "less_than"):
        return f"{where}: {value!r} is out of range ({err['msg'].lower()})"
    return f"{where}: {err['msg']} (got {value!r})"


def _known(loc: tuple) -> list[str]:
    """Field names of the section at ``loc`` (for 'unknown key' errors)."""
    model: Any = SweepFile
    for part in loc:
        if isinstance(part, int):
            continue
        info = getattr(model, "model_fields", {}).get(part)
        if info is None:
            return []
        args = [a for a in _flat_args(info.annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not args:
            return []
        model = args[0]
    return list(getattr(model, "model_fields", {}))


def _flat_args(annotation: Any) -> list:
    """Every type inside an annotation (``list[str | PolicySection]`` → str, PolicySection, …)."""
    args = typing.get_args(annotation)
    return [annotation] if not args else [t for a in args for t in _flat_args(a)]


def _kind(value: Any, want: type, where: str) -> Any:
    """``value`` as ``want`` (int → float allowed), or a one-line error naming ``where``."""
    ok = (isinstance(value, want) and not isinstance(value, bool)) or \
        (want is float and isinstance(value, int) and not isinstance(value, bool)) or \
        (want is bool and isinstance(value, bool))
    if not ok:
        name = {float: "a number", int: "an integer", str: "a string", bool: "true or false"}.get(want, want.__name__)
        raise UserError(f"{where}: {value!r} is not {name}")
    return float(value) if want is float else value


def _policies(items: list) -> list[PolicyEntry]:
    from shepherd.core.policies import registry

    out: list[PolicyEntry] = []
    for i, item in enumerate(items):
        entry = PolicySection(name=item) if isinstance(item, str) else item
        registry.get(entry.name)  # unknown policy: its own one-line error
        checked = {k: _option(entry.name, k, v, f"policies[{i}].options.{k}") for k, v in entry.options.items()}
        out.append(PolicyEntry(entry.label or entry.name, entry.name, checked))
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


def _axis_value(key: str, value: Any, where: str) -> Any:
    value = _kind(value, GRID_AXES[key], where)
    if key in POSITIVE and not (value > 0 and math.isfinite(value)):
        raise UserError(f"{where}: {value!r} is out of range (must be > 0)")
    if key == "seed" and value < 0:
        raise UserError(f"{where}: {value!r} is out of range (seeds are ≥ 0)")
    return value


def _grid(grid: dict, policies: list[PolicyEntry], table: str, exclude: tuple[str, ...] = ()) -> dict[str, list]:
    from shepherd.core.policies import registry

    trace_fields = TraceSection.model_fields
    out: dict[str, list] = {}
    for key, values in grid.items():
        where = f"{table}.{key}"
        if key in exclude:
            raise UserError(f"{where}: a capacity search finds the load; {key} cannot be an axis here")
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise UserError(f"{where} is empty: give at least one value")
        if key in GRID_AXES:
            values = [_axis_value(key, v, where) for v in values]
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
            option = key.split(".", 1)[1]
            if option not in trace_fields or option in ("name", "path"):
                raise UserError(f"unknown grid key '{key}': no trace option '{option}' (known: "
                                f"{', '.join(k for k in trace_fields if k not in ('name', 'path'))})")
            for v in values:
                try:
                    TraceSection.model_validate({option: v})
                except ValidationError as exc:
                    raise UserError(f"{where}: " + _one_line(exc).split(": ", 1)[-1]) from None
            if option == "models":
                values = [_comma_list(v) for v in values]
        else:
            known = ", ".join(list(GRID_AXES) + ["policy.<option>", "trace.<option>"])
            raise UserError(f"unknown grid key '{key}' (known: {known})")
        if len(set(map(repr, values))) != len(values):
            raise UserError(f"{where} repeats a value")
        out[key] = values
    return out


def _capacity(section: CapacitySection, grid: dict[str, list], policies: list[PolicyEntry]) -> Capacity:
    from shepherd.core.capacity import Target

    for i, text in enumerate(section.target):
        try:
            Target.parse(text)
        except UserError as exc:
            raise UserError(f"capacity.target[{i}]: {exc}") from None
    if len(set(section.target)) != len(section.target):
        raise UserError("capacity.target repeats a target")
    if section.max_load <= section.min_load or not section.min_load <= section.start <= section.max_load:
        raise UserError(f"capacity: need min_load ≤ start ≤ max_load and min_load < max_load, got "
                        f"{section.min_load:g}, {section.start:g}, {section.max_load:g}")
    if section.grid:
        cgrid = _grid(section.grid, policies, "capacity.grid", exclude=("load",))
    else:
        cgrid = {k: v for k, v in grid.items() if k != "load"}
    return Capacity(list(section.target), section.start, section.rel_tol, section.min_load, section.max_load,
                    section.probes, cgrid)
