"""PPipe's data-plane rules as numbers (PPipe §5.4, Appendix A.3 Algorithms 1 and 2; the artifact's rules (b) and
(e), :mod:`shepherd.core.pipelines.rules`): what :mod:`shepherd.core.policies.ppipe` and the reservation tables
(:mod:`shepherd.core.pipelines.table`) call and PPipe's kernel compiles.

A resource's reservations are sorted intervals ``starts[r][lo:hi]``, ``ends[r][lo:hi]`` (the tables' Python lists,
the kernel's rows), with ``last_end`` the end of the last one and ``busy_from`` the start of its final gap-free
block.
"""

from __future__ import annotations

from bisect import bisect_right


def earliest_slot(starts, ends, r: int, lo: int, hi: int, last_end: int, busy_from: int, t: int, length: int) -> int:
    """Algorithm 2's ``earliestSlot`` of one resource ``r``: the earliest ``s ≥ t`` at which it is free for
    ``length`` — ``t`` when it is free from then on (or nothing is sent: a zero length), its ``last_end`` when
    ``t`` falls in its final gap-free block, else the first gap after ``t`` long enough."""
    if last_end <= t or length <= 0:
        return t
    if t >= busy_from:
        return last_end
    s, e = starts[r], ends[r]
    i = bisect_right(e, t, lo, hi)  # the first interval ending after t
    while i < hi and s[i] < t + length:
        if e[i] > t:
            t = e[i]
        i += 1
    return t


def insert_at(starts, ends, lo: int, hi: int, start: int, end: int) -> int:
    """Algorithm 2's ``markReserved`` into a gap: where ``[start, end)`` goes among the sorted intervals
    ``starts[lo:hi]``, ``ends[lo:hi]`` of one resource; −1 when it overlaps one (a double booking)."""
    i = bisect_right(starts, start, lo, hi)
    if (i > lo and ends[i - 1] > start) or (i < hi and starts[i] < end):
        return -1
    return i


def stage_score(start: int, length: int, by_uplink: bool, uplink_last_end: int) -> int:
    """Algorithm 2's score of a stage's candidate vGPU (the smaller, the better; ties to the first in pool
    order): its finish, ``start`` + ``length`` — with rule (a) (``by_uplink``: the artifact's score, for every
    stage but the last) at least its server uplink's last reservation end, through which the next transfer
    leaves."""
    finish = start + length
    return uplink_last_end if by_uplink and uplink_last_end > finish else finish


def admit_from(planned: int) -> int:
    """Rule (b) (the artifact's head drop): the smallest batch that may serve a new head — a head is admitted
    only if some batch of round(0.95·``planned``) … ``planned`` meets its deadline (at least 1)."""
    return max(1, int(0.95 * planned + 0.5))


def fill_wake(deadline: int, finish: int, now: int, wait: int) -> int:
    """Rule (e) (the artifact's fill wait): when a DNN with fewer requests queued than its batch looks again —
    the moment after which a batch of one more request (``finish`` and ``wait``: its probe at ``now``) would miss
    ``deadline`` even with no queueing."""
    return deadline - (finish - now - wait) + 1


def wait_until(wait: bool, deadline: int, finish: int, now: int, last_moment: bool) -> int:
    """Algorithm 1's wait for a fuller batch (PPipe §5.4): with waiting on, a batch not yet full that meets the
    head's ``deadline`` with slack waits until its last moment, ``now`` + the slack; −1: send now (no slack, no
    waiting, or the last moment has come)."""
    return now + (deadline - finish) if wait and deadline > finish and not last_moment else -1
