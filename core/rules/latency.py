"""Searching a latency table ℓ(b), b = 1 … top, that need not be monotone (issue 40 build 3).

A profile measured on a CPU can fall with the batch size (ResNet18@64 on a 2-core machine: ℓ(1) = 12.2 ms,
ℓ(2) = 9.0 ms); the tables of Shepherd Table 4 and the papers' fits never do. A policy that bisects such a
table can stop on the wrong side of a dip, and one that expires a request at ``now + ℓ(1)`` drops what a
batch of two would still serve. Every policy searches its table through these functions, which the
compiled kernels compile as they are:

* :func:`monotone` — whether ``ℓ(1) ≤ ℓ(2) ≤ … ≤ ℓ(top)`` (then the searches bisect, as before);
* :func:`largest_within` — the largest b ≤ top with ℓ(b) ≤ a budget (a bisection on a monotone table, a
  scan down from ``top`` otherwise: the same answer where both apply);
* :func:`prefix_min` — ``floor[k] = min(ℓ(1) … ℓ(k))``: the least time any batch of at most k requests
  takes, the expiry cutoff of a request that k queued requests could be batched with; :func:`least` —
  ``floor[top]``, the least time any batch takes (Flex's expiry cutoff, ℓ(1) on a monotone table).

Choice where the papers are silent: a batch of b takes ℓ(b), never a padded larger size (the live worker
runs exactly b inputs); the table is taken as measured, not smoothed.
"""

from __future__ import annotations

from bisect import bisect_right


def monotone(lat, top: int) -> bool:
    """True when ``lat[1] ≤ lat[2] ≤ … ≤ lat[top]``."""
    for b in range(1, top):
        if lat[b + 1] < lat[b]:
            return False
    return True


def largest_within(lat, budget, top: int, mono: bool) -> int:
    """The largest b in ``1 … top`` with ``lat[b] ≤ budget``; 0 when none. ``mono``: the table is
    non-decreasing over ``1 … top`` (:func:`monotone`), so a bisection finds it."""
    if top <= 0:
        return 0
    if mono:
        return bisect_right(lat, budget, 1, top + 1) - 1
    b = top
    while b > 0 and lat[b] > budget:
        b -= 1
    return b


def prefix_min(lat, top: int) -> list[int]:
    """``floor[k] = min(lat[1] … lat[k])`` for k = 0 … top (``floor[0] = 0``)."""
    floor = [0] * (top + 1)
    low = None
    for k in range(1, top + 1):
        low = lat[k] if low is None or lat[k] < low else low
        floor[k] = low
    return floor


def least(lat, top: int) -> int:
    """The least ℓ(b) over b = 1 … top: ℓ(1) on a monotone table."""
    return prefix_min(lat, top)[top] if top > 0 else lat[1]
