"""Run experiment grids cell by cell: cached, resumable, local processes or Ray.

Each cell's result is stored at ``results/cells/<experiment>/<hash>.parquet``
where the hash is the content hash of the cell's parameters (STYLE.md
pattern 3). Writes are atomic, so a cell file exists only when the cell
finished: a re-run skips finished cells and a killed run resumes where it
stopped. Workers (local processes or Ray tasks) only *compute* a cell's frame
and send it back; the driver writes it, so a remote Ray cluster needs no
shared filesystem and both executors give byte-identical artifacts.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from shepherd.core.artifacts import ArtifactSchema, make_provenance, read_artifact, register_schema, write_artifact
from shepherd.core.errors import UserError
from shepherd.experiments import registry
from shepherd.experiments.base import Cell

register_schema(ArtifactSchema(
    kind="cell",
    doc="Result rows of one experiment cell (columns are the experiment's own).",
    required=(),
))
register_schema(ArtifactSchema(
    kind="results",
    doc="All cells of one experiment, each result row joined with its cell parameters.",
    required=(),
))

EXECUTORS = ("local", "ray")


def compute_cell(module: str, experiment: str, params: Mapping[str, Any]) -> pl.DataFrame:
    """Run one cell (in whatever process this is); pure in ``params``.

    ``module`` is the experiment's defining module, imported first so that the
    experiment is registered in a fresh worker process.
    """
    importlib.import_module(module)
    return registry.get(experiment).run_cell(dict(params))


def _module_of(experiment: str) -> str:
    return type(registry.get(experiment)).__module__


def _write_cell(cell: Cell, frame: pl.DataFrame, results_dir: Path) -> Path:
    prov = make_provenance(
        {"experiment": cell.experiment, "params": dict(cell.params)},
        seed=cell.params.get("seed"), argv=["shepherd", "cell", cell.experiment],
    )
    return write_artifact(frame, cell.path(results_dir), "cell", prov)


@dataclass
class RunStats:
    total: int
    skipped: int
    ran: int


def pending(cells: Sequence[Cell], results_dir: Path) -> list[Cell]:
    return [c for c in cells if not c.path(results_dir).exists()]


def run_cells(
    cells: Sequence[Cell],
    results_dir: Path,
    executor: str = "local",
    jobs: int | None = None,
    address: str | None = None,
    on_done: Callable[[Cell], None] | None = None,
) -> RunStats:
    """Compute every cell whose result file is missing; return counts."""
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    check_writable(results_dir)
    todo = pending(cells, results_dir)
    stats = RunStats(total=len(cells), skipped=len(cells) - len(todo), ran=0)
    jobs = max(1, jobs or os.cpu_count() or 1)

    def finish(cell: Cell, frame: pl.DataFrame) -> None:
        _write_cell(cell, frame, results_dir)
        stats.ran += 1
        if on_done is not None:
            on_done(cell)

    if not todo:
        return stats
    if executor == "ray":
        _run_ray(todo, finish, jobs, address)
    elif jobs == 1 or len(todo) == 1:
        for cell in todo:
            finish(cell, compute_cell(_module_of(cell.experiment), cell.experiment, cell.params))
    else:
        _run_processes(todo, finish, jobs)
    return stats


def check_writable(results_dir: Path) -> None:
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"results directory {results_dir} is not writable: {exc.strerror}") from None
    if not os.access(results_dir, os.W_OK):
        raise UserError(f"results directory {results_dir} is not writable")


def _run_processes(todo: Sequence[Cell], finish: Callable[[Cell, pl.DataFrame], None], jobs: int) -> None:
    # spawn, not fork: polars' thread pool does not survive a fork.
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(compute_cell, _module_of(c.experiment), c.experiment, dict(c.params)): c
                   for c in todo}
        remaining = set(futures)
        while remaining:
            done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: futures[f].key()):
                finish(futures[fut], fut.result())


def _run_ray(todo: Sequence[Cell], finish: Callable[[Cell, pl.DataFrame], None], jobs: int,
             address: str | None) -> None:
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install -e '.[ray]'") from None
    started_here = False
    if not ray.is_initialized():
        try:
            if address:
                _check_reachable(address)
                ray.init(address=address, log_to_driver=False)
            else:
                # A local cluster sees exactly the driver's import path, so
                # experiments defined outside the package resolve in workers too.
                path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
                ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": path}})
            started_here = True
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, …
            where = address or "a local cluster"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"cannot connect to Ray at {where}: {first}") from None
    try:
        remote = ray.remote(compute_cell)
        refs = {remote.remote(_module_of(c.experiment), c.experiment, dict(c.params)): c for c in todo}
        remaining = list(refs)
        while remaining:
            done, remaining = ray.wait(remaining, num_returns=1)
            for ref in done:
                finish(refs[ref], ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()


def _check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast on an unreachable cluster (ray.init would retry for minutes)."""
    if address == "auto":
        return
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"Ray address '{address}' is not of the form host:port")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise UserError(f"Ray address {address} is unreachable: {exc.strerror or exc}") from None


def collect(cells: Sequence[Cell], results_dir: Path) -> pl.DataFrame:
    """Every finished cell's rows, each joined with its parameters (as columns)."""
    frames = []
    for cell in cells:
        path = cell.path(results_dir)
        if not path.exists():
            continue
        frame = read_artifact(path, "cell").frame
        params = {k: v for k, v in cell.params.items() if k not in frame.columns}
        frame = frame.with_columns([pl.lit(v).alias(k) for k, v in params.items()])
        frames.append(frame.with_columns(pl.lit(cell.key()).alias("cell")))
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")


def results_path(results_dir: Path, experiment: str) -> Path:
    return results_dir / "data" / f"{experiment}.parquet"
