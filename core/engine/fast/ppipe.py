"""PPipe's data plane, compiled (PPipe §5.4, Appendix A.3 Algorithms 1 and 2): the reference run, over arrays.

Same outcomes as ``core/policies/ppipe.py`` on the reference engine with ``EngineConfig(reserved="record")``
— per request outcome, worker, batch, start and finish, per batch every column, per worker busy time, and
the policy's counters (``probes``, ``dispatched``) — under the paper's rules and under each of the six
artifact rule switches of :class:`~shepherd.core.policies.ppipe.PPipeDataPlaneConfig` (any mix), ``wait`` on
or off, overhead mode ``none`` (the policy's default), one serving group (``tests/test_engine_fast_ppipe.py``).
``reserved="events"`` (every stage executed as an engine event that checks its reservation) and a
scheduler-overhead model run on the reference engine (``why_not`` in :mod:`shepherd.core.engine.fast` says so).

The rule switches (:mod:`shepherd.core.pipelines.rules`): (c) ``slot_receive``, (d) ``stage_servers`` and (f)
``transfer_round`` change only the pipelines' links and transfer times, which ``prepare_pipelines`` builds
and this kernel reads as they are; (a) ``uplink_score`` is :func:`_probe_scored` (``probe_scored``'s plain
scan, every stage's GPU found by ``earliestSlot``); (b) ``head_drop`` and (e) ``fill_wait`` are the policy's
branches of the same names in the loop.

What it re-enacts, and where the reference says it:

* the clock (:mod:`..clock`) with nothing but arrivals and timers (``record`` mode books no event): at equal
  times the timers first, in the order they were set, then the arrivals in trace order; a timer whose DNN
  is no longer waiting for that moment (``wait_until``) does nothing (the policy's ``on_timer``);
* Algorithm 1 (the policy's ``schedule``): step 1, the pipeline with the least waiting time at its planned
  batch size (strictly less: ties to the first in plan order); step 2, from that batch size down to 1 the
  first whose finish meets the head's deadline; no size works — drop the head and start over; fewer
  requests queued than the size — wait till the last moment (a timer at ``now + deadline − finish``) when
  ``wait`` is on and there is slack and this is not that moment, else send what is queued (probed again at
  that size); otherwise reserve and dispatch the first ``bs``. Arrivals that find their DNN waiting with
  fewer than the awaited batch queued only join the queue (the policy's documented shortcut). A DNN
  without a pipeline drops what it queues;
* Algorithm 2's ``probe`` as the plain scan in pool order (:func:`_probe`): a first-stage vGPU starts at
  ``max(now, its last reservation's end)`` (its reservations never leave a gap after ``now``:
  :mod:`shepherd.core.pipelines.reservations`), a later stage's at the earliest slot of its GPU after the
  transfer's earliest common slot on the previous server's uplink and its own server's downlink; the
  earliest start wins, ties to the first in pool order — the answer the reference's indexed shortcuts give
  (its docstring, ``tests/test_ppipe_probe_index.py``). ``reserve`` marks each interval in per-resource
  sorted arrays (appends, or inserts into gaps; intervals over by ``now`` are dropped when a resource
  needs room: queries never start before ``now``);
* the recorder's ``record`` mode (:meth:`~shepherd.core.engine.recorder.Recorder.record_path`): one batch
  row per stage in dispatch order, the requests' start, finish, worker and batch from the last stage,
  served iff the finish meets the deadline, each stage's time added to its vGPU's busy time; requests
  never dispatched end dropped.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

NEVER = np.int64(1) << 62
#: probe buffer fields, per stage: vGPU, GPU start, GPU time, uplink of the transfer in, downlink, its start, its time
P_W, P_START, P_LI, P_UP, P_DOWN, P_TS, P_LN = range(7)
#: what the kernel returns as its error: none, a reservation overlapping another, a slot of zero length
E_OK, E_OVERLAP, E_EMPTY = range(3)
#: what Algorithm 1 does with the head of a queue: send a batch, wait (a timer is set), drop the head
SEND, WAIT, DROP = range(3)

#: the trace (arrival, deadline, model) and the recorder's request columns, written in place
Requests = namedtuple("Requests", "t d model start finish worker batch outcome")
#: the plan (:func:`arrays`): per model its pipelines ``mp_pipe[mp_off[m]:mp_off[m + 1]]``; per pipeline its
#: batch size and stages ``[st_off[p], st_off[p + 1])``; per stage its pool's candidates
#: ``[pool_off[s], pool_off[s + 1])`` (vGPU, its server's downlink and uplink) and latency and inbound
#: transfer per batch size
Pipes = namedtuple("Pipes", "mp_off mp_pipe p_batch st_off pool_off cand lat tin")
#: a pool's candidate: its vGPU, its server's downlink and uplink
CAND = np.dtype([("w", np.int64), ("down", np.int64), ("up", np.int64)])
#: per resource (vGPU, link) its reservations, sorted: ``IS``/``IE[r, res[r].ilo:res[r].ihi]`` (:data:`RES`)
Reservations = namedtuple("Reservations", "IS IE res")
#: per resource: its reservations' range in ``IS``/``IE``, its last end and the start of its final gap-free
#: block (one structured array: an inlined helper's named-tuple argument is reference-counted per array)
RES = np.dtype([("ilo", np.int64), ("ihi", np.int64), ("last_end", np.int64), ("busy_from", np.int64)])
#: per DNN its queue ``q_order[qh[m]:qe[m]]``, the head admitted last (rule (b)), the moment it waits for and
#: the batch it awaits; the timers' binary heap (time, set order, DNN)
Dnns = namedtuple("Dnns", "q_order qh qe admitted wait_until wait_need ht hs hm")
#: the policy's switches (``wait`` and the artifact rules (a), (b), (e))
Rules = namedtuple("Rules", "wait scored head_drop fill_wait")
#: the run's scalars: next arrival, timers (count, set order), batch rows, counters, and the error
RUN = np.dtype([("i", np.int64), ("nh", np.int64), ("seq", np.int64), ("nb", np.int64), ("probes", np.int64),
                ("dispatched", np.int64), ("err", np.int64), ("err_res", np.int64), ("err_start", np.int64),
                ("err_len", np.int64)])
#: scratch: two probe buffers (the best path so far and the next probe's) and the decision
Scratch = namedtuple("Scratch", "bufs dec")
#: one decision of Algorithm 1: the pipeline, which probe buffer holds its path, the batch size, the path's
#: finish, the head and its deadline
DECISION = np.dtype([("best", np.int64), ("kb", np.int64), ("bs", np.int64), ("finish", np.int64),
                     ("head", np.int64), ("deadline", np.int64)])


# ---------------------------------------------------------------------- Algorithm 2: probe


@njit(cache=True, inline='always')
def _fit(rv, r, t, length):
    """``earliestSlot`` of one resource: the earliest ``s ≥ t`` at which ``r`` is free for ``length``."""
    last = rv.res[r].last_end
    if last <= t or length <= 0:
        return t
    if t >= rv.res[r].busy_from:  # inside the final gap-free block
        return last
    lo, hi = rv.res[r].ilo, rv.res[r].ihi
    while lo < hi:  # the first interval ending after t
        mid = (lo + hi) >> 1
        if rv.IE[r, mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    i, n = lo, rv.res[r].ihi
    while i < n and rv.IS[r, i] < t + length:
        if rv.IE[r, i] > t:
            t = rv.IE[r, i]
        i += 1
    return t


@njit(cache=True, inline='always')
def _link_slot(rv, up, down, ts, ln):
    """The earliest start ≥ ``ts`` (``up`` free there) at which both links are free for ``ln``."""
    while True:
        s = _fit(rv, down, ts, ln)
        if s == ts:
            return ts
        ts = _fit(rv, up, s, ln)
        if ts == s:
            return ts


@njit(cache=True, inline='always')
def _first_stage(pl, rv, s0, bs, now, buf):
    """The first stage's vGPU: free soonest at or after ``now`` (ties to the first in pool order); its end and
    its server's uplink."""
    li = pl.lat[s0, bs]
    best, bw = NEVER, -1
    for c in range(pl.pool_off[s0], pl.pool_off[s0 + 1]):
        t = rv.res[pl.cand[c].w].last_end
        if t <= now:
            best, bw = now, c
            break
        if t < best:
            best, bw = t, c
    buf[P_W, 0], buf[P_START, 0], buf[P_LI, 0] = pl.cand[bw].w, best, li
    return best + li, pl.cand[bw].up


