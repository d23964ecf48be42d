"""Run experiment grids cell by cell: cached, resumable, local processes or Ray.

Each cell's result is stored at ``results/cells/<experiment>/<hash>.parquet``
where the hash is the content hash of the cell's parameters (STYLE.md
pattern 3). Writes are atomic, so a cell file exists only when the cell
finished: a re-run skips finished cells and a killed run resumes where it
stopped. A file at a cell's path is trusted only when it reads back whole and
the parameters stored in it hash to the cell's key; anything else (a
truncated file, another cell's file copied there) is recomputed.

Workers (local processes or Ray tasks, :mod:`shepherd.experiments.executors`)
only *compute* a cell's frame and send it back; the driver writes it, so a
remote Ray cluster needs no shared filesystem and both executors give
byte-identical artifacts. Two runs on one
results folder share the work: the driver holds an exclusive lock
(``.<hash>.lock``) on each cell it computes, and a cell locked by the other
run is waited for and then read, not computed twice.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

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
from shepherd.experiments.base import Cell
from shepherd.experiments.executors import (  # noqa: F401 - compute_cell, check_executor: part of this API
    EXECUTORS,
    check_executor,
    compute_cell,
    compute_timed,
    module_of,
    run_processes,
    run_ray,
)

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


def _write_cell(cell: Cell, frame: pl.DataFrame, results_dir: Path, engines: Sequence[dict] = ()) -> Path:
    """The cell's file; ``engines``: which engine each distinct simulation of the cell took and why
    (:func:`~shepherd.experiments.executors.compute_recorded`), in its provenance."""
    prov = make_provenance(
        {"experiment": cell.experiment, "params": dict(cell.params), "key": cell.key()},
        seed=cell.params.get("seed"), argv=["shepherd", "cell", cell.experiment],
    )
    # outside the hashed content (the cell's run record): the tables are the same whichever engine ran
    return write_artifact(frame, cell.path(results_dir), "cell", prov, run={"engines": list(engines)} if engines else None)


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


OnDone = Callable[[Cell, "float | None"], None]  # (cell, seconds of compute; None: another run computed it)


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
    on_done: OnDone | None = None,
    log: Callable[[str], None] | None = None,
    log_file: Path | None = None,
) -> RunStats:
    """Compute every cell without a usable result file; return counts.

    ``on_done(cell, seconds)`` is called after each cell is written (seconds
    of compute; None for a cell another run computed); ``log`` receives a line
    for every cell found unusable and recomputed. ``log_file``: where Ray's driver logging goes with the
    Ray executor (the run's log file; :func:`shepherd.core.workers.ray_session`).
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

    while todo:
        theirs = _execute(todo, results_dir, executor, jobs, address, stats, on_done, log_file)
        # Cells another run is computing: wait until it lets go (holding no lock ourselves, so two
        # runs never wait on each other), then take its result or compute what it left undone.
        for cell in theirs:
            with file_lock(_lock_path(cell, results_dir)):
                pass
        todo = theirs
    return stats


class _Claims:
    """Exclusive locks on the cells this driver computes (at most the cells in flight are held)."""

    def __init__(self, results_dir: Path, stats: RunStats, on_done: OnDone | None) -> None:
        self.results_dir, self.stats, self.on_done = results_dir, stats, on_done
        self.held: dict[str, ExitStack] = {}
        self.theirs: list[Cell] = []

    def take(self, cell: Cell) -> bool:
        """Lock ``cell`` for computing here; False when another run holds it or has just written it."""
        stack = ExitStack()
        if not stack.enter_context(file_lock(_lock_path(cell, self.results_dir), blocking=False)):
            stack.close()
            self.theirs.append(cell)
            return False
        if cell_problem(cell, self.results_dir) is None:  # the other run finished it meanwhile
            stack.close()
            self.stats.shared += 1
            self.stats.skipped += 1
            if self.on_done is not None:
                self.on_done(cell, None)
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
             stats: RunStats, on_done: OnDone | None, log_file: Path | None = None) -> list[Cell]:
    """Compute the cells of ``todo`` that no other run holds, each under its lock; return the others."""
    claims = _Claims(results_dir, stats, on_done)

    def finish(cell: Cell, frame: pl.DataFrame, seconds: float, engines: list) -> None:
        _write_cell(cell, frame, results_dir, engines)
        claims.release(cell)
        stats.ran += 1
        if on_done is not None:
            on_done(cell, seconds)

    try:
        if not todo:
            pass
        elif executor == "ray":
            run_ray(todo, claims.take, finish, jobs, address, log_file)
        elif jobs == 1 or len(todo) == 1:
            for cell in todo:
                if claims.take(cell):
                    finish(cell, *compute_timed(module_of(cell.experiment), cell.experiment, cell.params))
        else:
            run_processes(todo, claims.take, finish, jobs)
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


def check_writable(results_dir: Path) -> None:
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"results directory {results_dir} is not writable: {exc.strerror}") from None
    if not os.access(results_dir, os.W_OK):
        raise UserError(f"results directory {results_dir} is not writable")


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
    experiment's cells folder and results artifact, figures, REPORT.md).
    Inputs read from outside the package are checked earlier, before the
    results folder exists (``Experiment.check_inputs``, called by
    ``shepherd reproduce``). Returns the cells by experiment name.
    """
    from shepherd.core.artifacts import check_output_file

    check_writable(results_dir)
    grids: dict[str, list[Cell]] = {}
    for exp in experiments:
        cells = list(exp.cells(scale))
        keys = [c.key() for c in cells]
        if len(set(keys)) != len(keys):
            raise UserError(f"experiment {exp.name}: its grid repeats a cell")
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
