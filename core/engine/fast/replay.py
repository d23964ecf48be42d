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
from shepherd.core.engine.fast.prefetch import prefetch


#: how many rows ahead the merge's passes prefetch a group's rows (:mod:`.prefetch`; two 64-byte lines of int64)
AHEAD = 16
#: a heap entry's order after its time: priority, then push order (``seq``, unique), as one number
_PRIO = np.int64(1) << 58


@njit(cache=True, inline='always')
def _before(ht, hk, a, b):
    """Whether heap entry ``a`` comes before ``b``: the earlier time, then the smaller key (no branch)."""
    return (ht[a] < ht[b]) | ((ht[a] == ht[b]) & (hk[a] < hk[b]))


@njit(cache=True, inline='always')
def _push(ht, hk, hg, ha, size, t, key, g, a):
    """Sift up from a hole at the end of the 4-ary heap (moves, not swaps)."""
    i = size
    while i > 0:
        parent = (i - 1) >> 2
        if t < ht[parent] or (t == ht[parent] and key < hk[parent]):
            ht[i], hk[i], hg[i], ha[i] = ht[parent], hk[parent], hg[parent], ha[parent]
            i = parent
        else:
            break
    ht[i], hk[i], hg[i], ha[i] = t, key, g, a
    return size + 1


@njit(cache=True, inline='always')
def _pop(ht, hk, hg, ha, size):
    """Remove the root of the 4-ary heap: the last entry sifts down from the root's hole; the first of the
    children is found without branches (their order is a coin flip to a branch predictor)."""
    size -= 1
    t, key, g, a = ht[size], hk[size], hg[size], ha[size]
    i = 0
    while True:
        c = 4 * i + 1
        if c >= size:
            break
        if c + 3 < size:
            x = c + _before(ht, hk, c + 1, c)
            y = c + 2 + _before(ht, hk, c + 3, c + 2)
            c = y if _before(ht, hk, y, x) else x
        else:
            for d in range(c + 1, size):
                if _before(ht, hk, d, c):
                    c = d
        if ht[c] < t or (ht[c] == t and hk[c] < key):
            ht[i], hk[i], hg[i], ha[i] = ht[c], hk[c], hg[c], ha[c]
            i = c
        else:
            break
    ht[i], hk[i], hg[i], ha[i] = t, key, g, a
    return size


@njit(cache=True, inline='always')
def _kpush(hk, hp, size, key, p):
    """:func:`_push` for a heap of packed keys (one int64 orders an entry: :func:`_replay_packed`)."""
    i = size
    while i > 0:
        parent = (i - 1) >> 2
        if key < hk[parent]:
            hk[i], hp[i] = hk[parent], hp[parent]
            i = parent
        else:
            break
    hk[i], hp[i] = key, p
    return size + 1


@njit(cache=True, inline='always')
def _ksift(hk, hp, size, key, p):
    """Put (``key``, ``p``) in the root's place of a packed-key heap of ``size`` entries and sift it down."""
    i = 0
    while True:
        c = 4 * i + 1
        if c >= size:
            break
        if c + 3 < size:
            x = c + (hk[c + 1] < hk[c])
            y = c + 2 + (hk[c + 3] < hk[c + 2])
            c = y if hk[y] < hk[x] else x
        else:
            for d in range(c + 1, size):
                if hk[d] < hk[c]:
                    c = d
        if hk[c] < key:
            hk[i], hp[i] = hk[c], hp[c]
            i = c
        else:
            break
    hk[i], hp[i] = key, p


@njit(cache=True, inline='always')
def _kpop(hk, hp, size):
    """Remove the root of a packed-key heap."""
    size -= 1
    _ksift(hk, hp, size, hk[size], hp[size])
    return size


@njit(cache=True, inline='always')
def _number(ua, uk, pe, gid, ck, cp, cn, seq, nxt, g, i, end, kind, key, sh, sb):
    """The packed clocks' numbering of one unit's batches: group ``g``'s logged rows from ``i`` (before
    ``end``) made by a unit of ``kind`` (0 a completion, 1 arrivals, 2 the start) with key ``key`` (any
    key for the start), each given the next global id and its completion pushed; returns (the next row,
    cn, seq, nxt)."""
    while i < end and ua[i] == kind and (kind == 2 or uk[i] == key):
        seq += 1
        cn = _kpush(ck, cp, cn, (pe[i] << sh) | (COMPLETION << sb) | seq, (np.int64(g) << 32) | i)
        gid[i] = nxt  # after pe[i] is read: gid may be pe itself
        nxt += 1
        i += 1
    return i, cn, seq, nxt


