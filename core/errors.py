"""User-facing errors.

Anything the user can fix (a missing file, a malformed trace, an unknown name,
a bad value, an infeasible plan) raises :class:`UserError`. The CLI prints its
message as one line ``error: …`` on stderr and exits with code 2; only
``--verbose`` shows a traceback. Programming errors stay ordinary exceptions.
"""

from __future__ import annotations


class UserError(Exception):
    """An error caused by the user's input; exit code 2, one-line message."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # One line, always: the CLI contract promises a single error line.
        super().__init__(" ".join(str(message).split()))


def check_number(
    name: str,
    value: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    allow_inf: bool = False,
) -> float:
    """Check one numeric option; raise a one-line :class:`UserError` naming it.

    ``minimum``/``maximum`` are inclusive bounds, ``above`` an exclusive lower
    bound. NaN is always refused; infinity only passes with ``allow_inf``
    (e.g. ``--affinity-k inf`` meaning "no bound"). Huge sizes are refused up
    front through ``maximum``, with the limit named, rather than discovered as
    a MemoryError after minutes of work.
    """
    if value != value or (not allow_inf and value in (float("inf"), float("-inf"))):
        raise UserError(f"{name} must be a finite number, got {value}")
    if above is not None and not value > above:
        raise UserError(f"{name} must be > {above:g}, got {value:g}")
    if minimum is not None and value < minimum:
        raise UserError(f"{name} must be ≥ {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise UserError(f"{name} must be ≤ {maximum:g} (the toolkit's limit), got {value:g}")
    return value
