"""Flex's preemption rules as numbers (Shepherd §5.2 Algorithm 1, Theorem 5.2; §6 exit points): what
:mod:`shepherd.core.policies.flex` calls and Flex's kernel compiles."""

from __future__ import annotations

import math
from bisect import bisect_left

from shepherd.core.rules.latency import least


def preempt_need(lam: float, size: int) -> int:
    """The smallest batch that may preempt a running batch of ``size`` requests: ⌈λ·size⌉ (Theorem 5.2),
    computed as ``ceil(λ·size − 1e-9)`` so that a product a rounding error above an integer is that integer
    (``FlexConfig.validate``)."""
    return math.ceil(lam * size - 1e-9)


def smallest(sizes) -> int:
    """The worker the preemption check considers (Algorithm 1 lines 14–19; a choice where §5.2 is silent,
    :mod:`shepherd.core.policies.flex`): the one running the smallest batch (``sizes``, 0 = idle), the lowest
    index on ties — with one size comparison per GPU, the first that qualifies whenever any does."""
    k = 0
    for x in range(1, len(sizes)):
        if sizes[x] < sizes[k]:
            k = x
    return k


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


def check_at(now: int, delay: int, ready: int) -> int:
    """When the preemption check's BATCHGEN looks at the queues (Algorithm 1 lines 14–18; §6): at the running
    batch's next exit point, ``now`` + ``delay`` (:func:`exit_delay`), or at the decision's own time ``ready``
    if that is later."""
    return now + delay if now + delay > ready else ready


def reenters(deadline: int, stop: int, least: int) -> bool:
    """Algorithm 1 line 19: a request of a preempted batch (stopped at ``stop``) re-enters the queues as a new
    arrival when it can still meet its ``deadline`` in the least time a batch takes (``least``: the policy's
    expiry floor, :func:`expiry_floor`); otherwise it is dropped."""
    return deadline >= stop + least


def expiry_floor(lat, hws, top: int) -> list[int]:
    """BATCHGEN's expiry cutoff per model (Algorithm 1; the policy's module docstring: a request that cannot
    finish even alone is dropped): the least ℓ(b), b ≤ ``top``, of model m's table ``lat[h][m]`` over the
    group's hardware ``hws`` — ℓ(1) on a monotone table (:func:`~shepherd.core.rules.latency.least`)."""
    return [min((least(lat[h][m], top) for h in hws), default=1 << 62) for m in range(len(lat[0]))]


def better_batch(b: int, qd, i0: int, best_b: int, best_d: int) -> bool:
    """BATCHGEN's choice across the queues (§5.2, Algorithm 1 lines 4–13): a model's largest feasible batch of
    ``b`` requests, the first at slot ``i0`` of its deadlines ``qd``, beats the best so far (``best_b`` requests,
    the first due at ``best_d``) when it is larger, or as large (and not empty) with an earlier first deadline —
    so the greatest (b, then the earliest first deadline, then the lowest model in scan order) is chosen."""
    return b > best_b or (b == best_b and b > 0 and qd[i0] < best_d)


def largest_feasible(qd, h: int, n: int, now: int, lat, max_batch: int, mono: bool) -> tuple[int, int]:
    """BATCHGEN's step for one model (§5.2, Algorithm 1 lines 5, 8, 13): the largest b ≤ ``max_batch`` such
    that b of the queued deadlines ``qd[h:n]`` (sorted) are all ≥ ``now + ℓ(b)`` (``lat[b]``), and the slot
    ``i0`` of the first of them — the batch is the b earliest such requests; (0, h) if none.

    For 1 ≤ b ≤ n − h, "at least b queued deadlines ≥ x" holds exactly when ``qd[n − b] ≥ x`` (one load per
    try); the slot is ``h`` when the head qualifies (the usual case), else the first deadline ≥ x in
    ``[h, n − b]``. On a monotone table (``mono``) feasibility holds for every b up to the answer, so a
    bisection finds it; otherwise the sizes are tried from the largest down (a dip, ℓ(2) < ℓ(1), can make
    b = 2 feasible where b = 1 is not: :mod:`shepherd.core.rules.latency`)."""
    top = n - h
    if top <= 0:
        return 0, h
    if top > max_batch:
        top = max_batch
    if not mono:
        for b in range(top, 0, -1):
            x = now + lat[b]
            if qd[n - b] >= x:
                return b, (h if qd[h] >= x else bisect_left(qd, x, h, n - b))
        return 0, h
    x = now + lat[top]
    if qd[n - top] >= x:
        return top, (h if qd[h] >= x else bisect_left(qd, x, h, n - top))
    lo, hi = 0, top - 1  # invariant: b = lo feasible (0: none), b = hi + 1 infeasible
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if qd[n - mid] >= now + lat[mid]:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return 0, h
    x = now + lat[lo]
    return lo, (h if qd[h] >= x else bisect_left(qd, x, h, n - lo))