@njit(cache=True, inline='always')
def _complete(ua, uk, pe, pre, boff, kb, gid, ck, cp, ptr, cn, seq, nxt, sh, sb):
    """The packed clocks' next event when it is the completion at the heap's root: popped and, unless its
    batch was preempted (a stale completion: no handler), the batches it made numbered (:func:`_number`; the
    log keys a completion by the batch's id in its group's numbering). Returns (cn, seq, nxt)."""
    p = cp[0]
    g = p >> 32
    arg = p & 0xFFFFFFFF
    cn = _kpop(ck, cp, cn)
    if not pre[arg]:
        ptr[g], cn, seq, nxt = _number(ua, uk, pe, gid, ck, cp, cn, seq, nxt, g, ptr[g], boff[g + 1], 0, arg - kb[g],
                                       sh, sb)
    return cn, seq, nxt


def replay_ids(ua, uk, pe, pre, boff, times, toff, kb=None, out=None, arr=None, grp=None):
    """Global id of every logged batch (flat, in the logs' order), in ``out`` if given (it may be ``pe``
    itself: a batch's pushed end is read before its id is written, and never after); a RuntimeError if the
    replay could not reach every one (a log the clock cannot re-enact).
    A completion's unit key (``uk``) is the completed batch's flat place less ``kb[g]`` — by default
    ``boff[g]``: each group's log numbers its batches from 0; zeros where the groups' kernels numbered them
    in one shared log (:func:`shepherd.core.engine.fast.stream._run_shared`).
    The replay itself is :func:`_replay_packed` where every entry's order fits one int64 (times from 0 to
    below ``2**(62 − shift)`` µs: days, for millions of events), else :func:`_replay` (no allocation in either,
    so no reference counting in their loops), or :func:`_replay_walk` — no heap of arrivals — where the
    caller also gives every request's arrival in one column sorted by time (``arr``) and its group (``grp``);
    all give the same ids (``tests/test_engine_groups.py``)."""
    n_groups = len(boff) - 1
    total = int(boff[-1])
    kb = boff[:-1] if kb is None else kb
    gid = np.empty(total, np.int64) if out is None else out  # every place written once every batch is reached
    cap = total + 1
    shift, seq_bits, fits = packing(pe, times, n_groups)
    if fits and _PACKED and arr is not None and _WALK:
        reached = _replay_walk(ua, uk, pe, pre, boff, kb, times, toff, gid, np.empty(cap, np.int64),
                               np.empty(cap, np.int64), np.zeros(max(n_groups, 1), np.int64), boff[:-1].copy(),
                               toff[:-1].copy(), arr, grp, shift, seq_bits)
    elif fits and _PACKED:
        reached = _replay_packed(ua, uk, pe, pre, boff, kb, times, toff, gid, np.empty(cap, np.int64),
                                 np.empty(cap, np.int64), np.empty(n_groups + 1, np.int64),
                                 np.empty(n_groups + 1, np.int64), boff[:-1].copy(), toff[:-1].copy(), shift, seq_bits)
    else:
        reached = _replay_general(ua, uk, pe, pre, boff, kb, times, toff, gid, cap, n_groups)
    if reached != total:  # pragma: no cover - a log the clock cannot re-enact
        raise RuntimeError(f"{total - reached} batches left after the replay")
    return gid


def packing(pe, times, n_groups: int) -> tuple[int, int, bool]:
    """(shift, seq_bits, fits): a packed heap key is ``time << shift | priority << seq_bits | seq`` — room
    for a seq per push (every batch's completion, every arrival run, one per group) below the priority
    (COMPLETION 0, ARRIVAL 2), then the time; ``fits`` where every time (the batches' pushed ends ``pe``, the
    arrivals ``times``) lies in ``[0, 2**(62 − shift) − 1)`` and the batches are fewer than ``2**32``."""
    total = len(pe)
    seq_bits = (total + len(times) + n_groups + 1).bit_length()
    shift = seq_bits + 2
    lo = min(int(pe.min()) if total else 0, int(times.min()) if len(times) else 0)
    hi = max(int(pe.max()) if total else 0, int(times.max()) if len(times) else 0)
    return shift, seq_bits, lo >= 0 and hi < (1 << (62 - shift)) - 1 and total < (1 << 32)


