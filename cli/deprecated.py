"""Old option spellings kept one release (STYLE.md pattern 16: one meaning per option name).

A renamed option keeps its old spelling as a hidden option; :func:`renamed`
merges the two and prints one deprecation line on stderr when the old one was
used.
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from shepherd.core.errors import UserError

T = TypeVar("T")


def renamed(new_value: T, old_value: Any, new: str, old: str, default: Any = None) -> T:
    """The value of ``new``, or of its deprecated spelling ``old`` (with a one-line notice on stderr)."""
    if old_value is None:
        return new_value
    if new_value != default and new_value is not None:
        raise UserError(f"give {new} or its deprecated spelling {old}, not both")
    sys.stderr.write(f"warning: {old} is deprecated and will be removed in the next release; use {new}\n")
    return old_value