@njit(cache=True, inline='always')
def _probe(pl, rv, p, bs, now, buf):
    """Algorithm 2 ``probe(p, bs)`` at ``now`` into ``buf`` (per stage: the probe buffer fields); (finish, wait)."""
    s0 = pl.st_off[p]
    tg, up = _first_stage(pl, rv, s0, bs, now, buf)
    busy = pl.lat[s0, bs]
    for j in range(1, pl.st_off[p + 1] - s0):
        s = s0 + j
        li, ln = pl.lat[s, bs], pl.tin[s, bs]
        busy += li + ln
        floor = tg + ln  # no GPU of the pool starts earlier
        best, bw, bts = NEVER, -1, 0
        up_busy = ln > 0 and rv.res[up].last_end > tg
        tu = _fit(rv, up, tg, ln) if up_busy else tg
        for c in range(pl.pool_off[s], pl.pool_off[s + 1]):
            down = pl.cand[c].down
            ts = _link_slot(rv, up, down, tu, ln) if ln > 0 and (up_busy or rv.res[down].last_end > tg) else tg
            start = _fit(rv, pl.cand[c].w, ts + ln, li)
            if start < best:
                best, bw, bts = start, c, ts
                if start <= floor:
                    break
        buf[P_W, j], buf[P_START, j], buf[P_LI, j] = pl.cand[bw].w, best, li
        buf[P_UP, j], buf[P_DOWN, j], buf[P_TS, j], buf[P_LN, j] = up, pl.cand[bw].down, bts, ln
        tg = best + li
        up = pl.cand[bw].up
    return tg, tg - now - busy