#: whether :func:`replay_ids` may use :func:`_replay_packed` (tests turn it off to run the general replay)
_PACKED = True
#: whether it may use :func:`_replay_walk` where it is given the sorted arrivals (tests turn it off)
_WALK = True


@njit(cache=True)
def _replay_general(ua, uk, pe, pre, boff, kb, times, toff, gid, cap, n_groups):
    return _replay(ua, uk, pe, pre, boff, kb, times, toff, gid, np.empty(cap, np.int64), np.empty(cap, np.int64),
            np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(n_groups + 1, np.int64),
            np.empty(n_groups + 1, np.int64), np.empty(n_groups + 1, np.int64), np.empty(n_groups + 1, np.int64),
            boff[:-1].copy(), toff[:-1].copy())


@njit(cache=True, _nrt=False)
def _replay(ua, uk, pe, pre, boff, kb, times, toff, gid, ct, ck, cg, ca, at, ak, ag, aa, ptr, pos):
    """:func:`replay_ids`' clock, as two heaps of entries (time, priority · 2^58 + seq, group, argument): the
    completions (``c*``, one per running batch) and the arrivals (``a*``, at most one per group), popped
    in the one clock's order — the earlier time, a completion before an arrival at equal times — so that the
    many arrival events sift through a heap of the groups only. Returns the number of batches numbered."""
    n_groups = len(boff) - 1
    cn = 0
    an = 0
    seq = 0
    nxt = 0
    for g in range(n_groups):  # on_start, in group order
        i = ptr[g]
        while i < boff[g + 1] and ua[i] == 2:
            seq += 1
            cn = _push(ct, ck, cg, ca, cn, pe[i], COMPLETION * _PRIO + seq, g, i)
            gid[i] = nxt  # after pe[i] is read: gid may be pe itself
            nxt += 1
            i += 1
        ptr[g] = i
    for g in range(n_groups):
        if toff[g] < toff[g + 1]:
            seq += 1
            an = _push(at, ak, ag, aa, an, times[toff[g]], ARRIVAL * _PRIO + seq, g, 0)
    while cn > 0 or an > 0:
        if cn > 0 and (an == 0 or ct[0] <= at[0]):  # a completion
            g, arg = cg[0], ca[0]
            cn = _pop(ct, ck, cg, ca, cn)
            if pre[arg]:  # a preempted batch's completion is stale: no handler
                continue
            key = arg - kb[g]  # the log keys completions by the batch's id in the group's numbering
            i = ptr[g]
            end_b = boff[g + 1]
            while i < end_b and ua[i] == 0 and uk[i] == key:
                seq += 1
                cn = _push(ct, ck, cg, ca, cn, pe[i], COMPLETION * _PRIO + seq, g, i)
                gid[i] = nxt  # after pe[i] is read: gid may be pe itself
                nxt += 1
                i += 1
            ptr[g] = i
            continue
        g = ag[0]
        an = _pop(at, ak, ag, aa, an)
        end_b = boff[g + 1]
        p, n = pos[g], toff[g + 1]
        while p < n:
            # the run of arrivals ends at the next event of any group (a completion at its time, an arrival
            # just after it)
            if cn > 0 and (an == 0 or ct[0] <= at[0]):
                until = ct[0]
            elif an > 0:
                until = at[0] + 1
            else:
                until = NEVER
            i = ptr[g]
            due = uk[i] if i < end_b and ua[i] == 1 else NEVER
            if times[p] >= until:
                seq += 1
                an = _push(at, ak, ag, aa, an, times[p], ARRIVAL * _PRIO + seq, g, 0)
                break
            stop = until if until < due else due
            while p < n and times[p] < stop:  # arrivals that make nothing push nothing
                p += 1
            if p >= n:
                break
            if times[p] >= until:
                seq += 1
                an = _push(at, ak, ag, aa, an, times[p], ARRIVAL * _PRIO + seq, g, 0)
                break
            tp = times[p]
            while i < end_b and ua[i] == 1 and uk[i] == tp:
                seq += 1
                cn = _push(ct, ck, cg, ca, cn, pe[i], COMPLETION * _PRIO + seq, g, i)
                gid[i] = nxt  # after pe[i] is read: gid may be pe itself
                nxt += 1
                i += 1
            ptr[g] = i
            while p < n and times[p] == tp:
                p += 1
        pos[g] = p
    return nxt


