"""The schema of a sweep's TOML config (pydantic), its JSON schema for editors, and its one-line errors.

:class:`SweepFile` is the config file: every section a model that forbids
unknown keys, values checked strictly (an integer where a number is expected is
fine; a string, a bool or a float where an integer is expected is not), bounds
on every number (loads and SLOs finite and > 0, GPUs and batches ≥ 1, seeds ≥ 0),
grid axes as typed lists (a scalar is a one-value axis; no empty or repeated
axis) and names that become folders checked as one path component. A policy's
options are checked against a model built from its config dataclass
(:func:`options_model`). :func:`one_line` turns a validation error into the one
line the CLI prints, naming the key (``policies[0].options.lam: 'big' is not a
number``). ``shepherd sweep --schema`` prints :func:`json_schema`.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from pathlib import Path
from typing import Annotated, Any, Optional

from shepherd.core.bounds import MAX_BATCH, MAX_WORKERS

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: grid axes besides ``trace.<option>`` and ``policy.<option>``: their values' types
GRID_AXES = {"load": Positive, "slo_ms": Positive, "seed": Annotated[int, Field(ge=0)],
             "gpus": Annotated[int, Field(ge=1, le=MAX_WORKERS)],
             "max_batch": Annotated[int, Field(ge=1, le=MAX_BATCH)],
             "trace": str, "profiles": str, "plan": str, "policy": str}
#: TraceOptions fields a sweep sets elsewhere: ``load`` is ``rate``, ``seed`` is run.seed / grid.seed,
#: ``path`` is the trace file here (a MAF directory is not a sweep option)
TRACE_NOT_OPTIONS = ("load", "seed", "path")


def component(value: str) -> str:
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
    slo_from: Optional[str] = Field(
        None, description="a built-in profile table whose per-model SLOs every request gets (symphony-1080ti, "
                          "symphony-a100: Symphony Tables 5, 6), as the paper's experiments do; not with slo_ms")
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


def _axis(value: Any) -> Any:
    """A grid axis: a scalar is a one-value axis; empty or repeated values are refused."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("empty: give at least one value")
    if len(set(map(repr, values))) != len(values):
        raise ValueError("repeats a value")
    return values


class _GridBase(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _axes(cls, value: Any) -> Any:
        return _axis(value)


#: ``[grid]``: axis → values. ``trace.<option>`` and ``policy.<option>`` keys (extra keys here) are checked
#: against the trace options and the listed policies' options by :mod:`shepherd.experiments.sweep_config`.
GridSection = create_model("GridSection", __base__=_GridBase,
                           **{k: (Optional[list[v]], None) for k, v in GRID_AXES.items()})  # type: ignore[call-overload]


@functools.cache
def options_model(config_cls: type) -> type[BaseModel]:
    """A model of a policy config dataclass's fields (all optional: a config lists only what it changes)."""
    hints = typing.get_type_hints(config_cls)
    fields = {f.name: (Optional[hints[f.name]], None) for f in dataclasses.fields(config_cls)}
    return create_model(f"{config_cls.__name__}Options", __config__=ConfigDict(extra="forbid", strict=True),
                        **fields)


class ClusterSection(_Section):
    gpus: Optional[int] = Field(None, ge=1, le=MAX_WORKERS, description="identical workers, one serving group")
    plan: Optional[str] = Field(None, description="a plan artifact (serving groups)")


class PolicySection(_Section):
    name: str = Field(description="a registered policy (`shepherd simulate --help` lists them)")
    label: Optional[str] = Field(None, description="its name in the results (default: name)")
    options: dict[str, Any] = Field(default_factory=dict, description="fields of the policy's config")


class RunSection(_Section):
    load: Optional[float] = Field(None, gt=0, allow_inf_nan=False, description="× the trace's native rate")
    slo_ms: Optional[float] = Field(None, gt=0, allow_inf_nan=False, description="every request's SLO, ms")
    seed: Optional[int] = Field(None, ge=0)
    max_batch: Optional[int] = Field(None, ge=1, le=MAX_BATCH)
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
    grid: Optional[GridSection] = Field(  # type: ignore[valid-type]
        None, description="the capacity grid (any axis but load; default: the sweep's grid without load)")

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
    grid: GridSection = Field(default_factory=GridSection,  # type: ignore[valid-type]
                              description="axis → values; every combination is a cell")
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
        return None if value is None else component(value)


def json_schema() -> dict:
    """The config's JSON schema (for editors: ``shepherd sweep --schema > sweep.schema.json``)."""
    return SweepFile.model_json_schema()


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_KINDS = {"float_type": "a number", "float_parsing": "a number", "int_type": "an integer",
          "int_from_float": "an integer", "string_type": "a string", "bool_type": "true or false",
          "list_type": "a list", "dict_type": "a table", "model_type": "a table"}


def one_line(exc: ValidationError, root: type[BaseModel] | None = None) -> str:
    """The first error of a validation as one line naming its key, in the words the CLI uses."""
    errors = exc.errors()
    # a union (a name or a table): the table's own error, not "is not a string"
    err = next((e for e in errors if not (e["type"] == "string_type" and isinstance(e.get("input"), dict))),
               errors[0])
    loc = tuple(p for p in err["loc"] if p not in ("str", "PolicySection", "dict[str,str]"))
    where, kind, value = _loc(loc), err["type"], err.get("input")
    if kind == "extra_forbidden":
        known = _known(loc[:-1], root or SweepFile)
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


def _known(loc: tuple, root: type[BaseModel]) -> list[str]:
    """Field names of the section at ``loc`` under ``root`` (for 'unknown key' errors)."""
    model: Any = root
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


