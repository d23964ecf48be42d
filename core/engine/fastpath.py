"""A policy's compiled fast path, declared beside its class, and the proof that it still matches the policy.

A policy that has a fast path says so next to its class (STYLE.md: the fast path beside its policy)::

    class Flex(Policy):
        fast_path = FastPath("chunked", "shepherd.core.engine.fast.flex", covers="overhead model|none",
                             covered=lambda cfg, shape: shape.overhead.mode in ("model", "none"),
                             params=_fast_params)

The registry finds it there (``registry.get(name).cls.fast_path``), so a third-party policy ships its own
fast path through the same ``shepherd.policies`` entry point; :mod:`.fast` names no policy.

**Edit safety.** A fast path is a second copy of its policy; it is trusted only for the reference source it
was verified against. Beside the policy's module, ``<module>.verified.json`` records, per policy name, the
SHA-256 of that module and of every ``shepherd`` module it imports directly (the engine's modules it calls,
its queues, its planner); the agreement tests (``pytest -m agreement``, ``tests/conftest.py``) re-record it
for each policy whose fast path they ran and that passed. When a recorded file changed, ``--engine auto``
runs the reference engine and prints one line naming the file, and ``--engine fast`` exits 2 with the same
reason: a contributor who edits a policy always gets the edited behaviour. Declarations that do not change
behaviour (this module, the registry, the error types) are not in the digest.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shepherd.core.errors import UserError

#: the modes of :mod:`.fast`: how the kernel is fed (docs/ENGINE.md "The fast wing")
MODES = ("chunked", "whole", "engine")
#: imported for declarations only: not part of any policy's verified source
NOT_BEHAVIOUR = ("shepherd.core.engine.fastpath", "shepherd.core.policies.registry", "shepherd.core.errors")
SUFFIX = ".verified.json"


@dataclass(frozen=True)
class Shape:
    """What of a run a fast path's coverage may depend on besides the policy's config."""

    overhead: Any  #: the run's OverheadConfig
    w_hw: list[int]  #: each worker's hardware index
    group_workers: list[list[int]]  #: each serving group's workers
    engine: Any  #: the run's EngineConfig


def _always(config: Any, shape: Shape) -> bool:
    return True


def modelled(shape: Shape) -> bool:
    """The scheduler overhead is the model or none (no kernel emulates a measured overhead)."""
    return shape.overhead.mode in ("model", "none")


def one_group(shape: Shape) -> bool:
    """The run has one serving group."""
    return len(shape.group_workers) == 1


def _config(cls: type, config: Any, runtime: Any) -> Any:
    return config


@dataclass(frozen=True)
class FastPath:
    """A compiled fast path of a policy (module docstring).

    ``mode``: how :mod:`.fast` feeds the kernel — ``"chunked"`` (``module.make(params, runtime, max_batch,
    sched, chunk, lat, w_hw)`` returns the kernel; requests fed a chunk at a time, any number of serving
    groups), ``"whole"`` (``module.run_group(params, make_policy, common, lat, w_hw, t, d, m, out)``: one
    group, the whole trace), ``"engine"`` (``module.run_group(engine, params, runtime)`` writes the
    recorder itself). ``covers``: the configurations it covers, in words (the error names them);
    ``covered(config, shape)`` decides. ``params(cls, config, runtime)``: what the kernel reads of the
    policy (default: its config). ``counters``: the policy's ``stats()`` keys the kernel keeps (zero on an
    empty trace)."""

    mode: str
    module: str
    covers: str
    covered: Callable[[Any, Shape], bool] = _always
    params: Callable[[type, Any, Any], Any] = _config
    counters: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"fast path mode must be one of {', '.join(MODES)}, got '{self.mode}'")


# ---------------------------------------------------------------------------------------- the verified source


def _root(module: Any) -> Path:
    """The folder of the module's top-level package (paths in the record are relative to it)."""
    top = sys.modules[module.__name__.split(".")[0]]
    return Path(top.__file__).resolve().parent


def _stamp(path: Path) -> tuple:
    st = path.stat()
    return path, st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=256)
