"""Run experiment grids cell by cell: cached, resumable, local processes or Ray.

Each cell's result is stored at ``results/cells/<experiment>/<hash>.parquet``
where the hash is the content hash of the cell's parameters (STYLE.md
pattern 3). Writes are atomic, so a cell file exists only when the cell
finished: a re-run skips finished cells and a killed run resumes where it
stopped. A file at a cell's path is trusted only when it reads back whole and
the parameters stored in it hash to the cell's key; anything else (a
truncated file, another cell's file copied there) is recomputed.

Workers (local processes or Ray tasks) only *compute* a cell's frame and send
it back; the driver writes it, so a remote Ray cluster needs no shared
filesystem and both executors give byte-identical artifacts. Two runs on one
results folder share the work: the driver holds an exclusive lock
(``.<hash>.lock``) on each cell it computes, and a cell locked by the other
run is waited for and then read, not computed twice.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import time
from contextlib import ExitStack
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from shepherd.core.artifacts import (
    ArtifactSchema,
    file_lock,
    make_provenance,
    read_artifact,
    register_schema,
    write_artifact,
)
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


def _compute_timed(module: str, experiment: str, params: Mapping[str, Any]) -> tuple[pl.DataFrame, float]:
    """:func:`compute_cell` and its wall time in seconds (the time goes to the log, never into the cell)."""
    start = time.perf_counter()
    frame = compute_cell(module, experiment, params)
    return frame, time.perf_counter() - start


def _write_cell(cell: Cell, frame: pl.DataFrame, results_dir: Path) -> Path:
    prov = make_provenance(
        {"experiment": cell.experiment, "params": dict(cell.params), "key": cell.key()},
        seed=cell.params.get("seed"), argv=["shepherd", "cell", cell.experiment],
    )
    return write_artifact(frame, cell.path(results_dir), "cell", prov)


def cell_problem(cell: Cell, results_dir: Path) -> str | None:
    """Why the file at ``cell``'s path cannot be used as its result ("missing", …), or None if it can.

    The file must read back whole as a cell artifact, and the experiment and
    parameters stored in it must hash to ``cell``'s key.
    """
    return _check_cell(cell, results_dir)[0]


def read_cell(cell: Cell, results_dir: Path) -> pl.DataFrame | None:
    """The cell's result rows, or None when its file is missing or not this cell's."""
    return _check_cell(cell, results_dir)[1]


def _check_cell(cell: Cell, results_dir: Path) -> tuple[str | None, pl.DataFrame | None]:
    path = cell.path(results_dir)
    if not path.exists():
        return "missing", None
    try:
        art = read_artifact(path, "cell")
    except UserError as exc:
        return f"unreadable ({exc})", None
    stored = art.provenance.get("config", {})
    experiment, params = stored.get("experiment"), stored.get("params")
    if not isinstance(params, dict) or experiment != cell.experiment:
        return "is not a result of this experiment", None
    found = Cell(experiment, params).key()
    if found != cell.key():
        return f"holds another cell's result ({found})", None
    return None, art.frame


@dataclass
class RunStats:
    total: int
    skipped: int
    ran: int
    recomputed: int = 0  # cells whose file was unreadable or another cell's
    shared: int = 0  # cells another run on the same folder computed while this one waited


def pending(cells: Sequence[Cell], results_dir: Path) -> list[Cell]:
    """Cells without a usable result file (missing, unreadable, or another cell's)."""
    return [c for c in cells if cell_problem(c, results_dir) is not None]


def _lock_path(cell: Cell, results_dir: Path) -> Path:
    return results_dir / "cells" / cell.experiment / f".{cell.key()}.lock"


def run_cells(
    cells: Sequence[Cell],
    results_dir: Path,
    executor: str = "local",
    jobs: int | None = None,
    address: str | None = None,
    on_done: Callable[[Cell, float], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> RunStats:
    """Compute every cell without a usable result file; return counts.

    ``on_done(cell, seconds)`` is called after each cell is written (seconds
    of compute; 0 for a cell another run computed); ``log`` receives a line
    for every cell found unusable and recomputed.
    """
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    check_writable(results_dir)
    problems = {c.key(): cell_problem(c, results_dir) for c in cells}
    todo = [c for c in cells if problems[c.key()] is not None]
    stats = RunStats(total=len(cells), skipped=len(cells) - len(todo), ran=0)
    jobs = max(1, jobs or os.cpu_count() or 1)
    for c in todo:
        if problems[c.key()] != "missing":
            stats.recomputed += 1
            if log is not None:
                log(f"cell {describe(c)}: file {problems[c.key()]}; recomputing")
    if not todo:
        return stats

    theirs = _execute(todo, results_dir, executor, jobs, address, stats, on_done, wait=False)
    # Cells the other run was computing: wait for its lock, then use its file (or compute it here).
    _execute(theirs, results_dir, executor, jobs, address, stats, on_done, wait=True)
    return stats


class _Claims:
    """Exclusive locks on the cells this driver computes (at most the cells in flight are held)."""

    def __init__(self, results_dir: Path, stats: RunStats, on_done: Callable[[Cell, float], None] | None,
                 wait: bool) -> None:
        self.results_dir, self.stats, self.on_done, self.wait = results_dir, stats, on_done, wait
        self.held: dict[str, ExitStack] = {}
        self.theirs: list[Cell] = []

    def take(self, cell: Cell) -> bool:
        """Lock ``cell`` for computing here; False when another run holds it or has just written it."""
        stack = ExitStack()
        if not stack.enter_context(file_lock(_lock_path(cell, self.results_dir), blocking=self.wait)):
            stack.close()
            self.theirs.append(cell)
            return False
        if cell_problem(cell, self.results_dir) is None:  # the other run finished it meanwhile
            stack.close()
            self.stats.shared += 1
            self.stats.skipped += 1
            if self.on_done is not None:
                self.on_done(cell, 0.0)
            return False
        self.held[cell.key()] = stack
        return True

    def release(self, cell: Cell) -> None:
        stack = self.held.pop(cell.key(), None)
        if stack is not None:
            stack.close()

    def release_all(self) -> None:
        for stack in self.held.values():
            stack.close()
        self.held.clear()


def _execute(todo: Sequence[Cell], results_dir: Path, executor: str, jobs: int, address: str | None,
             stats: RunStats, on_done: Callable[[Cell, float], None] | None, wait: bool) -> list[Cell]:
    """Compute ``todo`` under per-cell locks; return the cells left to another run (``wait=False`` only)."""
    claims = _Claims(results_dir, stats, on_done, wait)

    def finish(cell: Cell, frame: pl.DataFrame, seconds: float) -> None:
        _write_cell(cell, frame, results_dir)
        claims.release(cell)
        stats.ran += 1
        if on_done is not None:
            on_done(cell, seconds)

    try:
        if not todo:
            pass
        elif executor == "ray":
            _run_ray(todo, claims.take, finish, jobs, address)
        elif jobs == 1 or len(todo) == 1:
            for cell in todo:
                if claims.take(cell):
                    finish(cell, *_compute_timed(_module_of(cell.experiment), cell.experiment, cell.params))
        else:
            _run_processes(todo, claims.take, finish, jobs)
    finally:
        claims.release_all()
    return claims.theirs


def describe(cell: Cell) -> str:
    """``fig07 policy=flex load=2 seed=0`` — a cell in one short line."""
    params = " ".join(f"{k}={_short(v)}" for k, v in cell.params.items())
    return f"{cell.experiment} {params}".strip()


def _short(value: Any) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 40 else text[:37] + "…"


def check_executor(executor: str, address: str | None = None) -> None:
    """Fail fast on an unknown executor or an unreachable Ray address."""
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    if executor == "ray" and address:
        _check_reachable(address)


def check_writable(results_dir: Path) -> None:
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"results directory {results_dir} is not writable: {exc.strerror}") from None
    if not os.access(results_dir, os.W_OK):
        raise UserError(f"results directory {results_dir} is not writable")


Finish = Callable[[Cell, pl.DataFrame, float], None]
Take = Callable[[Cell], bool]


def _run_processes(todo: Sequence[Cell], take: Take, finish: Finish, jobs: int) -> None:
    # spawn, not fork: polars' thread pool does not survive a fork.
    queue = list(todo)
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=get_context("spawn")) as pool:
        futures: dict = {}

        def top_up() -> None:  # keep every worker busy, claiming cells only as they are submitted
            while queue and len(futures) < jobs:
                c = queue.pop(0)
                if take(c):
                    futures[pool.submit(_compute_timed, _module_of(c.experiment), c.experiment, dict(c.params))] = c

        top_up()
        while futures:
            done, _ = wait(set(futures), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: futures[f].key()):
                finish(futures.pop(fut), *fut.result())
            top_up()


def _run_ray(todo: Sequence[Cell], take: Take, finish: Finish, jobs: int, address: str | None) -> None:
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
        remote = ray.remote(_compute_timed)
        queue = list(todo)
        refs: dict = {}
        window = 2 * jobs if address is None else max(2 * jobs, 64)
        while queue or refs:
            while queue and len(refs) < window:
                c = queue.pop(0)
                if take(c):
                    refs[remote.remote(_module_of(c.experiment), c.experiment, dict(c.params))] = c
            if not refs:
                break
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                finish(refs.pop(ref), *ray.get(ref))
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
        frame = read_cell(cell, results_dir)
        if frame is None:
            continue
        params = {k: v for k, v in cell.params.items() if k not in frame.columns}
        frame = frame.with_columns([pl.lit(v).alias(k) for k, v in params.items()])
        frames.append(frame.with_columns(pl.lit(cell.key()).alias("cell")))
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")


def results_path(results_dir: Path, experiment: str) -> Path:
    return results_dir / "data" / f"{experiment}.parquet"


def validate_grid(experiments: Sequence[Any], scale: Any, results_dir: Path) -> dict[str, list[Cell]]:
    """Every experiment's grid, built and checked before the first cell runs.

    Builds each grid (a bad parameter fails here, not an hour in), checks
    that every output path of the run can be written (the results folder, each
    experiment's cells folder and results artifact, figures, REPORT.md), and
    calls an experiment's optional ``check_inputs(scale)`` (data files it
    reads). Returns the cells by experiment name.
    """
    from shepherd.core.artifacts import check_output_file

    check_writable(results_dir)
    grids: dict[str, list[Cell]] = {}
    for exp in experiments:
        cells = list(exp.cells(scale))
        keys = [c.key() for c in cells]
        if len(set(keys)) != len(keys):
            raise UserError(f"experiment {exp.name}: its grid repeats a cell")
        check_inputs = getattr(exp, "check_inputs", None)
        if callable(check_inputs):
            check_inputs(scale)
        _check_folder(results_dir / "cells" / exp.name)
        check_output_file(results_path(results_dir, exp.name), "results artifact")
        grids[exp.name] = cells
    _check_folder(results_dir / "figures")
    check_output_file(results_dir / "REPORT.md", "report")
    check_output_file(results_dir / LOG_NAME, "log")
    return grids


LOG_NAME = "reproduce.log"


def _check_folder(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise UserError(f"{path} is a file where a folder of results belongs; move it away")
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        raise UserError(f"{path} is not writable")
