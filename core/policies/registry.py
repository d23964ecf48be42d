"""The one registry of online policies: name → (policy class, typed config class).

A built-in policy is one module that decorates its class with
:func:`register` plus its name in :data:`BUILTIN` (STYLE.md pattern 1;
imported when the name is first asked for). A researcher's own policy, in their own package, is
found through the ``shepherd.policies`` Python entry-point group::

    # their pyproject.toml
    [project.entry-points."shepherd.policies"]
    mypolicy = "mypackage.mypolicy:MyPolicy"

The entry point names a :class:`~shepherd.core.policies.base.Policy`
subclass with a ``config_class`` attribute (a dataclass; absent: no options),
or a module whose import registers it with :func:`register`. Entry points are
loaded the first time a name is not found among the registered ones; after
that ``shepherd simulate --policy mypolicy`` and ``simulate(..., "mypolicy")``
work. The in-process equivalent (a notebook, a test) is
``register("mypolicy", MyConfig)(MyPolicy)`` — or the decorator.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Mapping

from shepherd.core.errors import UserError

GROUP = "shepherd.policies"  #: the entry-point group of third-party policies


@dataclass(frozen=True)
class NoOptions:
    """A policy without options."""


@dataclass(frozen=True)
class PolicySpec:
    name: str
    cls: type
    config_cls: type
    doc: str


POLICIES: dict[str, PolicySpec] = {}
_loaded_entry_points = False

#: the built-in policies: name → the module of ``shepherd.core.policies`` that registers it, imported the first
#: time the name is asked for (issue 43: a run imports its own policy, not the nine others with their planners,
#: pipelines and Accordion's scheduler — ~0.05 CPU-s of a small run). A new built-in policy adds its line here
#: (``tests/test_policy_registry_lazy.py`` checks every module's registrations are listed).
BUILTIN = {
    "accordion": "accordion", "bbs": "accordion", "fastest": "accordion", "one-stage": "accordion",
    "slo-conforming": "accordion", "clockwork": "clockwork", "flex": "flex", "flex-np": "flex", "nexus": "nexus",
    "ppipe": "ppipe", "reactive": "reactive", "symphony": "symphony", "symphony-wc": "symphony",
}


def load_builtin(name: str | None = None) -> None:
    """Import the module registering built-in policy ``name`` (every built-in one when None)."""
    import importlib

    for module in sorted(set(BUILTIN.values()) if name is None else {BUILTIN[name]}):
        importlib.import_module(f"shepherd.core.policies.{module}")


def register(name: str, config_cls: type = NoOptions):
    """Class decorator: register a :class:`Policy` subclass under ``name``."""

    def wrap(cls: type) -> type:
        if name in POLICIES and POLICIES[name].cls is not cls:
            raise RuntimeError(f"policy '{name}' registered twice")
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        POLICIES[name] = PolicySpec(name, cls, config_cls, doc)
        return cls

    return wrap


def unregister(name: str) -> None:
    """Forget ``name`` (tests that register a policy in-process clean up with this)."""
    POLICIES.pop(name, None)


def load_entry_points(force: bool = False) -> None:
    """Register the policies of the ``shepherd.policies`` entry-point group (once, unless ``force``)."""
    global _loaded_entry_points
    if _loaded_entry_points and not force:
        return
    _loaded_entry_points = True
    for ep in entry_points(group=GROUP):
        if ep.name in POLICIES:
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party package must not break the CLI
            raise UserError(f"policy entry point '{ep.name}' ({ep.value}) failed to load: {exc}") from None
        if isinstance(obj, type) and ep.name not in POLICIES:
            register(ep.name, getattr(obj, "config_class", NoOptions))(obj)


def names() -> list[str]:
    load_builtin()
    load_entry_points()
    return sorted(POLICIES)


def get(name: str) -> PolicySpec:
    if name not in POLICIES and name in BUILTIN:
        load_builtin(name)
    if name not in POLICIES:
        load_entry_points()
    try:
        return POLICIES[name]
    except KeyError:
        raise UserError(f"unknown policy '{name}' (known: {', '.join(names())})") from None


def make_config(name: str, config: Any = None) -> Any:
    """The typed config of policy ``name`` from ``None`` (defaults), a dict or an instance."""
    spec = get(name)
    if config is None:
        return spec.config_cls()
    if isinstance(config, spec.config_cls):
        return config
    if isinstance(config, Mapping):
        known = {f.name for f in dataclasses.fields(spec.config_cls)}
        bad = [k for k in config if k not in known]
        if bad:
            raise UserError(f"policy '{name}' has no option '{bad[0]}' (known: {', '.join(sorted(known))})")
        return spec.config_cls(**config)
    raise UserError(f"policy '{name}' expects a {spec.config_cls.__name__}, got {type(config).__name__}")
