"""A sweep's TOML config: read, check (one-line errors naming the key) and resolve.

The format is documented in :mod:`shepherd.experiments.sweep`; this module
only parses it into a :class:`SweepConfig` — expansion into cells and running
them live there.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from shepherd.core.errors import UserError

TOP_KEYS = ("name", "trace", "profiles", "cluster", "policies", "run", "grid")
RUN_KEYS = {"load": float, "slo_ms": float, "seed": int, "max_batch": int, "overhead": str, "hardware": str}
CLUSTER_KEYS = ("gpus", "plan")
GRID_AXES = {"load": float, "slo_ms": float, "seed": int, "gpus": int, "max_batch": int,
             "trace": str, "profiles": str, "plan": str, "policy": str}


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