@njit(cache=True, inline='always')
def _probe_scored(pl, rv, p, bs, now, buf):
    """Rule (a), ``uplink_score`` (``reservations.probe_scored``): the plain scan in pool order, a candidate of a
    non-last stage scored by the later of its finish and its server uplink's last reservation; ties to the
    first. Same buffer and answer as :func:`_probe`."""
    s0 = pl.st_off[p]
    last_j = pl.st_off[p + 1] - s0 - 1
    tg, up, busy = now, -1, 0
    for j in range(last_j + 1):
        s = s0 + j
        li = pl.lat[s, bs]
        ln = pl.tin[s, bs] if j else 0
        busy += li + ln
        best, bw, bts, bstart = NEVER, -1, 0, 0
        for c in range(pl.pool_off[s], pl.pool_off[s + 1]):
            down = pl.cand[c].down
            if j and ln > 0 and (rv.res[up].last_end > tg or rv.res[down].last_end > tg):
                ts = _link_slot(rv, up, down, _fit(rv, up, tg, ln), ln)
            else:
                ts = tg
            start = _fit(rv, pl.cand[c].w, ts + ln, li)
            score = start + li
            if j < last_j and rv.res[pl.cand[c].up].last_end > score:
                score = rv.res[pl.cand[c].up].last_end
            if score < best:
                best, bw, bts, bstart = score, c, ts, start
        buf[P_W, j], buf[P_START, j], buf[P_LI, j] = pl.cand[bw].w, bstart, li
        buf[P_UP, j], buf[P_DOWN, j], buf[P_TS, j], buf[P_LN, j] = up, pl.cand[bw].down, bts, ln
        tg = bstart + li
        up = pl.cand[bw].up
    return tg, tg - now - busy


@njit(cache=True)  # (a call, not inlined: inlined at its seven call sites the kernel took ~85 s to compile)
def _probe_any(scored, pl, rv, p, bs, now, buf, run):
    """Algorithm 2's probe (counted in ``run``): the artifact's GPU score (rule (a)) or the paper's."""
    run[0].probes += 1
    if scored:
        return _probe_scored(pl, rv, p, bs, now, buf)
    return _probe(pl, rv, p, bs, now, buf)


# ---------------------------------------------------------------------- Algorithm 1: schedule


