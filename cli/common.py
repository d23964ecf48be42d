"""Conventions shared by every subcommand (DESIGN.md "CLI surface").

* ``-o/--out`` and ``--seed`` options with the same names everywhere;
* progress bars on stderr for anything that may take over a second;
* a rich summary table on stdout on success;
* user errors raise :class:`~shepherd.core.errors.UserError`; the entry point
  (``shepherd.cli.app.main``) prints them as one line and exits 2.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Mapping

import typer
from rich.console import Console
from rich.table import Table

from shepherd.cli.log import run_log

console = Console()
err_console = Console(stderr=True)

SeedOption = Annotated[int, typer.Option("--seed", min=0, help="Seed of the one random generator every draw flows from.")]


LOG_QUIET_S = 2.0  # a task younger than this logs nothing (short work, user errors: one line)


class LogProgress:
    """Progress as plain log lines: what a batch job's log needs (``write`` adds the time stamp).

    The same three calls as rich's :class:`~rich.progress.Progress`
    (``add_task``, ``update``, ``advance``). A task stays quiet for its first
    ``quiet_s`` seconds (short work logs nothing, so a user error stays one
    line); after that it logs at most every ``every_s`` seconds or at each
    tenth of its total, and once more when it completes.
    """

    def __init__(self, write: Callable[[str], None], every_s: float = 10.0, quiet_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._write = write
        self._clock = clock
        self._every_s = every_s
        self._quiet_s = LOG_QUIET_S if quiet_s is None else quiet_s
        self._tasks: dict[int, dict[str, Any]] = {}

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        task = len(self._tasks)
        now = self._clock()
        self._tasks[task] = dict(description=description, total=total, completed=0.0,
                                 start=now, logged_at=now - self._every_s, logged_tenth=0, done=False, said=False)
        return task

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def update(self, task: int, *, completed: float | None = None, advance: float | None = None,
               total: float | None = None, **_: Any) -> None:
        state = self._tasks[task]
        if total is not None:
            state["total"] = total
        if completed is not None:
            state["completed"] = float(completed)
        if advance is not None:
            state["completed"] += float(advance)
        total_now = state["total"]
        now = self._clock()
        if total_now and state["completed"] >= total_now:
            if not state["done"]:
                state["done"] = True
                if state["said"] or now - state["start"] >= self._quiet_s:
                    self._log(task, "done", now)
            return
        tenth = int(10 * state["completed"] / total_now) if total_now else 0
        if now - state["start"] < self._quiet_s:
            return
        if now - state["logged_at"] >= self._every_s or tenth > state["logged_tenth"]:
            state["logged_at"], state["logged_tenth"] = now, tenth
            self._log(task, "", now)

    def _log(self, task: int, word: str, now: float) -> None:
        state = self._tasks[task]
        state["said"] = True
        done, total = state["completed"], state["total"]
        count = f"{done:,.0f}/{total:,.0f} ({100 * done / total:.0f} %)" if total else f"{done:,.0f}"
        elapsed = now - state["start"]
        self._write(f"{state['description']}: {word + ' ' if word else ''}{count}, {elapsed:.1f} s")

    def finish(self) -> None:
        now = self._clock()
        for task, state in self._tasks.items():
            if not state["done"] and state["total"] is None:
                state["done"] = True
                if state["said"] or now - state["start"] >= self._quiet_s:
                    self._log(task, "done", now)


@contextmanager
def progress(transient: bool = True) -> Iterator[Any]:
    """Progress on stderr (kept off stdout so output stays parseable).

    On a terminal: a rich progress bar. Otherwise (output redirected, a batch
    job): the same calls become plain timestamped lines (:class:`LogProgress`
    through :class:`~shepherd.cli.log.RunLog`).
    """
    if not err_console.is_terminal:
        with run_log(echo=True) as log:
            lines = LogProgress(log)
            yield lines
            lines.finish()
        return
    # here: a run whose stderr is no terminal (a batch job, a benchmark) never draws a bar (issue 43)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
    )
    with bar:
        yield bar


def summary_table(title: str, rows: Mapping[str, Any]) -> None:
    """Print a two-column rich summary table (what was done, where it went)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in rows.items():
        table.add_row(str(key), _fmt(value))
    console.print(table)


def frame_table(title: str, frame: Any, float_digits: int = 3) -> None:
    """Print a polars DataFrame as a rich table."""
    table = Table(title=title, title_justify="left")
    for col in frame.columns:
        table.add_column(col, justify="right" if frame.schema[col].is_numeric() else "left")
    for row in frame.iter_rows():
        table.add_row(*[_fmt(v, float_digits) for v in row])
    console.print(table)


def _fmt(value: Any, float_digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{float_digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, Path):
        return str(value)
    return str(value)
