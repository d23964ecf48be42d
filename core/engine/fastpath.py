"""A policy's compiled fast path, declared beside its class, and the proof that it still matches the policy.

A policy that has a fast path says so next to its class (STYLE.md: the fast path beside its policy)::

    class Flex(Policy):
        fast_path = FastPath("chunked", "shepherd.core.engine.fast.flex", covers="overhead model|none",
                             covered=lambda cfg, shape: modelled(shape), params=_fast_params,
                             mirrors=ENGINE + ("shepherd.core.policies.queues",))

The registry finds it there (``registry.get(name).cls.fast_path``), so a third-party policy ships its own
fast path through the same ``shepherd.policies`` entry point; :mod:`.fast` names no policy.

**What a kernel is trusted for** (DESIGN.md "Edit-safe by construction"). A kernel re-enacts its policy and
the engine parts it mirrors. Its *verified source* is the policy's module, every module that module imports
directly from its package or from ``shepherd`` (its rules, queues, planner), every module its declaration
``mirrors`` names (the clock, resources, admission, recorder … — :data:`ENGINE`), and the kernel itself: its
module, what that imports (the fast wing's common parts, the rules it compiles) and what feeds it
(:data:`DRIVERS`) — an edit to either side is trusted again only after a comparison. Each file counts by its
meaning: the digest is over the code with comments, docstrings and layout removed (:func:`normalised`), so a
comment changes nothing and any edit to code is caught.

**Who may stamp.** ``<policy module>.verified.json`` records, per policy name, that verified source and what
was compared. Only :func:`shepherd.core.engine.verify.stamp` writes it, and only from a comparison of the
kernel's whole tables with the reference's on the same workloads, made in this process against the same
source (``shepherd verify POLICY``, or the agreement tests' comparisons).

**In-process changes.** A class or function of the verified source that is not the one its file defines — a
method monkeypatched in a notebook, a policy subclassed elsewhere — is caught at the choice too
(:func:`patched`).

When anything differs, ``--engine auto`` runs the reference engine and prints one line naming it, and
``--engine fast`` exits 2 with the same reason: an edit always takes effect. Every run says which engine ran
and why (:class:`Choice`, in the outputs' provenance).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from shepherd.core.errors import UserError

#: the modes of :mod:`.fast`: how the kernel is fed (docs/ENGINE.md "The fast wing")
MODES = ("chunked", "whole", "engine")
#: imported for declarations only: not part of any policy's verified source
NOT_BEHAVIOUR = ("shepherd.core.engine.fastpath", "shepherd.core.policies.registry", "shepherd.core.errors",
                 "shepherd.core.engine.fast.jitcache")
#: what feeds a kernel of each mode (part of what it was verified as, beside the kernel's module)
DRIVERS = {"chunked": ("shepherd.core.engine.fast.stream",), "whole": ("shepherd.core.engine.fast.whole",),
           "engine": ()}
SUFFIX = ".verified.json"
#: shepherd's package folder (the repository root: flat layout)
_SHEPHERD = Path(__file__).resolve().parents[2]
#: how a file is read for its digest (:func:`normalised`); a record of another form is stale
FORM = "ast-unparse-without-docstrings/1"

#: the reference engine's parts that every kernel re-enacts: the event order, the workers (start, preempt,
#: complete), admission control and the scheduler clock, the tables written, the feed of arrivals, the
#: policies' view of them (``Actions``), the base policy's arrival loop
ENGINE = tuple(f"shepherd.core.{m}" for m in (
    "engine.actions", "engine.admission", "engine.clock", "engine.feed", "engine.loop", "engine.outcomes",
    "engine.overhead", "engine.recorder", "engine.resources", "policies.base"))


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
    empty trace). ``mirrors``: the modules (dotted names) whose behaviour the kernel re-enacts besides the
    policy's own module and what it imports (:data:`ENGINE`, queues, planners). ``workloads(seed)``: the
    keyword arguments of one ``simulate()`` run that ``shepherd verify`` compares on (None: synthetic traces
    on the built-in profiles, :mod:`.verify`, cycling through the policy configs ``configs``)."""

    mode: str
    module: str
    covers: str
    covered: Callable[[Any, Shape], bool] = _always
    params: Callable[[type, Any, Any], Any] = _config
    counters: tuple[str, ...] = field(default=())
    mirrors: tuple[str, ...] = field(default=())
    workloads: Callable[[int], dict] | None = None
    configs: tuple[dict, ...] = field(default=({},))

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"fast path mode must be one of {', '.join(MODES)}, got '{self.mode}'")