@njit(cache=True, inline='always')
def _pick(pl, rv, bufs, rules, run, dec, m, now):
    """Step 1: the pipeline of DNN ``m`` with the least waiting time at its planned batch size (strictly less:
    ties to the first in plan order), its path in ``bufs[dec.kb]``."""
    dc = dec[0]
    p0, p1 = pl.mp_off[m], pl.mp_off[m + 1]
    best = pl.mp_pipe[p0]
    kb = 0
    finish, best_wait = _probe_any(rules.scored, pl, rv, best, pl.p_batch[best], now, bufs[0], run)
    for x in range(p0 + 1, p1):
        p = pl.mp_pipe[x]
        f, wt = _probe_any(rules.scored, pl, rv, p, pl.p_batch[p], now, bufs[1 - kb], run)
        if wt < best_wait:
            best_wait, best, finish, kb = wt, p, f, 1 - kb
    dc.best, dc.kb, dc.finish, dc.bs = best, kb, finish, pl.p_batch[best]


@njit(cache=True, inline='always')
def _head_ok(pl, rv, bufs, rules, run, dec, now):
    """Rule (b): a new head is admitted only if a batch of round(0.95·bs) … bs meets its deadline."""
    dc = dec[0]
    if dc.finish <= dc.deadline:
        return True
    planned = pl.p_batch[dc.best]
    lowest = max(1, int(0.95 * planned + 0.5))
    for b in range(planned - 1, lowest - 1, -1):
        f, _ = _probe_any(rules.scored, pl, rv, dc.best, b, now, bufs[1 - dc.kb], run)
        if f <= dc.deadline:
            return True
    return False


@njit(cache=True, inline='always')
def _meet_deadline(pl, rv, bufs, rules, run, dec, now):
    """Step 2: from the planned batch size down to 1, the first whose finish meets the head's deadline (its
    path in ``bufs[dec.kb]``); 0 if none."""
    dc = dec[0]
    if dc.finish <= dc.deadline:
        return
    dc.bs = 0
    for b in range(pl.p_batch[dc.best] - 1, 0, -1):
        finish, _ = _probe_any(rules.scored, pl, rv, dc.best, b, now, bufs[dc.kb], run)
        dc.finish = finish
        if finish <= dc.deadline:
            dc.bs = b
            return


@njit(cache=True, inline='always')
def _timer_push(dn, run, wake, m):
    """Set DNN ``m``'s wake-up at ``wake`` (the set order counts up) in the binary heap of timers (sift up from
    the end)."""
    rs = run[0]
    rs.seq += 1
    ht, hs, hm, seq = dn.ht, dn.hs, dn.hm, rs.seq
    k = rs.nh
    while k > 0:
        par = (k - 1) >> 1
        if ht[par] > wake or (ht[par] == wake and hs[par] > seq):
            ht[k], hs[k], hm[k] = ht[par], hs[par], hm[par]
            k = par
        else:
            break
    ht[k], hs[k], hm[k] = wake, seq, m
    rs.nh += 1


@njit(cache=True, inline='always')
def _timer_pop(dn, run):
    """Remove the earliest timer (read ``dn.ht[0]``, ``dn.hm[0]`` first): sift the last entry down from the root."""
    ht, hs, hm = dn.ht, dn.hs, dn.hm
    run[0].nh -= 1
    nh = run[0].nh
    if nh == 0:
        return
    xt, xs, xm = ht[nh], hs[nh], hm[nh]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= nh:
            break
        if c + 1 < nh and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hs[c + 1] < hs[c])):
            c += 1
        if ht[c] < xt or (ht[c] == xt and hs[c] < xs):
            ht[k], hs[k], hm[k] = ht[c], hs[c], hm[c]
            k = c
        else:
            break
    ht[k], hs[k], hm[k] = xt, xs, xm


