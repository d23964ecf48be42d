"""Run a grid of cells into a results folder: the part ``sweep`` and ``capacity`` share.

The folder gets the resolved config (``sweep.json`` / ``capacity.json``: what
marks it for ``report`` and ``runs list``), a log, the cells and the tidy
results table. Everything the config can be wrong about was checked before
this runs, so a bad config leaves no folder behind.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from shepherd.cli.log import run_log

ADDRESS_HELP = ("Ray cluster address host:port (with --executor ray; default: $RAY_ADDRESS if set, else a private "
                "local Ray of --jobs CPUs started for this run, never a cluster Ray last recorded on this machine).")
#: one --jobs default in every command: every core — cells (and serving groups run apart) are independent
#: processes, so a machine's cores are what bounds the wall time; pass -j N to leave cores to other work
JOBS_HELP = "Parallel local processes (default: every core, os.cpu_count(): the work is independent processes; " \
            "-j N leaves cores to other work)."


def ray_address(new: Optional[str], old: Optional[str]) -> Optional[str]:
    """``--ray-address``, or its deprecated spelling ``--address`` (one notice on stderr)."""
    from shepherd.cli.deprecated import renamed

    return renamed(new, old, "--ray-address", "--address")


def default_jobs(jobs: Optional[int]) -> int:
    """``--jobs``: default every core (os.cpu_count()), the same in every command."""
    from shepherd.core.errors import UserError

    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs must be ≥ 1, got {jobs}")
    return jobs or os.cpu_count() or 1


@dataclass
class Written:
    stats: Any
    frame: Any
    results: Path


def run_grid(kind: str, name: str, grid: list, out: Path, meta: dict, table: Callable[[], Any], argv: list[str],
             executor: str, jobs: int, address: Optional[str], marker: str, log_name: str, extra: dict,
             resolved: dict) -> Written:
    """Write ``marker``, run every pending cell of ``grid`` (logging each), write ``results.parquet``."""
    from shepherd.core.artifacts import make_provenance, write_artifact, write_bytes_atomic
    from shepherd.experiments import runner

    runner.check_executor(executor, address)
    runner.check_writable(out)
    write_bytes_atomic(out / marker, json.dumps(meta, indent=2, default=str).encode())
    with run_log(out / log_name) as log:
        done = len(grid) - len(runner.pending(grid, out))
        log(f"{kind} {name}: {len(grid)} cells into {out}, {done} already done")

        def on_done(cell, seconds):  # noqa: ANN001
            nonlocal done
            done += 1
            how = "done by another run" if seconds is None else f"done in {seconds:.1f} s"
            log(f"[{done}/{len(grid)}] cell {runner.describe(short(cell))} {how}")

        stats = runner.run_cells(grid, out, executor=executor, jobs=jobs, address=address, on_done=on_done, log=log,
                                 log_file=log.file)
        frame = table()
        prov = make_provenance({"experiment": kind, kind: resolved}, seed=None, argv=argv)
        written = write_artifact(frame, out / "results.parquet", "results", prov,
                                 extra={"synthetic": bool(frame.height and frame["synthetic"].any()), **extra})
        log(f"{kind} {name}: {stats.ran} ran ({stats.recomputed} recomputed), {stats.skipped} cached → {written}")
    return Written(stats, frame, written)


def short(cell):  # noqa: ANN001, ANN201 - a Cell with only the parameters worth a log line
    from shepherd.experiments.base import Cell

    keep = ("policy", "trace", "load", "slo_ms", "gpus", "plan", "seed", "target")
    return Cell(cell.experiment, {k: cell.params[k] for k in keep if cell.params.get(k) is not None})


def dry_run_table(title: str, flat: list[dict], keys: list[str], out: Path) -> None:
    """Print a grid: what is fixed on one line, a row per cell of what varies."""
    import polars as pl

    from shepherd.cli.common import frame_table

    varying = [k for k in flat[0] if len({repr(f.get(k)) for f in flat}) > 1]
    fixed = {k: v for k, v in flat[0].items() if k not in varying and v is not None and k != "sweep"}
    typer.echo(f"{title}: {len(flat)} cells into {out}")
    typer.echo("fixed: " + ", ".join(f"{k}={v}" for k, v in fixed.items()))
    rows = [{k: f.get(k) for k in varying} | {"cell": key} for f, key in zip(flat, keys)]
    frame_table(f"{title} (dry run)", pl.DataFrame(rows, infer_schema_length=None))


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
