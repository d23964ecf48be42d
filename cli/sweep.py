"""``shepherd sweep CONFIG.toml``: a researcher's own grid on the reproduce runner (thin: parse, call, print)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from shepherd.cli.common import frame_table, summary_table
from shepherd.cli.log import run_log
from shepherd.core.errors import UserError

SWEEPS = Path("results/sweeps")


def sweep(
    config: Annotated[Path, typer.Argument(help="Sweep config (TOML; see examples/*.toml).")],
    overrides: Annotated[Optional[List[str]], typer.Option("--set", help="Override a config key: key=value, dotted keys and TOML values (e.g. --set cluster.gpus=64 --set 'grid.load=[1,2]'). Repeatable.")] = None,
    results: Annotated[Optional[Path], typer.Option("--results", "-o", "--out", help="Results folder (default: results/sweeps/<name>).")] = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help="Parallel local processes (default: all cores).")] = None,
    executor: Annotated[str, typer.Option("--executor", help="local | ray")] = "local",
    address: Annotated[Optional[str], typer.Option("--address", help="Ray cluster address (default: start a local Ray).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the grid (one row per cell) and exit.")] = False,
) -> None:
    """Expand CONFIG's grid into cells and run each (skipping finished ones); write one tidy results table.

    Example: shepherd sweep examples/flex-vs-baselines.toml --set 'grid.seed=[0]' --dry-run
    """
    import polars as pl

    from shepherd.core.artifacts import make_provenance, write_artifact, write_bytes_atomic
    from shepherd.experiments import runner
    from shepherd.experiments import sweep as sw

    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs must be ≥ 1, got {jobs}")
    cfg = sw.read_config(config, overrides or [])
    grid = sw.cells(cfg)
    out = results if results is not None else SWEEPS / cfg.name
    if dry_run:
        flat = [sw.flat_params(c) for c in grid]
        varying = [k for k in flat[0] if len({repr(f.get(k)) for f in flat}) > 1]
        fixed = {k: v for k, v in flat[0].items() if k not in varying and v is not None and k != "sweep"}
        typer.echo(f"sweep {cfg.name}: {len(grid)} cells into {out}")
        typer.echo("fixed: " + ", ".join(f"{k}={v}" for k, v in fixed.items()))
        rows = [{k: f.get(k) for k in varying} | {"cell": c.key()} for f, c in zip(flat, grid)]
        frame_table(f"sweep {cfg.name} (dry run)", pl.DataFrame(rows, infer_schema_length=None))
        return
    runner.check_executor(executor, address)
    runner.check_writable(out)
    resolved = cfg.resolved()
    write_bytes_atomic(out / sw.CONFIG_NAME, json.dumps(
        {"config": resolved, "source": str(Path(config).resolve()), "overrides": list(overrides or []),
         "swept": sw.swept(cfg)}, indent=2, default=str).encode())
    done = 0
    with run_log(out / sw.LOG_NAME) as log:
        pending = len(runner.pending(grid, out))
        done = len(grid) - pending
        log(f"sweep {cfg.name}: {len(grid)} cells into {out}, {done} already done")

        def on_done(cell, seconds):  # noqa: ANN001
            nonlocal done
            done += 1
            how = "done by another run" if seconds is None else f"done in {seconds:.1f} s"
            log(f"[{done}/{len(grid)}] cell {runner.describe(_short(cell))} {how}")

        stats = runner.run_cells(grid, out, executor=executor, jobs=jobs or os.cpu_count(), address=address,
                                 on_done=on_done, log=log)
        frame = sw.table(cfg, grid, out)
        prov = make_provenance({"experiment": sw.EXPERIMENT, "sweep": resolved}, seed=None,
                               argv=["shepherd", "sweep", str(config), *[f"--set={o}" for o in overrides or []]])
        written = write_artifact(frame, out / sw.RESULTS_NAME, "results", prov,
                                 extra={"synthetic": bool(frame.height and frame["synthetic"].any()),
                                        "sweep": True, "swept": sw.swept(cfg)})
        log(f"sweep {cfg.name}: {stats.ran} ran ({stats.recomputed} recomputed), {stats.skipped} cached → {written}")
    summary_table(f"sweep {cfg.name}", {"cells": stats.total, "ran": stats.ran, "cached": stats.skipped,
                                        "results": written, "next": f"shepherd report {out}"})


def _short(cell):  # noqa: ANN001, ANN202 - a Cell with only the parameters worth a log line
    from shepherd.experiments.base import Cell

    keep = ("policy", "trace", "load", "slo_ms", "gpus", "plan", "seed")
    return Cell(cell.experiment, {k: cell.params[k] for k in keep if cell.params.get(k) is not None})
