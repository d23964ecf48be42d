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



#: errno values that say the machine, not the program, refused an I/O operation: a full disk (ENOSPC,
#: EDQUOT), a file-size limit (EFBIG, ``ulimit -f``), a read-only file system (EROFS), no permission
#: (EACCES, EPERM). They are the user's to fix, so they get the one-line ``error:`` and exit 2.
ENVIRONMENT_ERRNOS = {"ENOSPC": "no space left on the device", "EDQUOT": "disk quota exceeded",
                      "EFBIG": "file too large (a file-size limit, ulimit -f)",
                      "EROFS": "read-only file system", "EACCES": "permission denied",
                      "EPERM": "operation not permitted"}


def environment_error(exc: BaseException) -> UserError | None:
    """The :class:`UserError` for an I/O refusal anywhere in ``exc``'s chain (its ``__cause__`` /
    ``__context__``), naming the path and the cause; None when the chain holds no such error.

    Libraries that wrap the OS error (pyarrow's ``ArrowIOError`` is an ``OSError`` whose errno may be
    unset, with ``[errno 28]`` in its message) are recognised by the errno in their text."""
    import errno as errno_mod
    import re

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError):
            code = exc.errno
            if code is None:
                found = re.search(r"errno[ =:]*(\d+)", str(exc), re.IGNORECASE)
                code = int(found.group(1)) if found else None
            name = errno_mod.errorcode.get(code or -1)
            if name in ENVIRONMENT_ERRNOS:
                where = exc.filename or "an output file"
                return UserError(f"cannot write {where}: {ENVIRONMENT_ERRNOS[name]} ({name})")
        exc = exc.__cause__ or exc.__context__
    return None
