"""Clockwork's batch rule as numbers (Shepherd §7 baseline; Symphony §5.2.2: "picks an execution candidate merely
based on the deadline"): what :mod:`shepherd.core.policies.clockwork` calls and Clockwork's kernel compiles."""

from __future__ import annotations

from shepherd.core.rules.latency import largest_within


def batch_for(lat, slack_us: int, max_batch: int, queued: int, mono: bool = True) -> int:
    """The batch built for the most urgent request: the largest b ≤ min(``max_batch``, ``queued``) with
    ℓ(b) = ``lat[b]`` ≤ ``slack_us`` (its deadline less the start); 0 when not even one fits. ``mono``: the
    table is non-decreasing (a bisection); otherwise a scan, so a dip (ℓ(2) < ℓ(1)) is found
    (:mod:`shepherd.core.rules.latency`)."""
    top = max_batch if max_batch < queued else queued
    return largest_within(lat, slack_us, top, mono)


def urgency(deadline: int, lat, slack: bool) -> int:
    """How urgent a queue's head is (Clockwork's ``urgency``; the smaller the sooner it is served): its deadline,
    or with ``slack`` its latest start alone, deadline − ℓ(1)."""
    return deadline - lat[1] if slack else deadline


def expiry_cutoff(floor, start: int, max_batch: int, queued: int) -> int:
    """Clockwork's ``expire``: a queued request whose deadline is below this cannot be served by any batch
    that starts at ``start`` — ``start`` plus the least ℓ(b) over b ≤ min(``max_batch``, ``queued``)
    (``floor``: :func:`~shepherd.core.rules.latency.prefix_min`; ℓ(1) on a monotone table, as Clockwork
    OSDI '20 §5 drops what cannot meet its SLO)."""
    top = max_batch if max_batch < queued else queued
    return start + floor[top if top > 0 else 1]
