"""Past runs under a results folder: sweeps (``sweep.json``), capacity grids (``capacity.json``) and
``simulate`` outputs (``summary.parquet``).

``shepherd runs list`` prints :func:`find_runs`; ``shepherd runs show`` prints
:func:`describe_run`. A run is found by what it wrote, never by a timestamped
name: *when* is the modification time of its results file.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from shepherd.core.errors import UserError

SKIP_DIRS = {"cells", "figures", "data", ".git"}
#: the files that mark a grid's results folder: its kind, by marker
GRID_MARKERS = {"sweep.json": "sweep", "capacity.json": "capacity"}


def _when(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _walk(root: Path):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        yield Path(folder), set(files)


def find_runs(root: Path) -> pl.DataFrame:
    """One row per run under ``root``: kind, name, when, cells or requests, where, and what ran."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"no results folder {root}")
    rows = []
    for folder, files in _walk(root):
        marker = next((m for m in GRID_MARKERS if m in files), None)
        if marker is not None:
            rows.append(_grid_row(folder, marker))
        elif "summary.parquet" in files:
            from shepherd.core.artifacts import read_artifact

            try:
                art = read_artifact(folder / "summary.parquet", "summary")
            except UserError:
                continue
            c = art.provenance.get("config", {})
            cluster = f"{c.get('gpus')} GPUs" if c.get("gpus") else f"plan {c.get('plan')}"
            slo = f", SLO {c.get('slo_ms'):g} ms" if c.get("slo_ms") else ""
            rows.append({"kind": "simulate", "name": folder.name, "when": _when(folder / "summary.parquet"),
                         "size": f"{art.frame['requests'][0]:,} requests" if "requests" in art.frame.columns else "",
                         "where": str(folder),
                         "what": f"{c.get('policy')} on {c.get('trace')}, {cluster}, load {c.get('load')}{slo}, "
                                 f"seed {art.provenance.get('seed')}"})
    schema = {k: pl.String for k in ("kind", "name", "when", "size", "where", "what")}
    return pl.DataFrame(rows, schema=schema).sort("when", descending=True)


def _grid_row(folder: Path, marker: str) -> dict:
    """``runs list``'s row for a sweep's or a capacity grid's folder (a damaged marker: listed as damaged)."""
    kind = GRID_MARKERS[marker]
    results = folder / "results.parquet"
    try:
        meta = json.loads((folder / marker).read_text())
        cfg = meta.get("config", {})
        cells = pl.read_parquet(results).height if results.is_file() else 0
    except (OSError, ValueError, pl.exceptions.PolarsError, AttributeError) as exc:
        return {"kind": kind, "name": folder.name, "when": _when(folder / marker), "size": "damaged",
                "where": str(folder), "what": f"unreadable {marker} or results ({type(exc).__name__})"}
    policies = ", ".join(p.get("label", "") for p in cfg.get("policies", []))
    trace = (cfg.get("trace") or {}).get("name") or Path(str((cfg.get("trace") or {}).get("path"))).name
    if kind == "capacity":
        cap = cfg.get("capacity") or {}
        grid = ", ".join(f"{k}×{len(v)}" for k, v in (cap.get("grid") or {}).items())
        what = f"{policies} on {trace}; {', '.join(cap.get('targets', []))}; grid {grid or '—'}"
        size = f"{cells} searches"
    else:
        grid = ", ".join(f"{k}×{len(v)}" for k, v in cfg.get("grid", {}).items())
        what, size = f"{policies} on {trace}; grid {grid or '—'}", f"{cells} cells"
    return {"kind": kind, "name": str(cfg.get("name")), "when": _when(results if results.is_file() else
            folder / marker), "size": size, "where": str(folder), "what": what}


def resolve_run(spec: str, root: Path) -> Path:
    """A run's folder from its path or its name (as ``runs list`` prints it)."""
    path = Path(spec)
    if path.is_dir() and any((path / m).is_file() for m in (*GRID_MARKERS, "summary.parquet")):
        return path
    runs = find_runs(root)
    hits = runs.filter(pl.col("name") == spec)
    if hits.height == 0:
        raise UserError(f"no run '{spec}' under {root} (see `shepherd runs list`)")
    if hits.height > 1:
        raise UserError(f"{hits.height} runs are named '{spec}' under {root}; give its folder: "
                        + ", ".join(hits["where"].to_list()[:3]))
    return Path(hits["where"][0])


def read_marker(path: Path) -> dict:
    """A grid's ``sweep.json`` / ``capacity.json``, or one ``error:`` line when it is damaged (not JSON, not an
    object): the folder was written by an interrupted or hand-edited run."""
    try:
        meta = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{path} is damaged ({type(exc).__name__}): rerun the command that wrote it") from None
    if not isinstance(meta, dict):
        raise UserError(f"{path} is damaged (not a JSON object): rerun the command that wrote it")
    return meta


def describe_run(folder: Path) -> tuple[dict, pl.DataFrame | None]:
    """(config and provenance, results table) of the run in ``folder``."""
    from shepherd.core.artifacts import read_artifact

    marker = next((m for m in GRID_MARKERS if (folder / m).is_file()), None)
    if marker is not None:
        meta = read_marker(folder / marker)
        results = folder / "results.parquet"
        return meta, (pl.read_parquet(results) if results.is_file() else None)
    art = read_artifact(folder / "summary.parquet", "summary")
    return {"provenance": art.provenance}, art.frame
