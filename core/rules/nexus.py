"""Nexus's admission and routing rules as numbers (Shepherd §7's Nexus: admitted requests pass a per-session token
bucket at the provisioned rate, one peak window deep; Nexus SOSP '19 §6.2: a frontend routes a session's requests
to its GPUs by smooth weighted round-robin): what :mod:`shepherd.core.policies.nexus` (and its router,
:mod:`shepherd.core.policies.wrr`) calls and Nexus's kernel compiles."""

from __future__ import annotations


def refill(tokens: float, last: int, rate: float, depth: float, now: int) -> float:
    """The bucket's tokens at ``now``: ``tokens`` at ``last`` plus ``rate`` per µs since, at most ``depth``."""
    tokens = tokens + (now - last) * rate
    return tokens if tokens < depth else depth


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
