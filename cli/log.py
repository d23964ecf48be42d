"""Progress as plain log lines (DESIGN.md "CLI surface": plain log lines when not on a terminal).

A long command (``reproduce``) shows a rich bar on a terminal; in a batch job
(stderr redirected to a file) a bar prints nothing useful, so each step is
logged as one timestamped line instead. Lines also go to a log file when one
is given (e.g. ``results/reproduce.log``), whatever stderr is.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Iterator

from shepherd.core.outputs import normal_mode


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class RunLog:
    """Writes ``2026-11-23T15:40:01Z message`` lines to stderr (``echo``) and to ``file`` (with the PID)."""

    def __init__(self, file: Path | None = None, echo: bool | None = None) -> None:
        self.echo = (not stderr_is_terminal()) if echo is None else echo
        self._fh: IO[str] | None = None
        if file is not None:
            file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, normal_mode())
            self._fh = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
        self.file = file

    def __call__(self, message: str, echo: bool = True) -> None:
        """Log one line (``echo=False``: to the file only, e.g. an error the CLI prints itself)."""
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = f"{stamp} {' '.join(str(message).split())}\n"
        if self.echo and echo:
            sys.stderr.write(line)
            sys.stderr.flush()
        if self._fh is not None:
            # Two runs may share the file: each line says which wrote it, in one append (no interleaving).
            self._fh.write(f"{stamp} [pid {os.getpid()}] {line.split(' ', 1)[1]}")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


@contextmanager
def run_log(file: Path | None = None, echo: bool | None = None) -> Iterator[RunLog]:
    """A :class:`RunLog` closed on exit; ``echo`` defaults to "stderr is not a terminal"."""
    log = RunLog(file, echo)
    try:
        yield log
    finally:
        log.close()
