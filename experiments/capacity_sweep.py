"""Capacity as a sweep kind: ``shepherd capacity CONFIG.toml`` (or flags) over a grid of any sweep axis.

A sweep config's ``[capacity]`` table (see :mod:`shepherd.experiments.sweep`)
turns its grid into capacity searches: for every policy, every point of the
capacity grid (SLO, GPUs, a policy or trace option … — anything but the load,
which is what is searched) and every seed, one cell runs
:func:`shepherd.core.capacity_search.search` — the highest load multiplier at
which the target holds, the model that binds it and the monotonicity probes.
Cells are content-addressed like a sweep's (:meth:`Cell.key` of the sweep cell's
parameters, the target and the search settings), so a rerun, a longer grid or
another target reuses every finished search; they run through
:mod:`shepherd.experiments.runner` (local processes or Ray).

Seeds are real replicas: a named trace is rebuilt from each seed; a trace file
needs ``trace.redraw_window_s`` (:mod:`shepherd.traces.redraw`), otherwise a seed
axis over it is refused. The table has a row per cell; the figure
(:mod:`shepherd.experiments.capacity_report`) draws capacity against the grid's
axis, a line per policy, with the 95 % interval over seeds.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from shepherd.core.errors import UserError
from shepherd.experiments.base import Cell, Experiment, Section
from shepherd.experiments.registry import register
from shepherd.experiments.sweep_config import SweepConfig

EXPERIMENT = "capacity"
MARKER = "capacity.json"  # the resolved config: marks a folder as a capacity grid's results
RESULTS_NAME = "results.parquet"
LOG_NAME = "capacity.log"
SEARCH_KEYS = ("start", "rel_tol", "min_load", "max_load", "probes")


def cells(config: SweepConfig) -> list[Cell]:
    """One cell per (capacity grid point, policy, target): the sweep's cells without a load, plus the search."""
    from shepherd.experiments import sweep as sw

    cap = config.capacity
    if cap is None:
        raise UserError(f"sweep config '{config.name}' has no [capacity] table: add one (target = \"attainment=0.99\""
                        ", [capacity.grid] …) or give `shepherd capacity` its flags")
    base = dataclasses.replace(config, grid=cap.grid, run={**config.run, "load": 1.0})
    out = []
    for cell in sw.cells(base):
        params = {k: v for k, v in cell.params.items() if k != "load"}
        for target in cap.targets:
            search = {k: getattr(cap, k) for k in SEARCH_KEYS}
            out.append(Cell(EXPERIMENT, {**params, "target": target, **search}))
    return out


def swept(config: SweepConfig) -> list[str]:
    """The capacity grid's axes with more than one value (the figure's x axis is the first but seed)."""
    assert config.capacity is not None
    return [k for k, v in config.capacity.grid.items() if len(v) > 1]


def run_params(p: Mapping[str, Any]) -> pl.DataFrame:
    """Search one cell's capacity; one row: the capacity, its bracket, the binding model, monotonicity."""
    from shepherd.core.capacity import Target
    from shepherd.core.capacity_search import search
    from shepherd.experiments.sweep import prepare

    prepared = prepare({**p, "load": 1.0})
    goal = Target.parse(p["target"])
    found = search(lambda load: prepared.run(load).requests_frame(), goal, start=p["start"], rel_tol=p["rel_tol"],
                   min_load=p["min_load"], max_load=p["max_load"], probes=p["probes"])
    frame = prepared.loaded.frame
    span_us = prepared.loaded.span_us or (int(frame["arrival_us"].max()) + 1)
    native_rps = frame.height / (span_us / 1e6)
    return pl.DataFrame([{
        "policy": p["policy"], "trace": prepared.loaded.name, "target": goal.describe(),
        "capacity": found.capacity, "capacity_rps": found.capacity * native_rps,
        "bracket_hi": found.bracket.hi, "native_rps": native_rps, "simulations": len(found.probes),
        **found.binding(), "monotone": found.monotone,
        "warning": _warning(p, found),
        "probes": json.dumps([[pr.load, pr.holds] for pr in found.probes]),
        "synthetic": bool(prepared.loaded.synthetic),
    }], schema_overrides={"binding_model": pl.String, "binding_attainment": pl.Float64,
                          "binding_value": pl.Float64, "binding_attainment_above": pl.Float64,
                          "warning": pl.String})


def _warning(p: Mapping[str, Any], found: Any) -> str | None:
    """What a search's reader must know: the target was not monotone in load, or never held."""
    if found.capacity == 0:
        return (f"{_where(p)}: {found.target.describe()} is not met even at load {found.bracket.hi:.4g} "
                f"(searched down to {p['min_load']:g}): capacity 0")
    return None if found.monotone else f"{_where(p)}: {found.warning()}"


def _where(p: Mapping[str, Any]) -> str:
    """The point a search ran at, for its warning: policy, the run's settings that are set, and the seed."""
    keep = ("policy", "slo_ms", "gpus", "max_batch", "plan", "seed")
    named = {**{k: p.get(k) for k in keep}, "plan": p.get("_plan_name")}
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in named.items() if v is not None)


class CapacityExperiment(Experiment):
    """The generic experiment behind ``shepherd capacity``: a cell is one capacity search."""

    name = EXPERIMENT
    paper = ""
    title = "capacity over a grid"

    def cells(self, scale):  # noqa: ANN001 - no grid of its own
        raise UserError("a capacity grid comes from a config or flags: run `shepherd capacity`")

    def run_cell(self, params: Mapping[str, Any]) -> pl.DataFrame:
        return run_params(params)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments.capacity_report import draw

        return draw(results, figures_dir, [], "capacity")


CAPACITY = register(CapacityExperiment())


def table(grid: list[Cell], results_dir: Path) -> pl.DataFrame:
    """One row per finished search: the cell's parameters as columns (as a sweep's) and its result."""
    from shepherd.experiments.runner import read_cell
    from shepherd.experiments.sweep import flat_params

    rows = []
    for cell in grid:
        frame = read_cell(cell, results_dir)
        if frame is None:
            continue
        params = flat_params(cell)
        params["target_spec"] = params.pop("target")
        row = frame.row(0, named=True)
        for k in ("policy", "trace"):
            row.pop(k, None)
        rows.append({**params, **row, "cell": cell.key()})
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