@njit(cache=True, _nrt=False)
def _replay_packed(ua, uk, pe, pre, boff, kb, times, toff, gid, ck, cp, ak, ap, ptr, pos, sh, sb):
    """:func:`_replay`'s clock with each heap entry's order packed in one int64 — ``time << sh | priority << sb
    | seq`` (``seq < 2**sb``, the priority below 4, the time below ``2**(62 − sh)``: :func:`replay_ids` checks) —
    and its group and argument in another (``g << 32 | arg``; an arrival's: ``g``): one comparison and two
    moves per heap step instead of two and four. A handled arrival run's group stays at the root of the
    arrival heap while the run is handled (the next arrival of another group is the least of the root's
    children) and its next arrival replaces it there: one sift instead of a pop and a push. Keys are unique
    (``seq``), so any heap pops them in the one order: the ids are :func:`_replay`'s (and so is the count
    returned)."""
    ARR = np.int64(ARRIVAL) << sb
    n_groups = len(boff) - 1
    cn = 0
    an = 0
    seq = 0
    nxt = 0
    for g in range(n_groups):
        ptr[g], cn, seq, nxt = _number(ua, uk, pe, gid, ck, cp, cn, seq, nxt, g, ptr[g], boff[g + 1], 2, 0, sh, sb)
    for g in range(n_groups):
        if toff[g] < toff[g + 1]:
            seq += 1
            an = _kpush(ak, ap, an, (times[toff[g]] << sh) | ARR | seq, g)
    while cn > 0 or an > 0:
        if cn > 0 and (an == 0 or ck[0] < ak[0]):
            cn, seq, nxt = _complete(ua, uk, pe, pre, boff, kb, gid, ck, cp, ptr, cn, seq, nxt, sh, sb)
            continue
        g = ap[0]
        # the group's entry stays at the root while its run is handled (the docstring)
        other = NEVER
        for c in range(1, min(an, 5)):
            if ak[c] < other:
                other = ak[c]
        end_b = boff[g + 1]
        p, n = pos[g], toff[g + 1]
        pushed = False
        while p < n:
            if cn > 0 and ck[0] < other:
                until = ck[0] >> sh
            elif other < NEVER:
                until = (other >> sh) + 1
            else:
                until = NEVER
            i = ptr[g]
            due = uk[i] if i < end_b and ua[i] == 1 else NEVER
            if times[p] >= until:
                seq += 1
                _ksift(ak, ap, an, (times[p] << sh) | ARR | seq, g)
                pushed = True
                break
            stop = until if until < due else due
            while p < n and times[p] < stop:
                p += 1
            if p >= n:
                break
            if times[p] >= until:
                seq += 1
                _ksift(ak, ap, an, (times[p] << sh) | ARR | seq, g)
                pushed = True
                break
            tp = times[p]
            ptr[g], cn, seq, nxt = _number(ua, uk, pe, gid, ck, cp, cn, seq, nxt, g, i, end_b, 1, tp, sh, sb)
            while p < n and times[p] == tp:
                p += 1
        if not pushed:
            an = _kpop(ak, ap, an)
        pos[g] = p
    return nxt


