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

