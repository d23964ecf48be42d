"""File digests: one helper, on the standard library's :func:`hashlib.file_digest`, and what names a file's
bytes without reading them (:func:`file_identity`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: digests a trusted cache already holds, by :func:`file_identity` (:func:`remember`; this process only)
_KNOWN: dict[tuple, str] = {}


def file_identity(path: str | os.PathLike[str]) -> tuple | None:
    """What names ``path``'s bytes without reading them — its resolved path, size, modification time (ns),
    inode and device — or None if unreadable: a rewritten, replaced or touched file has another."""
    try:
        real = Path(path).resolve()
        st = real.stat()
    except OSError:
        return None
    return (str(real), st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def remember(identity: tuple, digest: str) -> None:
    """Record that the file with ``identity`` has SHA-256 ``digest`` (what a cache entry named by that
    identity stored when it read the file: :mod:`shepherd.core.trace_columns`), so :func:`sha256_file` of it
    in this process does not read it again."""
    _KNOWN[identity] = digest


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, as 64 lowercase hex digits (a remembered one when the file's identity is
    the one remembered: :func:`remember`)."""
    if _KNOWN:
        known = _KNOWN.get(file_identity(path))  # type: ignore[arg-type]
        if known is not None:
            return known
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def is_sha256(text: str) -> bool:
    """Whether ``text`` is 64 hexadecimal digits (either case)."""
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)