def _imports_of(stamp: tuple, packages: tuple[str, ...]) -> list[str]:
    """The modules of ``packages`` the file (at ``stamp``) imports directly (a name imported from a package
    that is itself a submodule counts as that submodule)."""
    path = stamp[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    out = []
    for name in sorted(names):
        if name.split(".")[0] not in packages or name in NOT_BEHAVIOUR or name in packages:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            out.append(spec.origin)
    return out


def sources(cls: type) -> dict[str, str]:
    """The verified source of ``cls``'s fast path: relative path → SHA-256 of the file (newlines as \\n)."""
    module = sys.modules[cls.__module__]
    return {rel: _sha(_stamp(f)) for f, rel in _files(_stamp(Path(module.__file__)), cls.__module__)}


@functools.lru_cache(maxsize=256)
def _files(stamp: tuple, name: str) -> tuple:
    """(file, path relative to its top package) of the module ``name`` (at ``stamp``) and of what it imports."""
    module = sys.modules[name]
    own, root = Path(module.__file__).resolve(), _root(module)
    files = {own, *(Path(p).resolve() for p in _imports_of(stamp, (name.split(".")[0], "shepherd")))}
    ours = Path(__file__).resolve().parents[2]  # a third party's policy: shepherd's files relative to shepherd
    return tuple((f, _rel(f, root) if f.is_relative_to(root) else _rel(f, ours)) for f in sorted(files))


@functools.lru_cache(maxsize=1024)
def _sha(stamp: tuple) -> str:
    """SHA-256 of a file's bytes, newlines as \\n (cached by the file's path, modification time and size:
    a run checks its policy's record without reading the sources again)."""
    return hashlib.sha256(stamp[0].read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def record_path(cls: type) -> Path:
    """``<policy module>.verified.json``, beside the module."""
    return Path(sys.modules[cls.__module__].__file__).with_suffix(SUFFIX)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def stale(name: str, cls: type) -> str | None:
    """Why the fast path of policy ``name`` is not trusted (one line), or None when the source it was
    verified against is the source now."""
    path = record_path(cls)
    mod = sys.modules[cls.__module__]
    where = f"{_rel(path, _root(mod))}"
    was = _read(path).get(name, {}).get("sources")
    if not isinstance(was, dict):
        return f"the fast path of '{name}' was never verified ({where} has no record; pytest -m agreement writes it)"
    now = sources(cls)
    changed = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
    if not changed:
        return None
    more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
    return (f"{changed[0]}{more} changed since the fast path of '{name}' was verified against it "
            f"(pytest -m agreement re-verifies it and updates {where})")


def _rel(path: Path, root: Path) -> str:
    p = path.resolve()
    return p.relative_to(root).as_posix() if p.is_relative_to(root) else p.name


def record(name: str, cls: type) -> Path:
    """Record the current source of ``cls`` as the one policy ``name``'s fast path was verified against."""
    path = record_path(cls)
    data = _read(path)
    data[name] = {"sources": sources(cls)}
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if not path.is_file() or path.read_text() != text:  # unchanged: left untouched
        path.write_text(text)
    return path


# --------------------------------------------------------------------------------------------- the choice


_noted: set[str] = set()


def choose(name: str, cls: type, config: Any, shape: Shape, path: str) -> FastPath | None:
    """The fast path a run of policy ``name`` takes under ``--engine path`` (``"auto"`` or ``"fast"``), or
    None for the reference engine. ``"fast"`` raises a one-line :class:`UserError` where there is none, it
    does not cover the configuration, or its verified source changed; ``"auto"`` falls back silently where
    there is none or it does not cover the run, and with one line on stderr (once per process and reason)
    where the source changed."""
    fp: FastPath | None = getattr(cls, "fast_path", None)
    if fp is None:
        if path == "fast":
            from shepherd.core.policies import registry

            have = [n for n in registry.names() if getattr(registry.get(n).cls, "fast_path", None) is not None]
            raise UserError(f"policy '{name}' has no fast path (--engine fast: {', '.join(have)}); "
                            "use --engine reference")
        return None
    if not fp.covered(config, shape):
        if path == "fast":
            raise UserError(f"the fast path of '{name}' covers {fp.covers}; use --engine reference")
        return None
    why = stale(name, cls)
    if why is not None:
        if path == "fast":
            raise UserError(why)
        if why not in _noted:
            _noted.add(why)
            print(f"note: {why}; --engine auto runs the reference engine", file=sys.stderr)
        return None
    return fp
