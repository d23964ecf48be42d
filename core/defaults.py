"""Defaults every command shares, importable without the engine (``shepherd --help`` stays fast).

The CLI's option definitions read these at import; :mod:`shepherd.core.profiles` re-exports them, so
``profiles.DEFAULT_TABLE`` and ``profiles.DEFAULT_MAX_BATCH`` keep working.
"""

from __future__ import annotations

#: the built-in profiles when none are given (Shepherd Table 4)
DEFAULT_TABLE = "shepherd-v100"
#: the largest batch by default (Shepherd §5.2: 128)
DEFAULT_MAX_BATCH = 128