@njit(cache=True, inline='always')
def _short_queue(pl, rv, dn, bufs, rules, run, dec, m, now, last_moment):
    """Fewer requests queued than the batch size: wait (rule (e): until a batch of queued + 1 misses the
    deadline even with no queueing; else till the last moment, when ``wait`` is on and there is slack and
    this is not that moment) or send what is queued (probed again at that size). SEND, WAIT or DROP."""
    dc = dec[0]
    queued = dn.qe[m] - dn.qh[m]
    if rules.fill_wait and rules.wait:
        small, wait_small = _probe_any(rules.scored, pl, rv, dc.best, queued + 1, now, bufs[1 - dc.kb], run)
        if small > dc.deadline:
            return DROP
        dn.wait_until[m] = dc.deadline - (small - now - wait_small) + 1
        dn.wait_need[m] = 0  # every arrival re-decides
        _timer_push(dn, run, dn.wait_until[m], m)
        return WAIT
    slack = dc.deadline - dc.finish
    if rules.wait and slack > 0 and not last_moment:
        dn.wait_until[m], dn.wait_need[m] = now + slack, dc.bs
        _timer_push(dn, run, now + slack, m)
        return WAIT
    dc.bs = queued  # the last moment: send what is queued
    dc.finish, _ = _probe_any(rules.scored, pl, rv, dc.best, queued, now, bufs[dc.kb], run)
    return DROP if dc.finish > dc.deadline else SEND  # (a smaller batch is never slower)


@njit(cache=True, inline='always')
def _decide(req, pl, rv, dn, sc, rules, run, m, now, last_moment):
    """Algorithm 1 for the head of DNN ``m``'s queue: SEND (``sc.dec`` holds the pipeline, the buffer with its
    path and the batch size), WAIT or DROP (the head)."""
    bufs, dec = sc.bufs, sc.dec
    _pick(pl, rv, bufs, rules, run, dec, m, now)
    dc = dec[0]
    dc.head = dn.q_order[dn.qh[m]]
    dc.deadline = req.d[dc.head]
    if rules.head_drop and dc.head != dn.admitted[m]:
        if not _head_ok(pl, rv, bufs, rules, run, dec, now):
            return DROP
        dn.admitted[m] = dc.head
    _meet_deadline(pl, rv, bufs, rules, run, dec, now)
    if dc.bs == 0:
        return DROP
    if dn.qe[m] - dn.qh[m] < dc.bs:
        return _short_queue(pl, rv, dn, bufs, rules, run, dec, m, now, last_moment)
    return SEND


# ---------------------------------------------------------------------- reserve and record a path


@njit(cache=True, inline='always')
def _room(rv, r, now, need):
    """Make room for ``need`` more intervals of ``r`` (drop those over by ``now``, move the rest to the front);
    False if there is not enough room even so."""
    cap = rv.IS.shape[1]
    if rv.res[r].ihi + need <= cap:
        return True
    lo = rv.res[r].ilo
    while lo < rv.res[r].ihi and rv.IE[r, lo] <= now:
        lo += 1
    k = rv.res[r].ihi - lo
    for i in range(k):
        rv.IS[r, i] = rv.IS[r, lo + i]
        rv.IE[r, i] = rv.IE[r, lo + i]
    rv.res[r].ilo, rv.res[r].ihi = 0, k
    return k + need <= cap


@njit(cache=True, inline='always')
def _make_room(rv, buf, ns, now):
    """Room in every table the path reserves (3 per stage: a path may reserve one resource more than once);
    the reservations, their tables grown if a resource has too little even so."""
    grow = False
    for j in range(ns):
        if not _room(rv, buf[P_W, j], now, 3 * ns):
            grow = True
        if j and not (_room(rv, buf[P_UP, j], now, 3 * ns) and _room(rv, buf[P_DOWN, j], now, 3 * ns)):
            grow = True
    if not grow:
        return rv
    c2 = 2 * rv.IS.shape[1] + 3 * ns
    IS2 = np.zeros((rv.IS.shape[0], c2), np.int64)
    IE2 = np.zeros((rv.IS.shape[0], c2), np.int64)
    IS2[:, :rv.IS.shape[1]] = rv.IS
    IE2[:, :rv.IE.shape[1]] = rv.IE
    return Reservations(IS2, IE2, rv.res)


