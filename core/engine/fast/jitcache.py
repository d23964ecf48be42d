"""numba's on-disk JIT cache of the kernels: kept honest about the helpers a kernel inlines, and a first
compile announced and done by one process at a time. Each kernel module calls :func:`refresh` once, at import.

**Honest.** numba keys a cached function by the stamp (modification time and size) of the file that defines
it, and nothing else: a kernel in ``flex.py`` that inlines helpers from ``common.py`` would keep loading its old
machine code after ``common.py`` changed — a developer's edit silently not taking effect. :func:`refresh`
digests the files a module inlines from — the shepherd modules it imports, directly or through them, read from
its code (:func:`inlined_from`); when that digest differs from the one recorded beside the module's cache, the
module's cached functions are flushed (numba recompiles them on first call) and the new digest is recorded.
A fresh checkout has no cache and is unaffected.

**Compiled once.** A cache miss costs 60–90 s per family with nothing on screen, and in a sweep every worker
process would compile the same family at once. :func:`guard` wraps each cached dispatcher's ``compile`` so
that it holds a per-family file lock beside the cache (``<family>.compile-lock``, ``fcntl.flock``; re-entrant
within a process) while it compiles or loads — a second process waits, then loads the first one's machine
code — and so that the first real compile (numba's ``numba:compile`` event) prints one timestamped line on
stderr (:data:`MESSAGE`) and, when it ends, its duration (:data:`DONE`), once per family and process. Where ``fcntl`` or the
cache folder is unavailable, compiles run unlocked. ``shepherd warmup`` compiles every family ahead.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

#: the announcement, per family (the short name of its module), and its end
MESSAGE = "compiling the {family} kernel (once per machine, then cached on disk) …"
DONE = "compiled the {family} kernel in {seconds:.1f} s"
#: seconds (wall) this process spent compiling, per family (cache loads not counted)
COMPILED_S: dict[str, float] = {}

_GUARDED: dict[int, str] = {}  # id(dispatcher) → family
_ANNOUNCED: set[str] = set()
_OPEN: set[str] = set()  # families announced whose end is not said yet
_RUN = threading.local()  # .family: the kernel family of the run in progress on this thread
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
    from shepherd.core.jit_load import without_refresh  # a cache hit: its code linked without a refresh
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
        without_refresh(d._cache)


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
            if depth:
                return
            family = getattr(_RUN, "family", None) or _GUARDED.get(id((ev.data or {}).get("dispatcher")))
            _COMPILING.family, _COMPILING.t0 = family, time.perf_counter()
            if family is not None and family not in _ANNOUNCED:
                _ANNOUNCED.add(family)
                _OPEN.add(family)
                announce(family)

        def on_end(self, ev: Any) -> None:
            depth = max(0, getattr(_COMPILING, "depth", 1) - 1)
            _COMPILING.depth = depth
            family = getattr(_COMPILING, "family", None)
            if depth or family is None:
                return
            _COMPILING.family = None
            COMPILED_S[family] = COMPILED_S.get(family, 0.0) + time.perf_counter() - _COMPILING.t0
            if getattr(_RUN, "family", None) is None:  # no kernel run around it: this compile is the whole
                _finish(family)

    event.register("numba:compile", Announce())
    _LISTENING = True


@contextmanager
def kernel_run(module_name: str) -> Iterator[None]:
    """Run a kernel of module ``module_name`` (what the fast wing does): every compile meanwhile is that
    family's, announced once when it starts and said done, with the seconds it took, when the run ends."""
    family = family_of(module_name)
    outer = getattr(_RUN, "family", None)
    _RUN.family = outer or family
    try:
        yield
    finally:
        _RUN.family = outer
        if outer is None:
            _finish(family)


def compiling() -> bool:
    """Whether the kernel family of the run in progress on this thread compiled (not loaded) code in this run:
    then the run compiles what a later run of the family may call too (``stream._stream``'s ``oldest``), so a
    family is announced once, not again by a longer run."""
    family = getattr(_RUN, "family", None)
    return family is not None and family in _OPEN


def _finish(family: str) -> None:
    """Say ``family``'s compile is done, if it was announced and not said done yet."""
    if family in _OPEN:
        _OPEN.discard(family)
        announce(family, DONE.format(family=family, seconds=COMPILED_S.get(family, 0.0)))


def announce(family: str, text: str | None = None) -> None:
    """One timestamped line on stderr, ``MESSAGE`` by default (``SHEPHERD_QUIET_COMPILE=1`` silences it)."""
    if os.environ.get("SHEPHERD_QUIET_COMPILE"):
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    sys.stderr.write(f"{stamp} {text or MESSAGE.format(family=family)}\n")
    sys.stderr.flush()


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


def inlined_from(module: ModuleType) -> list[str]:
    """The files of the modules ``module`` imports from its top package or shepherd, directly or through them
    (what its kernels may inline or read constants from), read from the code (:func:`..fastpath.imports_of`)."""
    from shepherd.core.engine.fastpath import imports_of, source_file

    seen: dict[str, str] = {}
    todo = [module.__file__]
    while todo:
        for name in imports_of(todo.pop(), module.__name__.split(".")[0]):
            if name not in seen and name != module.__name__:
                seen[name] = str(source_file(name))
                todo.append(seen[name])
    return [seen[n] for n in sorted(seen)]


def refresh(module_name: str, *deps: ModuleType) -> bool:
    """Flush the cached kernels of module ``module_name`` if the modules in ``deps`` (default:
    :func:`inlined_from`) changed since they were cached; called at the bottom of a kernel module.

    Returns True when a flush happened. Failures to read or write the record (a read-only install, a race
    with another process) leave the cache as numba has it: the worst case is one needless recompile.
    """
    module = sys.modules[module_name]
    dispatchers = _cached_dispatchers(module)
    if not dispatchers:
        return False
    guard(module_name, dispatchers)  # a first compile: announced, one process at a time
    want = digest([d.__file__ for d in deps] if deps else inlined_from(module))
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
