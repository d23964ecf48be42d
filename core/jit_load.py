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

from typing import Any


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