@njit(cache=True, _nrt=False)
def _replay_walk(ua, uk, pe, pre, boff, kb, times, toff, gid, ck, cp, aseq, ptr, pos, arr, grp, sh, sb):
    """:func:`_replay_packed` without the heap of arrivals: every group's pending arrival is its earliest
    unhandled request, so the least of them is the first unhandled request of the whole trace in arrival
    order (``arr``, sorted; ``grp`` each request's group; a request of group ``h`` is unhandled iff its time
    is at least ``times[pos[h]]``, as a group handles all its requests of one time together) — found by a
    cursor that only moves forward, instead of a sift per arrival run. Where several groups' pending
    arrivals share that time, the one pushed first (least ``aseq``, the push order :func:`_replay_packed`
    keys them by) goes first; a run's end (the next event of another group) is the first unhandled request
    of another group after the cursor, scanned only as far as the run may go. Same ids and count as
    :func:`_replay_packed` (``tests/test_engine_groups.py``)."""
    n_groups = len(boff) - 1
    n_req = len(arr)
    cn = 0
    seq = 0
    nxt = 0
    for g in range(n_groups):
        ptr[g], cn, seq, nxt = _number(ua, uk, pe, gid, ck, cp, cn, seq, nxt, g, ptr[g], boff[g + 1], 2, 0, sh, sb)
    for g in range(n_groups):
        if toff[g] < toff[g + 1]:
            seq += 1
            aseq[g] = seq
    c = 0
    while True:
        while c < n_req:  # the cursor past handled requests
            h = grp[c]
            ph = pos[h]
            if ph < toff[h + 1] and arr[c] >= times[ph]:
                break
            c += 1
        ta = arr[c] if c < n_req else NEVER
        if cn > 0 and (ck[0] >> sh) <= ta:  # a completion (before an arrival at its time)
            cn, seq, nxt = _complete(ua, uk, pe, pre, boff, kb, gid, ck, cp, ptr, cn, seq, nxt, sh, sb)
            continue
        if c >= n_req:
            break
        g = grp[c]  # the group whose arrival at ta was pushed first
        x = c + 1
        while x < n_req and arr[x] == ta:
            h = grp[x]
            if h != g and aseq[h] < aseq[g]:
                ph = pos[h]
                if ph < toff[h + 1] and times[ph] == ta:
                    g = h
            x += 1
        end_b = boff[g + 1]
        p, n = pos[g], toff[g + 1]
        x = c  # the scan for the next pending arrival of another group (every request before c is handled)
        other = NEVER
        found = False
        while p < n:
            pe0 = (ck[0] >> sh) if cn > 0 else NEVER
            i = ptr[g]
            due = uk[i] if i < end_b and ua[i] == 1 else NEVER
            bound = pe0 if pe0 < due else due
            while not found and x < n_req and arr[x] < bound:
                h = grp[x]
                if h != g:
                    ph = pos[h]
                    if ph < toff[h + 1] and arr[x] >= times[ph]:
                        other = arr[x]
                        found = True
                        break
                x += 1
            until = pe0
            if found and other + 1 < until:
                until = other + 1
            if times[p] >= until:
                seq += 1
                aseq[g] = seq
                break
            stop = until if until < due else due
            while p < n and times[p] < stop:
                p += 1
            if p >= n:
                break
            if times[p] >= until:
                seq += 1
                aseq[g] = seq
                break
            tp = times[p]
            ptr[g], cn, seq, nxt = _number(ua, uk, pe, gid, ck, cp, cn, seq, nxt, g, i, end_b, 1, tp, sh, sb)
            while p < n and times[p] == tp:
                p += 1
        pos[g] = p
    return nxt


@njit(cache=True)
def split(group_of, roff, arrival, deadline, model, t, d, m, inv):
    """The requests' arrival, deadline and model columns in group order (group ``g``'s requests, in id order,
    at ``roff[g]`` up to ``roff[g + 1]`` of ``t``, ``d``, ``m``) and each request's place there (``inv``): one
    pass in request order, each group's part written in order (a gather per group would read every column
    once per group). An empty ``inv``: not wanted (:func:`gather_shared` finds the places itself)."""
    pos = roff[:-1].copy()
    keep = len(inv) > 0
    for x in range(len(group_of)):
        g = group_of[x]
        p = pos[g]
        pos[g] = p + 1
        prefetch(t, p + AHEAD)  # the group's rows a few lines ahead (one stream per group and column)
        prefetch(d, p + AHEAD)
        prefetch(m, p + AHEAD)
        t[p] = arrival[x]
        d[p] = deadline[x]
        m[p] = model[x]
        if keep:
            inv[x] = p


