"""numba's on-disk cache loaded without its context refresh (issue 43: the fixed part of a run).

numba's ``Cache.load_overload`` first calls ``target_context.refresh()``, which imports some thirty modules of
lowering and typing code (``numba.cpython.unicode``, cffi's C parser, ``numba.np.arraymath`` …) and installs
their registries: ≈ 0.1 CPU-s of a small run's ≈ 0.8. A *load* uses none of it. A cache entry is object code
and pickled descriptors; loading it links the code — against numba's C helpers (installed when the target
context is made) and the NRT's (``rtsys.initialize``, called here) — and wraps its entry point. The
registries matter only to a *compile*, and numba refreshes both contexts at the start of every compile
(``CompilerBase.__init__``) and again when a lowering is missing (``BaseContext.get_function``), so a cache
miss or a new signature after such a load compiles exactly as before (``tests/test_jitcache.py``).

:func:`without_refresh` is applied by :func:`shepherd.core.engine.fast.jitcache.guard` to every cached kernel
of the fast wing; where numba's cache lacks the two private names it uses (another numba), numba's own
``load_overload`` stays.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: the file numba's configuration reads from the working directory, with PyYAML (numba/core/config.py)
NUMBA_CONFIG_FILE = ".numba_config.yaml"


def import_numba() -> None:
    """Import numba, without PyYAML where numba would not use it (issue 43: ≈ 10 ms of every run's imports).

    numba's configuration imports ``yaml`` when numba is imported, for one use: reading a ``.numba_config.yaml``
    in the working directory. Where there is none (and nothing has imported yaml yet), yaml is hidden for
    that one import: numba's settings come from its environment variables exactly as they would, and yaml
    stays importable afterwards for whoever needs it (Ray's executor). Where the file exists, numba is imported
    as usual and reads it. Called by :mod:`shepherd.core.engine.fast` before any of its modules imports numba.
    (A config file put there later, in the same process, would not be read: numba would warn that PyYAML is
    missing — where without this it would read it at its next configuration reload.)
    """
    if "numba" in sys.modules or "yaml" in sys.modules or os.path.exists(NUMBA_CONFIG_FILE):
        import numba  # noqa: F401 - as usual
        return
    sys.modules["yaml"] = None  # type: ignore[assignment] - an import of yaml raises ImportError meanwhile
    try:
        import numba  # noqa: F401
    finally:
        if "yaml" in sys.modules and sys.modules["yaml"] is None:
            del sys.modules["yaml"]


def without_refresh(cache: Any) -> None:
    """Make ``cache`` (a dispatcher's ``_cache``) load without the refresh (module docstring)."""
    load = getattr(cache, "_load_overload", None)
    io_guard = getattr(cache, "_guard_against_spurious_io_errors", None)
    if load is None or io_guard is None:
        return

    def load_overload(sig: Any, target_context: Any) -> Any:
        from numba.core.runtime import rtsys

        rtsys.initialize(target_context)  # the NRT's symbols and atomics: what loaded code links against
        with io_guard():
            return load(sig, target_context)
        return None  # the guard swallowed an I/O error (Windows only): numba compiles, as its own load does

    cache.load_overload = load_overload