@njit(cache=True, inline='always')
def _reserve(rv, r, start, length):
    """``markReserved(r, start, length)`` (room made beforehand); an error code."""
    if length <= 0:
        return E_OK
    end = start + length
    last = rv.res[r].last_end
    lo, hi = rv.res[r].ilo, rv.res[r].ihi
    if start >= last:
        if start == last and hi > lo:  # right after the last interval: extend it (the same busy time)
            rv.IE[r, hi - 1] = end
        else:
            rv.IS[r, hi], rv.IE[r, hi] = start, end
            rv.res[r].ihi = hi + 1
            if start > last:  # after a gap: the gap-free block restarts here
                rv.res[r].busy_from = start
        rv.res[r].last_end = end
        return E_OK
    a, b = lo, hi  # the first interval starting after start
    while a < b:
        mid = (a + b) >> 1
        if rv.IS[r, mid] <= start:
            a = mid + 1
        else:
            b = mid
    if (a > lo and rv.IE[r, a - 1] > start) or (a < hi and rv.IS[r, a] < end):
        return E_OVERLAP
    for i in range(hi, a, -1):
        rv.IS[r, i] = rv.IS[r, i - 1]
        rv.IE[r, i] = rv.IE[r, i - 1]
    rv.IS[r, a], rv.IE[r, a] = start, end
    rv.res[r].ihi = hi + 1
    return E_OK


@njit(cache=True, inline='always')
def _fail(run, code, r, start, length):
    """Record the kernel's error (its code, the resource and the slot); False."""
    rs = run[0]
    rs.err, rs.err_res, rs.err_start, rs.err_len = code, r, start, length
    return False


@njit(cache=True, inline='always')
def _reserve_path(rv, buf, ns, run):
    """Reserve every stage's transfer links and vGPU (``reserve``); False on an error (``run``)."""
    for j in range(ns):
        if j:
            for r in (buf[P_UP, j], buf[P_DOWN, j]):
                e = _reserve(rv, r, buf[P_TS, j], buf[P_LN, j])
                if e != E_OK:
                    return _fail(run, e, r, buf[P_TS, j], buf[P_LN, j])
        e = _reserve(rv, buf[P_W, j], buf[P_START, j], buf[P_LI, j])
        if e != E_OK:
            return _fail(run, e, buf[P_W, j], buf[P_START, j], buf[P_LI, j])
    return True


@njit(cache=True, inline='always')
def _record_path(req, dn, blog, w_busy, buf, ns, m, bs, now, run):
    """The recorder's record mode: a batch row per stage (each stage's time to its vGPU's busy time), the
    queue's first ``bs`` requests from the last stage; returns the log (grown when full)."""
    nb = run[0].nb
    if nb + ns > blog.shape[1]:
        b2 = np.zeros((5, 2 * blog.shape[1] + ns), np.int64)
        b2[:, :nb] = blog[:, :nb]
        blog = b2
    for j in range(ns):
        if buf[P_START, j] < now or buf[P_LI, j] <= 0:
            _fail(run, E_EMPTY, buf[P_W, j], buf[P_START, j], buf[P_LI, j])
            return blog
        w = buf[P_W, j]
        blog[0, nb], blog[1, nb], blog[2, nb] = w, m, bs
        blog[3, nb], blog[4, nb] = buf[P_START, j], buf[P_START, j] + buf[P_LI, j]
        w_busy[w] += buf[P_LI, j]
        nb += 1
    run[0].nb = nb
    start, end, w = blog[3, nb - 1], blog[4, nb - 1], blog[0, nb - 1]
    for x in range(dn.qh[m], dn.qh[m] + bs):
        r = dn.q_order[x]
        req.start[r], req.finish[r], req.worker[r], req.batch[r] = start, end, w, nb - 1
        req.outcome[r] = SERVED if req.d[r] >= end else LATE
    return blog


# ---------------------------------------------------------------------- the loop


@njit(cache=True, inline='always')
def _schedule(req, pl, rv, dn, sc, rules, run, blog, w_busy, m, now, last_moment):
    """Algorithm 1 for DNN ``m`` at ``now`` until its queue is empty or it waits (a DNN without a pipeline
    drops what it queues); returns the reservations and the log (either may have grown)."""
    if pl.mp_off[m] == pl.mp_off[m + 1]:
        for x in range(dn.qh[m], dn.qe[m]):
            req.outcome[dn.q_order[x]] = DROPPED
        dn.qh[m] = dn.qe[m]
        return rv, blog
    while dn.qe[m] > dn.qh[m]:
        what = _decide(req, pl, rv, dn, sc, rules, run, m, now, last_moment)
        if what == WAIT:
            break
        dc = sc.dec[0]
        if what == DROP:
            req.outcome[dc.head] = DROPPED
            dn.qh[m] += 1
            continue
        buf = sc.bufs[dc.kb]
        ns = pl.st_off[dc.best + 1] - pl.st_off[dc.best]
        rv = _make_room(rv, buf, ns, now)
        if not _reserve_path(rv, buf, ns, run):
            break
        run[0].dispatched += 1
        blog = _record_path(req, dn, blog, w_busy, buf, ns, m, dc.bs, now, run)
        if run[0].err != E_OK:
            break
        dn.qh[m] += dc.bs
        dn.wait_until[m] = -1
        last_moment = False
    return rv, blog