@njit(cache=True)
def gather(gid, bgrp, inv, rgrp, woff, wflat, boff, lw, lm, ls, lst, le, lp, cols, rs, rf, rw, rb, ro, rp, start,
           finish, worker, batch, outcome, preempt):
    """The group runs merged into the global tables (:func:`shepherd.core.engine.groups.merge`), in one pass
    over each global table (so each is written in order, the groups' columns read in order): batches from
    the concatenated logs (``lw`` … ``lp``: worker, model, size, start, end, preempted; ``bgrp`` each row's
    group, ``gid`` its global id) into ``cols``; requests from the concatenated request rows (``rs`` …
    ``rp``; ``rgrp`` each row's group, ``inv`` each global request's row, −1 if none) into the recorder's
    columns. Local workers map through ``wflat[woff[g] + w]``, local batch ids through ``gid[boff[g] + b]``."""
    src = np.empty(len(gid), np.int64)
    for j in range(len(gid)):
        src[gid[j]] = j
    for x in range(len(src)):
        j = src[x]
        cols[0, x] = wflat[woff[bgrp[j]] + lw[j]]
        cols[1, x] = lm[j]
        cols[2, x] = ls[j]
        cols[3, x] = lst[j]
        cols[4, x] = le[j]
        cols[5, x] = lp[j]
    for x in range(len(inv)):
        p = inv[x]
        if p < 0:
            continue
        g = rgrp[p]
        start[x] = rs[p]
        finish[x] = rf[p]
        w = rw[p]
        worker[x] = wflat[woff[g] + w] if w >= 0 else -1
        b = rb[p]
        batch[x] = gid[boff[g] + b] if b >= 0 else -1
        outcome[x] = ro[p]
        preempt[x] = rp[p]


@njit(cache=True)
def gather_shared(gid, src, boff, woff, wflat, log, c0, c1, c2, c3, c4, c5, group_of, roff, rs, rf, rw, rb, ro, rp,
                  start, finish, worker, batch, outcome, preempt):
    """:func:`gather` for group runs that numbered their batches in one shared log (``log``, the kernels'
    column-major batch log: group ``g``'s batches are its columns ``boff[g]`` up to ``boff[g + 1]``, and a
    request's batch in ``rb`` is its column there) and whose request rows lie group after group in request
    order (group ``g``'s from ``roff[g]``): each request's row is found by counting, per group, the requests
    met so far in ``group_of`` — no per-row group or place columns. Local workers map through
    ``wflat[woff[g] + w]``, batch columns through ``gid``; ``src``, per global id its log column and group
    (``column | group << 34``, as :func:`shepherd.core.engine.fast.unit_merge.merge_ids` gives it; its bits
    32–33 are ignored), or empty: found here from ``gid``. The requests are written first, then the batch
    table's six columns in global order (``c0`` … ``c5``: worker, model, size, start, end, preempted), so
    these may be request rows already read (``rs``, ``rf``, ``rb``), ``log``'s rows after its sixth or
    ``gid`` itself (read before the first batch is written), and the request columns may be memory that
    only the kernels and the replay used."""
    pos = roff[:-1].copy()
    for x in range(len(group_of)):
        g = group_of[x]
        p = pos[g]
        pos[g] = p + 1
        ahead = p + AHEAD  # the group's rows a few lines ahead (one stream per group and column)
        prefetch(rs, ahead)
        prefetch(rf, ahead)
        prefetch(rw, ahead)
        prefetch(rb, ahead)
        prefetch(ro, ahead)
        prefetch(rp, ahead)
        start[x] = rs[p]
        finish[x] = rf[p]
        w = rw[p]
        worker[x] = wflat[woff[g] + w] if w >= 0 else -1
        b = rb[p]
        batch[x] = gid[b] if b >= 0 else -1
        outcome[x] = ro[p]
        preempt[x] = rp[p]
    nb = len(gid)
    if len(src) != nb:
        src = np.empty(nb, np.int64)  # per global batch id: its log column, with its group above
        for g in range(len(boff) - 1):
            for j in range(boff[g], boff[g + 1]):
                src[gid[j]] = j | (g << 34)
    l0, l1, l2, l3, l4, l5 = log[0], log[1], log[2], log[3], log[4], log[5]
    for x in range(nb):
        ahead = src[min(x + AHEAD, nb - 1)] & 0xFFFFFFFF  # a later batch's log column: its rows requested now
        prefetch(l0, ahead)
        prefetch(l1, ahead)
        prefetch(l2, ahead)
        prefetch(l3, ahead)
        prefetch(l4, ahead)
        prefetch(l5, ahead)
        v = src[x]
        j = v & 0xFFFFFFFF
        c0[x] = wflat[woff[v >> 34] + log[0, j]]
        c1[x] = log[1, j]
        c2[x] = log[2, j]
        c3[x] = log[3, j]
        c4[x] = log[4, j]
        c5[x] = log[5, j]

from shepherd.core.engine import clock  # noqa: E402  (its digest keys this module's JIT cache)
from shepherd.core.engine.fast import jitcache, prefetch as prefetch_module  # noqa: E402

jitcache.refresh(__name__, clock, prefetch_module)
