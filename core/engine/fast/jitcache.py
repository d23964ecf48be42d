"""Keep numba's on-disk JIT cache honest about the helpers a kernel inlines.

numba keys a cached function by the stamp (modification time and size) of the file that defines it, and
nothing else: a kernel in ``flex.py`` that inlines helpers from ``common.py`` keeps loading its old machine
code after ``common.py`` changes, so a developer's edit to a shared helper would silently not take effect
(tests could pass on stale code). :func:`refresh` closes that gap: each kernel module calls it once at
import with the files it inlines from; when their contents' digest differs from the one recorded beside the
module's cache, the module's cached functions are flushed (numba recompiles them on first call) and the new
digest is recorded. A fresh checkout has no cache and is unaffected; a clean CI clone never sees this.
:func:`refresh` also hands the module's kernels to :mod:`~shepherd.core.engine.fast.compile_once`: a first
compile is announced on stderr and done by one process at a time.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from types import ModuleType


def digest(paths: list[str]) -> str:
    """SHA-256 over the named files' contents, in the order given."""
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def _cached_dispatchers(module: ModuleType) -> list:
    """The module's own numba functions compiled with ``cache=True``."""
    out = []
    for obj in vars(module).values():
        cache = getattr(obj, "_cache", None)
        py_func = getattr(obj, "py_func", None)
        if cache is None or py_func is None or py_func.__module__ != module.__name__:
            continue
        if hasattr(cache, "flush") and hasattr(cache, "cache_path"):
            out.append(obj)
    return out


def refresh(module_name: str, *deps: ModuleType) -> bool:
    """Flush the cached kernels of module ``module_name`` if the modules in ``deps`` (what it inlines or reads
    constants from) changed since they were cached; called at the bottom of a kernel module.

    Returns True when a flush happened. Failures to read or write the record (a read-only install, a race
    with another process) leave the cache as numba has it: the worst case is one needless recompile.
    """
    module = sys.modules[module_name]
    dispatchers = _cached_dispatchers(module)
    if not dispatchers:
        return False
    from shepherd.core.engine.fast import compile_once

    compile_once.guard(module_name, dispatchers)  # a first compile: announced, one process at a time
    want = digest([d.__file__ for d in deps])
    record = Path(dispatchers[0]._cache.cache_path) / f"{module.__name__.rsplit('.', 1)[-1]}.deps-sha256"
    try:
        have = record.read_text().strip()
    except OSError:
        have = None
    if have == want:
        return False
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        for d in dispatchers:
            d._cache.flush()
        tmp = record.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(want + "\n")
        os.replace(tmp, record)
    except OSError:
        return False
    return True
