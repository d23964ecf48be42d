"""Nexus's admission and routing rules as numbers (Shepherd §7's Nexus: admitted requests pass a per-session token
bucket at the provisioned rate, one peak window deep; Nexus SOSP '19 §6.2: a frontend routes a session's requests
to its GPUs by smooth weighted round-robin): what :mod:`shepherd.core.policies.nexus` (and its router,
:mod:`shepherd.core.policies.wrr`) calls and Nexus's kernel compiles."""

from __future__ import annotations

import numpy as np


def admits(planned, coin, scale):
    """Whether a request passes admission before the bucket (Shepherd §7.1's overload rule, the policy's
    docstring): its session has an allocation (``planned``) and its coin is below the epoch's admitted fraction
    ``scale``. Element-wise on numpy arrays (the policy's vectorised run of arrivals), a bool on scalars."""
    return planned & (coin < scale)


def take_token(tokens: float, last: int, rate: float, depth: float, now: int) -> tuple[bool, float]:
    """The session's token bucket at ``now`` (its ``tokens`` at ``last``, refilled at ``rate`` per µs up to
    ``depth``): whether it holds a whole token for the request, and its tokens after (one taken if so)."""
    tokens = tokens + (now - last) * rate
    if tokens > depth:
        tokens = depth
    if tokens >= 1.0:
        return True, tokens - 1.0
    return False, tokens


def router_start(weight: float, entries: int, phase: float) -> float:
    """An allocation's router value when an epoch is configured: ``weight · entries · phase`` (``phase`` the
    frontend's uniform draw for it, :mod:`shepherd.core.policies.nexus_schedule`), so that independent frontends
    start the smooth weighted round-robin at different points (Symphony §3.3)."""
    return weight * entries * phase


def reroute_order(deadline, rid):
    """The order in which an epoch's configuration re-routes the queued requests (ids ``rid``, deadlines
    ``deadline``, numpy arrays alike): by deadline, then id — positions into the arrays."""
    by_id = np.argsort(rid, kind="mergesort")
    return by_id[np.argsort(deadline[by_id], kind="mergesort")]


def cycle_over(now: int, cycle_end: int) -> bool:
    """Whether a GPU's duty cycle (Nexus §6.1: the plan's period) has ended at ``now``: a dispatch then starts a
    new one, ``duty`` long, in which every slot may run once again."""
    return now >= cycle_end


def cycle_slot(rr: int, step: int, n: int) -> int:
    """A duty cycle's round-robin (Nexus §6.1; Symphony §2.2: work-conserving within the cycle): the ``step``-th
    of a GPU's ``n`` slots tried, from ``rr``, the slot after the one started last."""
    j = rr + step
    return j - n if j >= n else j


def cycle_wake(served: bool, wake: int, cycle_end: int, now: int) -> int:
    """When a GPU left idle with slots still waiting (``served``: some slot ran this cycle) is woken: at its
    cycle's end, unless a wake-up is already set for then or the cycle is over (−1: none to set)."""
    return cycle_end if served and wake != cycle_end and cycle_end > now else -1


def swrr_pick(cur, weights, lo: int, hi: int, total: float) -> int:
    """Smooth weighted round-robin (nginx's rule; Nexus §6.2) over the entries ``lo … hi − 1``: each entry's
    current value ``cur`` grows by its weight, the largest (the first on ties) is picked and loses ``total``
    (the weights' sum, added in entry order); returns its index."""
    best = lo
    for i in range(lo, hi):
        cur[i] += weights[i]
        if cur[i] > cur[best]:
            best = i
    cur[best] -= total
    return best


def head_misses(head_deadline: int, ready: int, lat, cap: int, queued: int) -> bool:
    """Nexus's duty-cycle slot drops its head when the head would miss its deadline in the slot's batch
    (Nexus §6.1: a slot's batch is at most its planned size ``cap``): the batch of min(``cap``, ``queued``)
    requests started at ``ready`` ends after ``head_deadline`` (``lat``: the model's ℓ(b), µs, by size)."""
    return head_deadline < ready + lat[min(cap, queued)]
