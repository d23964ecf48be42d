"""A sweep's TOML config: read, check against the schema and the registries, resolve.

The format is documented in :mod:`shepherd.experiments.sweep`; its schema is
:mod:`shepherd.experiments.sweep_schema` (pydantic). This module reads the file,
applies ``--set`` overrides, validates, and checks what needs the registries —
policy names and options, ``trace.<option>`` / ``policy.<option>`` grid keys,
capacity targets — into the :class:`SweepConfig` the expansion reads. Checks
that need the files named (a trace's models against the profiles, a plan's
kind) run in :mod:`shepherd.experiments.sweep_checks`.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pydantic import ValidationError

from shepherd.core.errors import UserError
from shepherd.experiments.sweep_schema import (  # noqa: F401 - GRID_AXES, json_schema: part of this API
    GRID_AXES,
    CapacitySection,
    PolicySection,
    SweepFile,
    TraceSection,
    component,
    json_schema,
    one_line,
    options_model,
)

RUN_KEYS = ("load", "slo_ms", "seed", "max_batch", "overhead", "hardware")


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
        raise UserError(f"sweep config {path} is a folder, not a TOML file (a sweep's results? `shepherd "
                        "report` reads those)" if path.is_dir() else f"sweep config {path} not found")
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
        raise UserError(one_line(exc)) from None
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
    grid = _grid(model.grid, policies, "grid", order=list(data.get("grid") or {}))
    cluster = model.cluster
    if cluster.gpus is None and cluster.plan is None and "gpus" not in grid and "plan" not in grid:
        raise UserError("config key 'cluster' needs gpus = N or plan = \"FILE\"")
    capacity = None
    if model.capacity is not None:
        capacity = _capacity(model.capacity, grid, policies, list((data.get("capacity") or {}).get("grid") or {}))
    return SweepConfig(name, Path(base_dir), trace, profiles, cluster.gpus, cluster.plan, policies, run, grid,
                       capacity)


def _component_or_error(name: str) -> str:
    try:
        return component(name)
    except ValueError as exc:
        raise UserError(f"name: {exc} (give name = \"…\" in the config)") from None


def _validated(model: Any, data: Any, where: str) -> Any:
    """``model.model_validate(data)``, a failure as one line with ``where`` before the key."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        line = one_line(exc, model)
        unknown = "unknown config key '"
        raise UserError(line.replace(unknown, f"{unknown}{where}.") if line.startswith(unknown)
                        else f"{where}.{line}") from None


def _policies(items: list) -> list[PolicyEntry]:
    from shepherd.core.policies import registry

    out: list[PolicyEntry] = []
    for i, item in enumerate(items):
        entry = PolicySection(name=item) if isinstance(item, str) else item
        cls = registry.get(entry.name).config_cls  # unknown policy: its own one-line error
        checked = _validated(options_model(cls), entry.options, f"policies[{i}].options")
        out.append(PolicyEntry(entry.label or entry.name, entry.name, checked.model_dump(exclude_unset=True)))
    labels = [p.label for p in out]
    if len(set(labels)) != len(labels):
        raise UserError("policies repeat a label: give each entry its own label = …")
    return out


def _grid(grid: Any, policies: list[PolicyEntry], table: str, exclude: tuple[str, ...] = (),
          order: list[str] = ()) -> dict[str, list]:
    """The checked grid, its axes in the config's ``order``: typed axes from the schema,
    ``trace.<option>`` / ``policy.<option>`` checked here."""
    from shepherd.core.policies import registry
    from shepherd.experiments.sweep_schema import _axis

    out: dict[str, list] = {}
    given = {**grid.model_dump(exclude_none=True), **(grid.model_extra or {})}
    for key, values in sorted(given.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)):
        where = f"{table}.{key}"
        if key in exclude:
            raise UserError(f"{where}: a capacity search finds the load; {key} cannot be an axis here")
        try:
            values = _axis(values)
        except ValueError as exc:
            raise UserError(f"{where}: {exc}") from None
        prefix, _, option = key.partition(".")
        if key == "policy":
            labels = [p.label for p in policies]
            bad = [v for v in values if v not in labels]
            if bad:
                raise UserError(f"{where}: '{bad[0]}' is not a listed policy (listed: {', '.join(labels)})")
        elif prefix == "policy" and option:
            models = [options_model(registry.get(p.name).config_cls) for p in policies]
            having = [m for m in models if option in m.model_fields]
            if not having:
                raise UserError(f"unknown grid key '{key}': no listed policy has option '{option}'")
            values = [getattr(_validated(having[0], {option: v}, f"{table}.policy"), option) for v in values]
        elif prefix == "trace" and option:
            if option not in TraceSection.model_fields or option in ("name", "path"):
                raise UserError(f"unknown grid key '{key}': no trace option '{option}' (known: "
                                f"{', '.join(k for k in TraceSection.model_fields if k not in ('name', 'path'))})")
            values = [getattr(_validated(TraceSection, {option: v}, f"{table}.trace"), option) for v in values]
        elif key not in GRID_AXES:
            known = ", ".join(list(GRID_AXES) + ["policy.<option>", "trace.<option>"])
            raise UserError(f"unknown grid key '{key}' (known: {known})")
        out[key] = values
    return out


def _capacity(section: CapacitySection, grid: dict[str, list], policies: list[PolicyEntry],
              order: list[str]) -> Capacity:
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
    if section.grid is not None:
        cgrid = _grid(section.grid, policies, "capacity.grid", exclude=("load",), order=order)
    else:
        cgrid = {k: v for k, v in grid.items() if k != "load"}
    return Capacity(list(section.target), section.start, section.rel_tol, section.min_load, section.max_load,
                    section.probes, cgrid)
