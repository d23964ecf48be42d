"""What a sweep's cells would fail on, checked before any of them runs (``shepherd sweep --dry-run`` too).

:mod:`shepherd.experiments.sweep_config` checks the config's shape; this module
checks the grid's cells against the things they name, cheaply (no trace is
built, no simulation runs): each policy's options through its config's own
``validate``; the overhead mode; each input file's artifact kind; and the
trace's models against the chosen profiles — a named trace's model list (its
``models`` option, its ``model_map``, or the default round-robin list) or a
trace file's model column, against the built-in table or profiles file the
cell names. A bad config therefore fails in well under a second and leaves
nothing behind.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable

from shepherd.core.errors import UserError
from shepherd.experiments.base import Cell


def check_models(trace_models: Iterable[str], profiled: Iterable[str], table: str) -> None:
    """Every model of the trace is in the profiles (one line naming the first one missing)."""
    missing = sorted(set(trace_models) - set(profiled))
    if missing:
        raise UserError(f"profiles {table} have no model '{missing[0]}' ({len(missing)} model(s) of the trace "
                        f"are unprofiled; `shepherd profile --table {table}` lists its models)")


def check(grid: list[Cell]) -> None:
    """Check every distinct policy config, overhead, input file and (trace, profiles) pair of ``grid``."""
    from shepherd.core.policies import registry

    seen: set[str] = set()
    kind_of: dict[str, str | None] = {}

    def once(key: str) -> bool:
        if key in seen:
            return False
        seen.add(key)
        return True

    for cell in grid:
        p = cell.params
        spec = registry.get(p["policy_name"])
        if once(f"policy {p['policy_name']} {sorted(p['options'].items())!r}"):
            config = registry.make_config(p["policy_name"], dict(p["options"]))
            if hasattr(config, "validate"):
                config.validate()
        if p["overhead"] and once(f"overhead {p['policy_name']} {p['overhead']}"):
            dataclasses.replace(spec.cls.default_overhead, mode=p["overhead"]).validate()
        given = {"profiles"} if not p.get("_profiles_path") else set()  # a built-in table is a profiles frame
        for name, kinds in (("trace", ("trace",)), ("plan", ("plan", "pipeline_plan")),
                            ("profiles", ("profiles", "block_profiles"))):
            path = p.get(f"_{name}_path")
            if path:
                if once(f"file {name} {path}"):  # one file may be named twice, as two kinds: check each
                    kind_of[path] = _check_kind(Path(path), kinds, name)
                given.add(kind_of[path] or name)
        if once(f"requires {p['policy_name']} {sorted(given)}"):
            _check_requires(p["policy_name"], spec.cls.requires, given)
        if "profiles" in spec.cls.requires:
            key = f"models {p['_trace_path'] or p['_trace_name']} {p['trace_options']!r} {p['_profiles_name']}"
            if once(key):
                _check_trace_models(p)
        table = p["trace_options"].get("slo_from")
        if table and once(f"slos {p['_trace_path'] or p['_trace_name']} {p['trace_options']!r}"):
            _check_slo_models(p, table)


def _check_requires(policy: str, requires: tuple[str, ...], given: set[str]) -> None:
    """The artifact kinds ``policy`` requires are among the cell's inputs, and a pipeline plan goes only to a
    policy that reads one — the checks :func:`shepherd.core.engine.simulate.simulate` makes, made up front."""
    from shepherd.core.engine.simulate import KIND_HINTS

    missing = [k for k in requires if k not in given]
    if missing:
        raise UserError(f"policy '{policy}' requires {KIND_HINTS.get(missing[0], missing[0])}: give it in the "
                        "config (cluster.plan, profiles)")
    if "pipeline_plan" in given and "pipeline_plan" not in requires:
        from shepherd.core.policies import registry

        takers = [n for n in registry.names() if "pipeline_plan" in registry.get(n).cls.requires]
        raise UserError(f"a pipeline plan runs on a pipeline data plane ({' or '.join(takers)}), "
                        f"not on policy '{policy}'")


def _check_kind(path: Path, kinds: tuple[str, ...], what: str) -> str | None:
    from shepherd.core.artifacts import artifact_kind

    try:
        kind = artifact_kind(path)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's: one line
        raise UserError(f"{what} {path.name}: not a readable Parquet artifact ({str(exc).splitlines()[0]})") from None
    if kind is not None and kind not in kinds:
        raise UserError(f"{what} {path.name} is a {kind} artifact, not a {' or '.join(kinds)}")
    return kind


def _check_trace_models(p: dict) -> None:
    from shepherd.core import profiles as prof

    trace_models = _trace_models(p)
    if trace_models is None:
        return
    if p["_profiles_path"]:
        from shepherd.core.artifacts import artifact_kind, read_artifact

        if artifact_kind(p["_profiles_path"]) not in (None, "profiles"):
            return  # block profiles and the like: the policy reads them by kind
        profiled = read_artifact(p["_profiles_path"], "profiles").frame["model"].unique().to_list()
    else:
        profiled = prof.read_builtin_raw(p["_profiles_name"])["model"].to_list()
    check_models(trace_models, profiled, p["_profiles_name"])


def _check_slo_models(p: dict, table: str) -> None:
    """Every model of the trace has an SLO in ``trace.slo_from``'s table."""
    from shepherd.traces.slos import table_slos

    trace_models = _trace_models(p)
    missing = sorted(set(trace_models or ()) - set(table_slos(table)))
    if missing:
        raise UserError(f"trace.slo_from = '{table}' has no SLO for model '{missing[0]}' ({len(missing)} model(s) "
                        f"of the trace; give the trace the table's models: trace.models)")


def _trace_models(p: dict) -> list[str] | None:
    """The models a cell's trace will carry, without building it (None when only building would tell)."""
    import polars as pl

    if p["_trace_path"]:
        try:
            return pl.scan_parquet(p["_trace_path"]).select("model").unique().collect()["model"].to_list()
        except Exception as exc:  # noqa: BLE001
            raise UserError(f"trace {p['_trace_name']}: no readable model column ({str(exc).splitlines()[0]})") \
                from None
    from shepherd.traces.registry import TraceOptions

    opts = {k: v for k, v in p["trace_options"].items() if k not in ("redraw_window_s", "slo_from")}
    options = TraceOptions.from_kwargs(**opts)
    if options.model_map is not None:
        return None  # the map's models apply to the functions it lists: known once the trace is built
    return options.model_list()
