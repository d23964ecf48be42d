"""Flex's preemption rules as numbers (Shepherd §5.2 Algorithm 1, Theorem 5.2; §6 exit points): what
:mod:`shepherd.core.policies.flex` calls and Flex's kernel compiles."""

from __future__ import annotations

import math


def preempt_need(lam: float, size: int) -> int:
    """The smallest batch that may preempt a running batch of ``size`` requests: ⌈λ·size⌉ (Theorem 5.2),
    computed as ``ceil(λ·size − 1e-9)`` so that a product a rounding error above an integer is that integer
    (``FlexConfig.validate``)."""
    return math.ceil(lam * size - 1e-9)


def exit_delay(start: int, end: int, exits: int, now: int) -> int:
    """Time from ``now`` to the next exit point of a batch running over ``[start, end)`` with ``exits`` exit
    points evenly spaced at ``start + k·(end − start) // (exits + 1)`` (§6, Fig. 12); −1 after the last (the
    batch cannot be stopped), 0 before it started."""
    if now <= start:
        return 0
    span = end - start
    nxt = (now - start) * (exits + 1) // span
    while start + nxt * span // (exits + 1) < now:
        nxt += 1
    if nxt > exits:
        return -1
    return start + nxt * span // (exits + 1) - now