@dataclass(frozen=True)
class Choice:
    """Which engine a run takes and why (one line), and the digest of the verified source a kernel ran
    against (the evidence a comparison records, :mod:`.verify`)."""

    engine: str  #: "fast" or "reference"
    why: str
    fast_path: FastPath | None = None
    digest: str | None = None

    def provenance(self) -> dict[str, str]:
        return {"engine": self.engine, "why": self.why}


_collectors: list[list[dict[str, str]]] = []


@contextmanager
def collect() -> Iterator[list[dict[str, str]]]:
    """Within: every ``simulate()`` of this process appends ``{"policy", "engine", "why"}`` to the list yielded
    (an experiment cell records which engines its runs took, :mod:`shepherd.experiments.executors`)."""
    ran: list[dict[str, str]] = []
    _collectors.append(ran)
    try:
        yield ran
    finally:
        _collectors.remove(ran)


def ran(policy: str, choice: Choice) -> None:
    """Tell the collectors (:func:`collect`) that a run of ``policy`` took ``choice``."""
    for c in _collectors:
        c.append({"policy": policy, **choice.provenance()})


def distinct(runs: list[dict[str, str]]) -> list[dict[str, str]]:
    """The distinct runs of :func:`collect`, sorted (deterministic, whatever the order of the runs)."""
    return [dict(t) for t in sorted({tuple(sorted(r.items())) for r in runs})]


# ---------------------------------------------------------------------------------------- the verified source


def _root(module: Any) -> Path:
    """The folder of the module's top-level package (paths in the record are relative to it)."""
    top = sys.modules[module.__name__.split(".")[0]]
    return Path(top.__file__).resolve().parent


def _stamp(path: Path) -> tuple:
    st = path.stat()
    return path, st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=512)
def _parsed(stamp: tuple) -> tuple[str, dict[str, frozenset[str]], frozenset[str], tuple]:
    """(digest of the normalised code, the functions each top-level class defines by name ('' : the module's
    own functions and classes), the modules imported, the names its top level imports from modules:
    (module, name, bound as)) of the file at ``stamp``: from :data:`MEMO` when a file of these exact bytes was
    parsed before (by this Python), else parsed now and remembered there."""
    raw = stamp[0].read_bytes()
    key = f"{FORM}|{sys.version_info[0]}.{sys.version_info[1]}|{hashlib.sha256(raw).hexdigest()}"
    hit = _memo().get(key)
    if isinstance(hit, list) and len(hit) == 4:
        try:
            return (hit[0], {k: frozenset(v) for k, v in hit[1].items()}, frozenset(hit[2]),
                    tuple(tuple(f) for f in hit[3]))
        except (AttributeError, TypeError):
            pass
    got = _parse(raw)
    _remember(key, [got[0], {k: sorted(v) for k, v in got[1].items()}, sorted(got[2]), [list(f) for f in got[3]]])
    return got


#: where :func:`_parsed` remembers each file's digest, definitions and imports by the SHA-256 of its bytes
#: (in the user's cache: :func:`shepherd.core.cachedir.cache_home`). Parsing and unparsing the dozen files of a
#: verified source costs ~0.1 CPU-s, a tenth of a small run (issue 43); hashing their bytes, a millisecond. The
#: key is the file's whole content (and the Python version, whose ``ast.unparse`` writes the code): a
#: remembered answer is the answer for those bytes, so no edit can be missed. At most :data:`MEMO_ENTRIES`
#: (the oldest dropped); unreadable or unwritable: parsed every time.
MEMO = "verified-source-digests.json"
MEMO_ENTRIES = 4096
_MEMO: list[dict] = []


def _memo_path() -> Path:
    from shepherd.core.cachedir import cache_home

    return cache_home() / MEMO