@njit(cache=True, inline='always')
def _next_event(req, dn, rules, run):
    """The next event: a timer at or before the next arrival (timers first at equal times), else the arrival.
    (DNN, time, whether it is the last moment of its wait); DNN −1: nothing to decide, −2: the run is over."""
    rs = run[0]
    i, n = rs.i, len(req.t)
    if rs.nh > 0 and (i >= n or dn.ht[0] <= req.t[i]):
        now, m = dn.ht[0], dn.hm[0]
        _timer_pop(dn, run)
        if dn.wait_until[m] != now:
            return -1, now, False  # stale: the DNN no longer waits for this moment
        dn.wait_until[m] = -1
        return m, now, not rules.fill_wait
    if i >= n:
        return -2, 0, False
    now, m = req.t[i], req.model[i]
    dn.qe[m] += 1
    rs.i = i + 1
    if now < dn.wait_until[m] and dn.qe[m] - dn.qh[m] < dn.wait_need[m]:
        return -1, now, False  # it joins the queue of a DNN waiting for a larger batch
    return m, now, False


@njit(cache=True)
def run_ppipe(req, pl, dn, rules, run, n_res, n_gpus, max_stages, cap):
    """The run (module docstring): fills the request columns; returns (batch log [5, rows]: worker, model, size,
    start, end; w_busy). ``run`` holds the counters and the error (code, resource, start and length)."""
    rv = Reservations(np.zeros((n_res, cap), np.int64), np.zeros((n_res, cap), np.int64), np.zeros(n_res, RES))
    w_busy = np.zeros(n_gpus, np.int64)
    sc = Scratch(np.zeros((2, 7, max(max_stages, 1)), np.int64), np.zeros(1, DECISION))
    blog = np.zeros((5, max(len(req.t), 16)), np.int64)
    while True:
        m, now, last_moment = _next_event(req, dn, rules, run)
        if m == -2:
            break
        if m >= 0:
            rv, blog = _schedule(req, pl, rv, dn, sc, rules, run, blog, w_busy, m, now, last_moment)
            if run[0].err != E_OK:
                return blog[:, :run[0].nb].copy(), w_busy
    for x in range(len(req.t)):
        if req.outcome[x] == 0:  # never served (PENDING)
            req.outcome[x] = DROPPED
    return blog[:, :run[0].nb].copy(), w_busy


def arrays(pipes: list, n_models: int, n_gpus: int) -> tuple:
    """The kernel's static arrays from the runtime's pipelines (``PipeRuntime``, in plan order): per model its
    pipelines in that order; per pipeline its batch size and stages; per stage its pool's candidates
    (vGPU, its server's downlink, uplink: resources ``n_gpus + 2·node (+1)``, :mod:`~shepherd.core.pipelines.table`)
    and its latency and inbound transfer per batch size."""
    by_model: list[list[int]] = [[] for _ in range(n_models)]
    for i, p in enumerate(pipes):
        by_model[p.model].append(i)
    mp_off = np.zeros(n_models + 1, np.int64)
    mp_off[1:] = np.cumsum([len(x) for x in by_model])
    mp_pipe = np.array([i for x in by_model for i in x], np.int64)
    p_batch = np.array([p.batch for p in pipes], np.int64)
    stages = [(p, j) for p in pipes for j in range(len(p.workers))]
    st_off = np.zeros(len(pipes) + 1, np.int64)
    st_off[1:] = np.cumsum([len(p.workers) for p in pipes])
    pool_off = np.zeros(len(stages) + 1, np.int64)
    pool_off[1:] = np.cumsum([len(p.workers[j]) for p, j in stages])
    c_w = np.array([w for p, j in stages for w in p.workers[j]], np.int64)
    c_node = np.array([nd for p, j in stages for nd in p.nodes[j]], np.int64)
    width = max([len(p.lat[j]) for p, j in stages], default=1)
    lat = np.zeros((max(len(stages), 1), width), np.int64)
    tin = np.zeros((max(len(stages), 1), width), np.int64)
    for s, (p, j) in enumerate(stages):
        if p.batch >= len(p.lat[j]):
            raise ValueError(f"pipeline of model {p.model}: batch size {p.batch} beyond its profiled "
                             f"{len(p.lat[j]) - 1}")
        lat[s, :len(p.lat[j])] = p.lat[j]
        tin[s, :len(p.transfer_in[j])] = p.transfer_in[j]
    max_stages = max((len(p.workers) for p in pipes), default=1)
    return (mp_off, mp_pipe, p_batch, st_off, pool_off, c_w, n_gpus + 2 * c_node + 1, n_gpus + 2 * c_node, lat,
            tin, max_stages)


