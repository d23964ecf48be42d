"""The one registry of online policies: name → (policy class, typed config class).

A new policy is one module that decorates its class with :func:`register`
plus one import line in ``core/policies/__init__.py`` (STYLE.md pattern 1).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from shepherd.core.errors import UserError


@dataclass(frozen=True)
class PolicySpec:
    name: str
    cls: type
    config_cls: type
    doc: str


POLICIES: dict[str, PolicySpec] = {}


def register(name: str, config_cls: type):
    """Class decorator: register a :class:`Policy` subclass under ``name``."""

    def wrap(cls: type) -> type:
        if name in POLICIES:
            raise RuntimeError(f"policy '{name}' registered twice")
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        POLICIES[name] = PolicySpec(name, cls, config_cls, doc)
        return cls

    return wrap


def names() -> list[str]:
    return sorted(POLICIES)


def get(name: str) -> PolicySpec:
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