def _memo() -> dict:
    if not _MEMO:
        try:
            data = json.loads(_memo_path().read_text())
        except (OSError, ValueError):
            data = {}
        _MEMO.append(data if isinstance(data, dict) else {})
    return _MEMO[0]


def _remember(key: str, value: list) -> None:
    memo = _memo()
    memo.pop(key, None)
    memo[key] = value  # insertion order: the newest last
    while len(memo) > MEMO_ENTRIES:
        memo.pop(next(iter(memo)))
    path = _memo_path()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(memo))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def _parse(raw: bytes) -> tuple[str, dict[str, frozenset[str]], frozenset[str], tuple]:
    """:func:`_parsed` of a file's bytes, by parsing them."""
    tree = ast.parse(raw)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    digest = hashlib.sha256(ast.unparse(tree).encode()).hexdigest()
    defs: dict[str, frozenset[str]] = {}
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top.add(node.name)
        elif isinstance(node, ast.ClassDef):
            top.add(node.name)
            defs[node.name] = frozenset(n.name for n in node.body
                                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    defs[""] = frozenset(top)
    froms = tuple((node.module, a.name, a.asname or a.name) for node in tree.body
                  if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 for a in node.names)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return digest, defs, frozenset(names), froms


def normalised(path: Path) -> str:
    """SHA-256 of a Python file's code as :func:`ast.unparse` writes it back without its docstrings: comments,
    docstrings, blank lines, quotes and line breaks do not count; every other edit does."""
    return _parsed(_stamp(path.resolve()))[0]


@functools.lru_cache(maxsize=256)
def _imports_of(stamp: tuple, packages: tuple[str, ...]) -> tuple[str, ...]:
    """The modules of ``packages`` that the file (at ``stamp``) imports directly (a name imported from a
    package that is itself a submodule counts as that submodule)."""
    out = []
    for name in sorted(_parsed(stamp)[2]):
        if name.split(".")[0] not in packages or name in NOT_BEHAVIOUR or name in packages:
            continue
        if name.startswith("shepherd."):  # by its path: finding a submodule's spec would import its parent
            if _SHEPHERD.joinpath(*name.split(".")[1:]).with_suffix(".py").is_file():
                out.append(name)
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin and spec.origin.endswith(".py") \
                and not spec.origin.endswith("__init__.py"):  # a package's own module: its registrations
            out.append(name)
    return tuple(out)


def imports_of(path: str | Path, package: str = "shepherd") -> tuple[str, ...]:
    """The modules of ``package`` and shepherd that the Python file at ``path`` imports directly, anywhere in it
    (:data:`NOT_BEHAVIOUR` and packages' ``__init__`` left out)."""
    return _imports_of(_stamp(Path(path).resolve()), tuple(sorted({package, "shepherd"})))


def _module_file(name: str) -> Path:
    module = sys.modules.get(name)
    if module is None:
        module = importlib.import_module(name)
    file = getattr(module, "__file__", None)
    if not file:
        raise UserError(f"module {name} has no source file: a fast path cannot be verified against it")
    return Path(file).resolve()


def source_file(name: str) -> Path:
    """The file of module ``name``, without importing it where it is one of shepherd's (a kernel's module loads
    numba: a run that takes the reference engine does not)."""
    if name.startswith("shepherd.") and name not in sys.modules:
        f = _SHEPHERD.joinpath(*name.split(".")[1:]).with_suffix(".py")
        if f.is_file():
            return f
    return _module_file(name)


def files(cls: type) -> tuple[tuple[str, Path, str], ...]:
    """(module, file, path in the record) of everything ``cls``'s fast path is verified against (module
    docstring), by path: the policy's side and the kernel's — its module, what that imports from its package
    or shepherd (the fast wing's common parts, the rules it compiles) and what feeds it (:data:`DRIVERS`)."""
    name = cls.__module__
    own = _module_file(name)
    root = _root(sys.modules[name])
    fp = getattr(cls, "fast_path", None)
    names = {name, *_imports_of(_stamp(own), (name.split(".")[0], "shepherd"))}
    if fp is not None:
        kernel = source_file(fp.module)
        names |= {fp.module, *fp.mirrors, *DRIVERS[fp.mode],
                  *_imports_of(_stamp(kernel), (fp.module.split(".")[0], "shepherd"))}
    ours = _SHEPHERD  # a third party's policy: shepherd's files relative to shepherd
    found = {}
    for n in sorted(names):
        f = source_file(n)
        found[f] = (n, f, _rel(f, root) if f.is_relative_to(root) else _rel(f, ours))
    return tuple(found[f] for f in sorted(found))


def sources(cls: type) -> dict[str, str]:
    """The verified source of ``cls``'s fast path: path in the record → digest of its normalised code."""
    return {rel: normalised(f) for _, f, rel in files(cls)}


def digest_of(sources_: dict[str, str]) -> str:
    """One digest over a verified source (what a comparison's evidence names)."""
    return hashlib.sha256(json.dumps(sources_, sort_keys=True).encode()).hexdigest()


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def record_path(cls: type) -> Path:
    """``<policy module>.verified.json``, beside the module."""
    return _module_file(cls.__module__).with_suffix(SUFFIX)


def read_record(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _rel(path: Path, root: Path) -> str:
    p = path.resolve()
    return p.relative_to(root).as_posix() if p.is_relative_to(root) else p.name


def _where(cls: type) -> str:
    return _rel(record_path(cls), _root(sys.modules[cls.__module__]))


def stale(name: str, cls: type) -> str | None:
    """Why the fast path of policy ``name`` is not trusted (one line), or None when the source it was
    verified against is the source now and nothing of it was changed in this process."""
    if not getattr(sys.modules.get(cls.__module__), "__file__", None):
        return (f"policy class {cls.__qualname__} is defined outside a file ({cls.__module__}): its fast path "
                "cannot be verified")
    where = _where(cls)
    entry = read_record(record_path(cls)).get(name, {})
    was = entry.get("sources")
    if not isinstance(was, dict) or entry.get("form") != FORM:
        return (f"the fast path of '{name}' was never verified ({where} has no record of this source; "
                f"`shepherd verify {name}` compares it with the reference and writes it)")
    if entry.get("class") != class_name(cls):
        return (f"policy '{name}' is {class_name(cls)}, not the class its fast path was verified for "
                f"({entry.get('class')}; a subclass or a replacement)")
    now = sources(cls)
    changed = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
    if changed:
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        return (f"{changed[0]}{more} changed since the fast path of '{name}' was verified against it "
                f"(`shepherd verify {name}` re-verifies it and updates {where})")
    return patched(name, cls)


# ------------------------------------------------------------------------------------------ in-process changes


@functools.lru_cache(maxsize=4096)
def _resolved(filename: str) -> Path:
    return Path(filename).resolve()


def _code_of(obj: Any) -> Any:
    """The code object behind a function, static/class method or property (None for anything else)."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    elif isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, functools.cached_property):
        obj = obj.func
    try:
        obj = inspect.unwrap(obj) if callable(obj) else obj
    except ValueError:  # a cycle of __wrapped__ (a mock)
        return None, None
    return getattr(obj, "__code__", None), getattr(obj, "__qualname__", None)


def _foreign(obj: Any, file: Path, qualname: str) -> bool:
    """``obj`` is not the function ``qualname`` of ``file`` (replaced, or from elsewhere)."""
    code, qn = _code_of(obj)
    if code is None:
        return callable(obj) and not isinstance(obj, type)  # a callable that is no function: a replacement
    return qn != qualname or _resolved(code.co_filename) != file


_MISSING = object()


def _patched_module(module: ModuleType, file: Path) -> str | None:
    """The first top-level function or class method of ``module`` that is not its file's own, or name its top
    level imports from shepherd (or its own package) that is no longer the object it imported (a policy's
    ``reserve`` replaced in its module), or None."""
    _, defs, _, froms = _parsed(_stamp(file))
    space = vars(module)
    tops = ("shepherd", module.__name__.split(".")[0])
    for src_name, name, bound in froms:
        src = sys.modules.get(src_name)
        if src is None or src_name.split(".")[0] not in tops or bound not in space:
            continue
        want = getattr(src, name, _MISSING)
        if want is _MISSING:
            want = sys.modules.get(f"{src_name}.{name}", _MISSING)
        if want is not _MISSING and space[bound] is not want:
            return f"{module.__name__}.{bound}"
    for top in sorted(defs[""]):
        obj = space.get(top)
        if obj is None:
            continue
        if isinstance(obj, type):
            if obj.__qualname__ != top or _resolved(inspect.getsourcefile(obj) or "") != file:
                return f"{module.__name__}.{top}"
            for meth in sorted(defs.get(top, ())):
                if meth in vars(obj) and _foreign(vars(obj)[meth], file, f"{top}.{meth}"):
                    return f"{top}.{meth}"
        elif _foreign(obj, file, top):
            return f"{module.__name__}.{top}"
    return None


def patched(name: str, cls: type) -> str | None:
    """Why the fast path of ``name`` does not cover the classes and functions in this process (one line):
    a method or function of its verified source that its file does not define (monkeypatched), a class in
    ``cls``'s hierarchy defined outside that source, or a method added over an inherited one; None if none."""
    verified = files(cls)
    paths = {f for _, f, _ in verified}
    for k in cls.__mro__[:-1]:  # without object
        file = _module_file(k.__module__) if getattr(sys.modules.get(k.__module__), "__file__", None) else None
        if file not in paths:
            return (f"policy '{name}' runs {class_name(cls)}, whose base {k.__qualname__} is not in its verified "
                    "source (a subclass): its fast path does not cover it")
        defs = _parsed(_stamp(file))[1]
        own = defs.get(k.__qualname__, frozenset())
        for attr, obj in vars(k).items():
            code, _qn = _code_of(obj)
            if code is not None and attr not in own and code.co_filename != "<string>":
                return (f"{k.__qualname__}.{attr} is not defined in {k.__module__}'s source (set in this "
                        "process): the fast path of '" + name + "' does not cover it")
    for mod_name, f, rel in verified:
        if mod_name not in sys.modules:  # not loaded (a kernel before its first run): nothing of it is changed
            continue
        what = _patched_module(sys.modules[mod_name], f)
        if what is not None:
            return (f"{what} is not what {rel} defines or imports (changed in this process): the fast path of "
                    f"'{name}' was verified against the file's")
    return None


# --------------------------------------------------------------------------------------------- the choice


_noted: set[str] = set()
_comparing = False  # set by verify.comparing(): the kernel runs whatever its stamp says (it is being compared)


def choose(name: str, cls: type, config: Any, shape: Shape, path: str) -> Choice:
    """The engine a run of policy ``name`` takes under ``--engine path`` (``"auto"``, ``"fast"`` or
    ``"reference"``), and why. ``"fast"`` raises a one-line :class:`UserError` where there is no fast path, it
    does not cover the configuration, or its verified source changed; ``"auto"`` falls back silently where
    there is none or it does not cover the run, and with one line on stderr (once per process and reason)
    where the source changed."""
    if path == "reference":
        return Choice("reference", "--engine reference")
    fp: FastPath | None = getattr(cls, "fast_path", None)
    if fp is None:
        if path == "fast":
            from shepherd.core.policies import registry

            have = [n for n in registry.names() if getattr(registry.get(n).cls, "fast_path", None) is not None]
            raise UserError(f"policy '{name}' has no fast path (--engine fast: {', '.join(have)}); "
                            "use --engine reference")
        return Choice("reference", f"policy '{name}' has no fast path")
    if not fp.covered(config, shape):
        if path == "fast":
            raise UserError(f"the fast path of '{name}' covers {fp.covers}; use --engine reference")
        return Choice("reference", f"the fast path of '{name}' covers {fp.covers}: not this run")
    why = None if _comparing else stale(name, cls)
    if why is not None:
        if path == "fast":
            raise UserError(why)
        if why not in _noted:
            _noted.add(why)
            print(f"note: {why}; --engine auto runs the reference engine", file=sys.stderr)
        return Choice("reference", why)
    digest = digest_of(sources(cls))
    how = "compared with the reference now" if _comparing else "verified against the current source"
    return Choice("fast", f"the fast path of '{name}', {how} ({fp.module.rsplit('.', 1)[-1]} kernel)", fp, digest)
