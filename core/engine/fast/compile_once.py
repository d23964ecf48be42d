"""The first compile of a kernel family: announced on stderr, and done by one process at a time.

numba compiles a ``cache=True`` kernel on its first call when the on-disk cache has no machine code for it
(a fresh machine, a changed source): 60–90 s per family with nothing on screen, and in a sweep every
worker process would compile the same family at once. :func:`guard` (called by
:func:`~shepherd.core.engine.fast.jitcache.refresh`, so every kernel module has it) wraps each cached
dispatcher's ``compile`` so that

* it holds a per-family file lock beside the cache (``<family>.compile-lock``, ``fcntl.flock``) while it
  compiles or loads: a second process that needs the same family waits, then loads the first one's machine
  code from the cache instead of compiling it again (numba's ``compile`` re-reads the cache after the wait);
* the first real compile (numba's ``numba:compile`` event: a cache miss) prints one line on stderr,
  ``compiling the flex kernel, once per machine, ~1 min`` — once per family and process, and not for the
  helpers compiled inside it.

The lock is re-entrant within a process (a kernel compiles the helpers it calls under the same family's
lock). Where ``fcntl`` or the cache folder is unavailable, compiles run unlocked (the worst case: the same
family compiled twice at once, as numba does by itself). ``shepherd warmup`` compiles every family ahead.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

#: the announcement, per family (the short name of its module)
MESSAGE = "compiling the {family} kernel, once per machine, ~1 min"

_GUARDED: dict[int, str] = {}  # id(dispatcher) → family
_ANNOUNCED: set[str] = set()
_HELD: dict[str, list] = {}  # family → [depth, open lock file]
_THREAD_LOCKS: dict[str, threading.RLock] = {}
_STATE = threading.Lock()
_COMPILING = threading.local()
_LISTENING = False


#: how a module's family reads in the announcement (the module's short name otherwise: flex, clockwork …)
SAID = {"common": "shared"}


def family_of(module_name: str) -> str:
    """``shepherd.core.engine.fast.flex`` → ``flex``."""
    short = module_name.rsplit(".", 1)[-1]
    return SAID.get(short, short)


def guard(module_name: str, dispatchers: list) -> None:
    """Wrap each ``cache=True`` dispatcher of module ``module_name`` (idempotent)."""
    family = family_of(module_name)
    _listen()
    for d in dispatchers:
        if id(d) in _GUARDED:
            continue
        try:
            lock_path = Path(d._cache.cache_path) / f"{family}.compile-lock"
        except AttributeError:
            continue
        _GUARDED[id(d)] = family
        d.compile = _locked(d.compile, family, lock_path)


def _locked(compile_: Any, family: str, lock_path: Path) -> Any:
    def compile(sig: Any) -> Any:
        with family_lock(family, lock_path):
            return compile_(sig)

    compile.__wrapped__ = compile_  # type: ignore[attr-defined]
    return compile


@contextmanager
def family_lock(family: str, lock_path: Path) -> Iterator[None]:
    """Hold ``family``'s file lock (re-entrant in this process; a no-op where locking is unavailable)."""
    with _STATE:
        rlock = _THREAD_LOCKS.setdefault(family, threading.RLock())
    with rlock:
        held = _HELD.get(family)
        if held is None:
            handle = _open_lock(lock_path)
            held = _HELD[family] = [0, handle]
        held[0] += 1
        try:
            yield
        finally:
            held[0] -= 1
            if held[0] == 0:
                _HELD.pop(family, None)
                if held[1] is not None:
                    held[1].close()  # closing the file releases the flock


def _open_lock(lock_path: Path) -> Any:
    """The lock file, opened and exclusively locked (blocks while another process holds it); None if unavailable."""
    if fcntl is None:
        return None
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a+b")  # noqa: SIM115 - kept open while the lock is held
    except OSError:
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    except OSError:
        handle.close()
        return None
    return handle


def _listen() -> None:
    """Register the ``numba:compile`` listener once (it fires on cache misses only)."""
    global _LISTENING
    if _LISTENING:
        return
    from numba.core import event

    class Announce(event.Listener):
        def on_start(self, ev: Any) -> None:
            depth = getattr(_COMPILING, "depth", 0)
            _COMPILING.depth = depth + 1
            family = _GUARDED.get(id((ev.data or {}).get("dispatcher")))
            if depth == 0 and family is not None and family not in _ANNOUNCED:
                _ANNOUNCED.add(family)
                announce(family)

        def on_end(self, ev: Any) -> None:
            _COMPILING.depth = max(0, getattr(_COMPILING, "depth", 1) - 1)

    event.register("numba:compile", Announce())
    _LISTENING = True


def announce(family: str) -> None:
    """One line on stderr (``SHEPHERD_QUIET_COMPILE=1`` silences it)."""
    if os.environ.get("SHEPHERD_QUIET_COMPILE"):
        return
    sys.stderr.write(MESSAGE.format(family=family) + "\n")
    sys.stderr.flush()
