"""Past runs under a results folder: sweeps (``sweep.json``) and ``simulate`` outputs (``summary.parquet``).

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
        if "sweep.json" in files:
            meta = json.loads((folder / "sweep.json").read_text())
            cfg = meta.get("config", {})
            results = folder / "results.parquet"
            cells = pl.read_parquet(results).height if results.is_file() else 0
            policies = ", ".join(p.get("label", "") for p in cfg.get("policies", []))
            grid = ", ".join(f"{k}×{len(v)}" for k, v in cfg.get("grid", {}).items())
            rows.append({"kind": "sweep", "name": str(cfg.get("name")), "when": _when(results if results.is_file()
                         else folder / "sweep.json"), "size": f"{cells} cells", "where": str(folder),
                         "what": f"{policies} on {(cfg.get('trace') or {}).get('name') or (cfg.get('trace') or {}).get('path')}; grid {grid or '—'}"})
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


def resolve_run(spec: str, root: Path) -> Path:
    """A run's folder from its path or its name (as ``runs list`` prints it)."""
    path = Path(spec)
    if path.is_dir() and ((path / "sweep.json").is_file() or (path / "summary.parquet").is_file()):
        return path
    runs = find_runs(root)
    hits = runs.filter(pl.col("name") == spec)
    if hits.height == 0:
        raise UserError(f"no run '{spec}' under {root} (see `shepherd runs list`)")
    if hits.height > 1:
        raise UserError(f"{hits.height} runs are named '{spec}' under {root}; give its folder: "
                        + ", ".join(hits["where"].to_list()[:3]))
    return Path(hits["where"][0])


def describe_run(folder: Path) -> tuple[dict, pl.DataFrame | None]:
    """(config and provenance, results table) of the run in ``folder``."""
    from shepherd.core.artifacts import read_artifact

    if (folder / "sweep.json").is_file():
        meta = json.loads((folder / "sweep.json").read_text())
        results = folder / "results.parquet"
        return meta, (pl.read_parquet(results) if results.is_file() else None)
    art = read_artifact(folder / "summary.parquet", "summary")
    return {"provenance": art.provenance}, art.frame