def run_group(engine, config, runtime) -> dict:
    """The run of the one serving group (the ``engine`` mode of :mod:`.`): the kernel over the whole trace, writing the
    recorder's columns; returns the policy's counters."""
    rec = engine.rec
    tables = runtime.tables
    n_gpus = len(engine.res.w_hw)
    n_models = int(engine.model.max()) + 1 if len(engine.model) else 0
    n_models = max(n_models, max((p.model + 1 for p in tables["pipelines"]), default=0))
    n_res = n_gpus + 2 * max(tables["nodes"], 1)
    (mp_off, mp_pipe, p_batch, st_off, pool_off, c_w, c_down, c_up, lat, tin,
     max_stages) = arrays(list(tables["pipelines"]), n_models, n_gpus)
    t, d, m = (np.require(col, np.int64, ["C", "W"]) for col in (engine.arrival, engine.deadline, engine.model))
    q_order = np.argsort(m, kind="stable").astype(np.int64)  # each model's requests in trace order
    q_base = np.zeros(n_models + 1, np.int64)
    q_base[1:] = np.cumsum(np.bincount(m, minlength=n_models))
    hcap = 2 * len(t) + 16
    dn = Dnns(q_order, q_base[:-1].copy(), q_base[:-1].copy(), np.full(n_models, -1, np.int64),
              np.full(n_models, -1, np.int64), np.zeros(n_models, np.int64), np.zeros(hcap, np.int64),
              np.zeros(hcap, np.int64), np.zeros(hcap, np.int64))
    req = Requests(t, d, m, rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome)
    rules = Rules(bool(config.wait), bool(config.uplink_score), bool(config.head_drop), bool(config.fill_wait))
    run = np.zeros(1, RUN)
    cand = np.zeros(len(c_w), CAND)
    cand["w"], cand["down"], cand["up"] = c_w, c_down, c_up
    blog, w_busy = run_ppipe(req, Pipes(mp_off, mp_pipe, p_batch, st_off, pool_off, cand, lat, tin), dn, rules,
                             run, n_res, n_gpus, max_stages, 64)
    err = run[0]
    slot = f"[{err['err_start']}, {err['err_start'] + err['err_len']})"
    if err["err"] == E_OVERLAP:  # pragma: no cover - the reference's Reservations.reserve refuses it so
        raise RuntimeError(f"resource {err['err_res']}: {slot} overlaps a reservation")
    if err["err"] == E_EMPTY:  # pragma: no cover - the reference's Recorder.record_path refuses it so
        raise RuntimeError(f"worker {err['err_res']}: cannot book {slot} at the decision")
    rec.set_batches(*(np.ascontiguousarray(blog[c]) for c in range(5)), np.zeros(blog.shape[1], np.int64))
    rec.w_busy[:] = w_busy.tolist()
    return {"probes": int(err["probes"]), "dispatched": int(err["dispatched"])}


from shepherd.core.engine import outcomes  # noqa: E402  (keys this module's JIT cache)
from shepherd.core.engine.fast import jitcache  # noqa: E402

jitcache.refresh(__name__, outcomes)
