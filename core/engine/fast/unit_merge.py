"""The clock replay as a merge of the groups' batch-making units (issue 18: Flex on 400 workers in Herd groups).

:func:`shepherd.core.engine.fast.replay._replay_walk` re-enacts the one clock event by event: every
arrival run of every group (about one per request on many groups) and every completion, through a heap of
the running batches. But the global ids depend only on the order of the *units that make batches*, and that
order is almost entirely fixed by their event times — so this replay merges the groups' logs by unit, with
a loser tree of one leaf per group:

* a group's log is in its own clock's order, and the one clock keeps each group's order;
* a unit made by a completion at ``t`` comes before one made by arrivals at ``t`` (the clock's priority);
  two completions at ``t`` come in the order their batches were numbered (a completion is pushed when its
  batch is numbered, so its push order is its batch's global id);
* a unit made by arrivals at ``t`` is handled at ``t`` or inside a run of its group's arrivals that began
  earlier — which no event of another group between its start and ``t`` can follow (that event would have
  cut the run) — so units at different times keep their times' order;
* two groups' units made by arrivals at the same ``t`` (a few hundred per million requests on Flex-400)
  come in the order the clock pops their arrival events: a run already under way goes first (it
  *continues* to ``t``); else the one whose pending arrival was pushed first — pushed when its previous run
  was cut, so the one whose previous run came first: the earlier run start, and at equal starts the same
  question one level back (:func:`_first`). Whether a run continues from a group's arrival at ``x`` to its
  next one at ``t`` is decided by what lies between them: no arrival of another group in ``(x, t)``, no
  batch ending (a completion, stale ones too) in ``(x, t]`` (:func:`_continues`).

Where that reading meets a case it does not decide (another group's arrival at ``x`` itself, whose order
against ``x`` it would have to follow further; a batch ending at its own start time; a chain longer than
:data:`MAX_STEPS`), :func:`merge_ids` gives up, leaves the log as it found it and returns None: the caller
runs the walk. The ids are the walk's in every case it returns them (``tests/test_engine_groups.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shepherd.core.engine.clock import ARRIVAL, COMPLETION
from shepherd.core.engine.fast.prefetch import prefetch
from shepherd.core.engine.fast.replay import AHEAD

#: a group's key after its last unit (larger than any packed key)
DONE = np.int64(np.iinfo(np.int64).max)
#: the most steps a tie's resolution may take (runs followed back, levels of equal run starts) before the
#: merge leaves the replay to the walk
MAX_STEPS = 4096
_LOW = np.int64(0xFFFFFFFF)
#: whether the fast path's shared log is replayed by this merge first (tests turn it off to run the walk)
ENABLED = True


@njit(cache=True, inline='always')
def _build(key, tree, win, size):
    """A loser tree over the ``size`` entries of ``key`` (entry ``x`` the leaf at node ``size + x``, node
    ``n``'s children ``2n`` and ``2n + 1``: any size, no padding): ``tree[node]`` the loser at each inner node
    (``1 … size − 1``), ``tree[0]`` the winner (the least key; the left one at equal keys); ``win`` scratch
    space of ``2 · size``."""
    for x in range(size):
        win[size + x] = x
    for node in range(size - 1, 0, -1):
        a, b = win[2 * node], win[2 * node + 1]
        if key[b] < key[a]:
            win[node], tree[node] = b, a
        else:
            win[node], tree[node] = a, b
    tree[0] = win[1]


@njit(cache=True, inline='always')
def _replay_winner(key, tree, size):
    """After the winner's key grew: its way up to the root played again (one comparison per level)."""
    w = tree[0]
    kw = key[w]
    node = (w + size) >> 1
    while node > 0:  # without branches (who wins is a coin flip to a branch predictor)
        other = tree[node]
        ko = key[other]
        m = -np.int64(ko < kw)  # all ones where the other wins
        tree[node] = other ^ ((other ^ w) & m)
        w ^= (w ^ other) & m
        kw ^= (kw ^ ko) & m
        node >>= 1
    tree[0] = w


@njit(cache=True, inline='always')
def _head(ua, uk, pe, kb, boff, g, i, sh, sb):
    """Group ``g``'s next unit (its log row ``i``) as a tree key: time, then priority, then — for a
    completion — its batch's global id (held in ``ua`` once numbered); :data:`DONE` past its last row."""
    if i >= boff[g + 1]:
        return DONE
    if ua[i] == 1:
        return (uk[i] << sh) | (np.int64(ARRIVAL) << sb)
    c = uk[i] + kb[g]
    return (pe[c] << sh) | (np.int64(COMPLETION) << sb) | ua[c]


@njit(cache=True)
def _prev(times, lo, hi, t):
    """The latest of ``times[lo:hi]`` (a group's arrivals, sorted) before ``t``; −1 if none."""
    p = lo + np.searchsorted(times[lo:hi], t)
    return times[p - 1] if p > lo else -1


@njit(cache=True)
def _unit_time(uk, pe, kb, v):
    """The time of the unit that made the numbered batch ``v`` (a ``src`` entry: log row, kind, group)."""
    j = v & _LOW
    kind = (v >> 32) & 3
    if kind == 1:
        return uk[j]
    if kind == 0:
        return pe[uk[j] + kb[v >> 34]]
    return np.int64(0)


@njit(cache=True)
def _continues(g, x, t, arr, grp, pe, uk, kb, src, nxt, maxlat):
    """Whether group ``g``'s run of arrivals that handled its arrival at ``x`` goes on to its next, at ``t``
    (1), is cut before it (0), or the question needs the order of another group's arrival at ``x`` (−1).
    Cut by an arrival of another group in ``(x, t)`` (pending, it is earlier than ``t``) or a batch ending in
    ``(x, t]`` (its completion pending: every such batch is numbered by now, as it began before ``t``)."""
    q = np.searchsorted(arr, x, side="right")
    if q < len(arr) and arr[q] < t:
        return 0
    b = nxt - 1
    while b >= 0:  # numbered batches, latest first, as far as one may end after x
        v = src[b]
        if _unit_time(uk, pe, kb, v) + maxlat <= x:
            break
        e = pe[v & _LOW]
        if x < e <= t:
            return 0
        b -= 1
    for y in range(np.searchsorted(arr, x, side="left"), q):
        if grp[y] != g:
            return -1
    return 1


@njit(cache=True)
def _run_start(g, t, times, toff, arr, grp, pe, uk, kb, src, nxt, maxlat):
    """The start of the run that handled group ``g``'s last arrival before ``t``: −1 if it has none (its
    arrival at ``t`` was pushed at the clock's start), −2 if undecided."""
    x = _prev(times, toff[g], toff[g + 1], t)
    if x < 0:
        return np.int64(-1)
    for _ in range(MAX_STEPS):
        y = _prev(times, toff[g], toff[g + 1], x)
        if y < 0:
            return x
        c = _continues(g, y, x, arr, grp, pe, uk, kb, src, nxt, maxlat)
        if c < 0:
            return np.int64(-2)
        if c == 0:
            return x
        x = y
    return np.int64(-2)


@njit(cache=True)
def _first(g, h, t, times, toff, arr, grp, pe, uk, kb, src, nxt, maxlat):
    """Whether group ``g``'s arrival event at ``t`` is popped before group ``h``'s (1, 0; −1 undecided): a
    run that continues to ``t`` first; else the earlier push — the earlier previous run (a group's first
    arrival was pushed at the start, in group order), and at equal run starts the order there."""
    for _ in range(MAX_STEPS):
        xg = _prev(times, toff[g], toff[g + 1], t)
        xh = _prev(times, toff[h], toff[h + 1], t)
        cg = 0 if xg < 0 else _continues(g, xg, t, arr, grp, pe, uk, kb, src, nxt, maxlat)
        ch = 0 if xh < 0 else _continues(h, xh, t, arr, grp, pe, uk, kb, src, nxt, maxlat)
        if cg < 0 or ch < 0:
            return -1
        if cg or ch:
            return cg
        sg = _run_start(g, t, times, toff, arr, grp, pe, uk, kb, src, nxt, maxlat)
        sh = _run_start(h, t, times, toff, arr, grp, pe, uk, kb, src, nxt, maxlat)
        if sg == -2 or sh == -2:
            return -1
        if sg == -1 or sh == -1:
            return 1 if (sg == -1 and (sh != -1 or g < h)) else 0
        if sg != sh:
            return 1 if sg < sh else 0
        t = sg
    return -1


@njit(cache=True)
def _merge(ua, uk, pe, boff, kb, times, toff, arr, grp, src, key, tree, win, ptr, sh, sb):
    """The merge (module docstring): numbers every logged batch in the one clock's order, writing its global
    id into ``ua`` (its kind then lives in ``src``) and, per global id, its row, kind and group into
    ``src`` (``row | kind << 32 | group << 34``). The groups' next units in a loser tree (``key`` per group;
    a second leaf, :data:`DONE`, where there is one group). Returns the number of batches numbered, or −1 − that
    number where it gave up (:func:`merge_ids` restores their ``ua``)."""
    n_groups = len(boff) - 1
    size = len(key)
    nxt = 0
    maxlat = np.int64(0)
    for g in range(n_groups):  # the start's batches, in group order
        i = ptr[g]
        while i < boff[g + 1] and ua[i] == 2:
            src[nxt] = i | (np.int64(2) << 32) | (np.int64(g) << 34)
            ua[i] = nxt
            if pe[i] > maxlat:
                maxlat = pe[i]
            nxt += 1
            i += 1
        ptr[g] = i
    for g in range(size):
        key[g] = _head(ua, uk, pe, kb, boff, g, ptr[g], sh, sb) if g < n_groups else DONE
    _build(key, tree, win, size)
    while key[tree[0]] != DONE:
        g = tree[0]
        k = key[g]
        rebuild = False
        if (k >> sb) & 3 == ARRIVAL:
            tied = False  # another group's unit at this key is among the winner's losers (the runner-up is)
            node = (g + size) >> 1
            while node > 0:
                if key[tree[node]] == k:
                    tied = True
                node >>= 1
            if tied:  # groups' units made by arrivals at one time: the clock's order of their events
                for c in range(n_groups):
                    if c != g and key[c] == k:
                        r = _first(c, g, k >> sh, times, toff, arr, grp, pe, uk, kb, src, nxt, maxlat)
                        if r < 0:
                            return -1 - nxt
                        if r:
                            g = c
                rebuild = g != tree[0]
        t = k >> sh
        i = ptr[g]
        # the group's rows a few lines ahead: a stream among dozens, each read a row at a time (.prefetch)
        prefetch(ua, i + AHEAD)
        prefetch(uk, i + AHEAD)
        prefetch(pe, i + AHEAD)
        kind = ua[i]
        unit = uk[i]
        tag = (kind << 32) | (np.int64(g) << 34)
        while i < boff[g + 1] and ua[i] == kind and uk[i] == unit:
            if pe[i] <= t:  # a batch ending when it begins: the continuation rule assumes none
                return -1 - nxt
            if pe[i] - t > maxlat:
                maxlat = pe[i] - t
            src[nxt] = i | tag
            ua[i] = nxt
            nxt += 1
            i += 1
        ptr[g] = i
        key[g] = _head(ua, uk, pe, kb, boff, g, i, sh, sb)
        if rebuild:  # not the winner's key that grew: the tree played anew (rare)
            _build(key, tree, win, size)
        else:
            _replay_winner(key, tree, size)
    return nxt


def merge_ids(ua, uk, pe, boff, kb, times, toff, arr, grp, sh, sb):
    """Global id of every logged batch, written into ``ua`` (which is then returned), and per global id its
    row, kind and group (``src``: row ``| kind << 32 | group << 34``) — or None, ``ua`` as it was, where the
    merge gave up (module docstring). ``arr``/``grp``: every request's arrival (sorted) and group."""
    n_groups = len(boff) - 1
    total = int(boff[-1])
    src = np.empty(total, np.int64)
    size = max(2, n_groups)  # the loser tree's leaves (any count: leaf x at node size + x)
    n = _merge(ua, uk, pe, boff, kb, times, toff, arr, grp, src, np.empty(size, np.int64), np.empty(size, np.int64),
               np.empty(2 * size, np.int64), boff[:-1].copy(), sh, sb)
    if n < 0:
        restore(ua, src, -1 - n)
        return None
    if n != total:  # pragma: no cover - a log the clock cannot re-enact
        raise RuntimeError(f"{total - n} batches left after the replay")
    return ua, src


def restore(ua, src, n):
    """Undo a merge that gave up after numbering ``n`` batches: each numbered row's kind back into ``ua``."""
    rows = src[:n] & 0xFFFFFFFF
    ua[rows] = (src[:n] >> 32) & 3


from shepherd.core.engine import clock  # noqa: E402  (its digest keys this module's JIT cache)
from shepherd.core.engine.fast import jitcache, prefetch as prefetch_module, replay  # noqa: E402

jitcache.refresh(__name__, clock, prefetch_module, replay)
