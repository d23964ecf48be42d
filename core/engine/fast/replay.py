"""The clock replay of :mod:`shepherd.core.engine.groups`, compiled: global batch ids from the group runs' logs.

The same heap order as :class:`~shepherd.core.engine.clock.Clock` — ``(time, priority, seq)`` with a
completion before an arrival at equal times and a group's run of arrivals cut at the next event of any
group — over flat arrays (every group's log concatenated, ``boff``/``toff`` its offsets); the logic and
its reasons are in :mod:`shepherd.core.engine.groups`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shepherd.core.engine.clock import ARRIVAL, COMPLETION, NEVER


@njit(cache=True)
def _less(ht, hp, hs, a, b):
    if ht[a] != ht[b]:
        return ht[a] < ht[b]
    if hp[a] != hp[b]:
        return hp[a] < hp[b]
    return hs[a] < hs[b]


@njit(cache=True)
def _swap(ht, hp, hs, hg, ha, a, b):
    ht[a], ht[b] = ht[b], ht[a]
    hp[a], hp[b] = hp[b], hp[a]
    hs[a], hs[b] = hs[b], hs[a]
    hg[a], hg[b] = hg[b], hg[a]
    ha[a], ha[b] = ha[b], ha[a]


@njit(cache=True)
def _push(ht, hp, hs, hg, ha, size, t, p, s, g, a):
    i = size
    ht[i], hp[i], hs[i], hg[i], ha[i] = t, p, s, g, a
    while i > 0:
        parent = (i - 1) // 2
        if _less(ht, hp, hs, i, parent):
            _swap(ht, hp, hs, hg, ha, i, parent)
            i = parent
        else:
            break
    return size + 1


@njit(cache=True)
def _pop(ht, hp, hs, hg, ha, size):
    size -= 1
    _swap(ht, hp, hs, hg, ha, 0, size)
    i = 0
    while True:
        l, r, m = 2 * i + 1, 2 * i + 2, i
        if l < size and _less(ht, hp, hs, l, m):
            m = l
        if r < size and _less(ht, hp, hs, r, m):
            m = r
        if m == i:
            break
        _swap(ht, hp, hs, hg, ha, i, m)
        i = m
    return size


@njit(cache=True)
def replay_ids(ua, uk, pe, pre, boff, times, toff):
    """Global id of every logged batch (flat, in the logs' order); -1 where the replay could not reach one."""
    n_groups = len(boff) - 1
    total = boff[-1]
    gid = np.full(total, -1, np.int64)
    cap = total + n_groups + 1
    ht = np.empty(cap, np.int64)
    hp = np.empty(cap, np.int64)
    hs = np.empty(cap, np.int64)
    hg = np.empty(cap, np.int64)
    ha = np.empty(cap, np.int64)
    size = 0
    seq = 0
    nxt = 0
    ptr = boff[:-1].copy()
    pos = toff[:-1].copy()
    for g in range(n_groups):  # on_start, in group order
        i = ptr[g]
        while i < boff[g + 1] and ua[i] == 2:
            gid[i] = nxt
            nxt += 1
            seq += 1
            size = _push(ht, hp, hs, hg, ha, size, pe[i], COMPLETION, seq, g, i)
            i += 1
        ptr[g] = i
    for g in range(n_groups):
        if toff[g] < toff[g + 1]:
            seq += 1
            size = _push(ht, hp, hs, hg, ha, size, times[toff[g]], ARRIVAL, seq, g, 0)
    while size > 0:
        prio, g, arg = hp[0], hg[0], ha[0]
        size = _pop(ht, hp, hs, hg, ha, size)
        end_b = boff[g + 1]
        if prio == COMPLETION:
            if pre[arg]:  # a preempted batch's completion is stale: no handler
                continue
            key = arg - boff[g]  # the log keys completions by the group's local batch id
            i = ptr[g]
            while i < end_b and ua[i] == 0 and uk[i] == key:
                gid[i] = nxt
                nxt += 1
                seq += 1
                size = _push(ht, hp, hs, hg, ha, size, pe[i], COMPLETION, seq, g, i)
                i += 1
            ptr[g] = i
            continue
        p, n = pos[g], toff[g + 1]
        while p < n:
            if size > 0:
                until = ht[0] + 1 if hp[0] >= ARRIVAL else ht[0]
            else:
                until = NEVER
            i = ptr[g]
            due = uk[i] if i < end_b and ua[i] == 1 else NEVER
            if times[p] >= until:
                seq += 1
                size = _push(ht, hp, hs, hg, ha, size, times[p], ARRIVAL, seq, g, 0)
                break
            stop = until if until < due else due
            while p < n and times[p] < stop:  # arrivals that make nothing push nothing
                p += 1
            if p >= n:
                break
            if times[p] >= until:
                seq += 1
                size = _push(ht, hp, hs, hg, ha, size, times[p], ARRIVAL, seq, g, 0)
                break
            tp = times[p]
            while i < end_b and ua[i] == 1 and uk[i] == tp:
                gid[i] = nxt
                nxt += 1
                seq += 1
                size = _push(ht, hp, hs, hg, ha, size, pe[i], COMPLETION, seq, g, i)
                i += 1
            ptr[g] = i
            while p < n and times[p] == tp:
                p += 1
        pos[g] = p
    return gid
