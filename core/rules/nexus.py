"""Nexus's admission rule as numbers (Shepherd §7's Nexus: admitted requests pass a per-session token bucket at
the provisioned rate, one peak window deep): what :mod:`shepherd.core.policies.nexus` calls and Nexus's kernel
compiles."""

from __future__ import annotations


def refill(tokens: float, last: int, rate: float, depth: float, now: int) -> float:
    """The bucket's tokens at ``now``: ``tokens`` at ``last`` plus ``rate`` per µs since, at most ``depth``."""
    tokens = tokens + (now - last) * rate
    return tokens if tokens < depth else depth
