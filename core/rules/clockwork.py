"""Clockwork's batch rule as numbers (Shepherd §7 baseline; Symphony §5.2.2: "picks an execution candidate merely
based on the deadline"): what :mod:`shepherd.core.policies.clockwork` calls and Clockwork's kernel compiles."""

from __future__ import annotations

from bisect import bisect_right


def batch_for(lat, slack_us: int, max_batch: int, queued: int) -> int:
    """The batch built for the most urgent request: the largest b ≤ ``max_batch`` with ℓ(b) = ``lat[b]`` ≤
    ``slack_us`` (its deadline less the start; ``lat`` non-decreasing in b: a bisection over ``lat[1..]``),
    at most the ``queued`` requests of its model; 0 when not even one fits."""
    b = bisect_right(lat, slack_us, 1, max_batch + 1) - 1
    return b if b < queued else queued
