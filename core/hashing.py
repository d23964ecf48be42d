"""File digests: one helper, on the standard library's :func:`hashlib.file_digest`."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, as 64 lowercase hex digits."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def is_sha256(text: str) -> bool:
    """Whether ``text`` is 64 hexadecimal digits (either case)."""
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)
