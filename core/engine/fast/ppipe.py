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
and this kernel reads as they are; (a) ``uplink_score`` is :func:`_probe`'s scored scan (``probe_scored``:
every stage's GPU found by ``earliestSlot``, every candidate tried); (b) ``head_drop`` and (e) ``fill_wait``
are the policy's branches of the same names in the loop.

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

from shepherd.core.engine.fast import timers
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

NEVER = np.int64(1) << 62
#: what the kernel returns as its error: none, a reservation overlapping another, a slot of zero length
E_OK, E_OVERLAP, E_EMPTY = range(3)
#: what Algorithm 1 does with the head of a queue: send a batch, wait (a timer is set), drop the head
SEND, WAIT, DROP = range(3)

#: the trace (arrival, deadline, model) and the recorder's request columns, written in place
Requests = namedtuple("Requests", "t d model start finish worker batch outcome")
#: the plan (:func:`pipes`): per model its pipelines ``mp_pipe[mp_off[m]:mp_off[m + 1]]``; per pipeline its
#: batch size and stages ``[st_off[p], st_off[p + 1])``; per stage its pool's candidates
#: ``cand[pool_off[s]:pool_off[s + 1]]`` (:data:`CAND`) and latency and inbound transfer per batch size
Pipes = namedtuple("Pipes", "mp_off mp_pipe p_batch st_off pool_off cand lat tin")
#: a pool's candidate: its vGPU, its server's downlink and uplink
CAND = np.dtype([("w", np.int64), ("down", np.int64), ("up", np.int64)])
#: per resource (vGPU, link) its reservations, sorted: ``IS``/``IE[r, res[r].ilo:res[r].ihi]`` (:data:`RES`)
Reservations = namedtuple("Reservations", "IS IE res")
#: per resource: its reservations' range in ``IS``/``IE``, its last end and the start of its final gap-free
#: block (one structured array: an inlined helper's named-tuple argument is reference-counted per array)
RES = np.dtype([("ilo", np.int64), ("ihi", np.int64), ("last_end", np.int64), ("busy_from", np.int64)])
#: per DNN (:data:`DNN`) and the requests of each in trace order, ``order[dnn[m].qh:dnn[m].qe]`` its queue;
#: the timers (:mod:`.timers`: time, set order, DNN)
Dnns = namedtuple("Dnns", "order dnn heap")
#: per DNN: its queue, the head admitted last (rule (b)), the moment it waits for and the batch it awaits
DNN = np.dtype([("qh", np.int64), ("qe", np.int64), ("admitted", np.int64), ("wait_until", np.int64),
                ("wait_need", np.int64)])
#: the policy's switches (``wait`` and the artifact rules (a), (b), (e))
Rules = namedtuple("Rules", "wait scored head_drop fill_wait")
#: the run's scalars: next arrival, timers (count, set order), batch rows, counters, and the error
RUN = np.dtype([("i", np.int64), ("nh", np.int64), ("seq", np.int64), ("nb", np.int64), ("probes", np.int64),
                ("dispatched", np.int64), ("err", np.int64), ("err_res", np.int64), ("err_start", np.int64),
                ("err_len", np.int64)])
#: a probed path, per stage: the vGPU, its start and time, the transfer in (uplink, downlink, start, time)
STAGE = np.dtype([("w", np.int64), ("start", np.int64), ("li", np.int64), ("up", np.int64), ("down", np.int64),
                  ("ts", np.int64), ("ln", np.int64)])
#: a batch row of the recorder (one per stage)
BATCH = np.dtype([("worker", np.int64), ("model", np.int64), ("size", np.int64), ("start", np.int64),
                  ("end", np.int64)])
#: scratch: two probed paths (:data:`STAGE`: the best so far and the next probe's) and the decision
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


@njit(cache=True)  # (a call, not inlined: inlined at its seven call sites the kernel took ~85 s to compile)
def _probe(pl, rv, rules, run, p, bs, now, buf):
    """Algorithm 2 ``probe(p, bs)`` at ``now`` (counted in ``run``), its path into ``buf``; (finish, wait).
    The plain scan in pool order (module docstring), stopping at a candidate that starts as early as any can;
    under rule (a), ``uplink_score`` (``reservations.probe_scored``), a candidate of a non-last stage is
    scored by the later of its finish and its server uplink's last reservation, and all are tried."""
    run[0].probes += 1
    s0 = pl.st_off[p]
    last_j = pl.st_off[p + 1] - s0 - 1
    tg, up, busy = now, -1, 0
    for j in range(last_j + 1):
        s = s0 + j
        li = pl.lat[s, bs]
        ln = pl.tin[s, bs] if j else 0
        busy += li + ln
        floor = tg + ln  # no GPU of the pool starts earlier
        up_busy = j > 0 and ln > 0 and rv.res[up].last_end > tg
        tu = _fit(rv, up, tg, ln) if up_busy else tg
        best, bw, bts, bstart = NEVER, -1, 0, 0
        for c in range(pl.pool_off[s], pl.pool_off[s + 1]):
            cd = pl.cand[c]
            ts = tg
            if j > 0 and ln > 0 and (up_busy or rv.res[cd.down].last_end > tg):
                ts = _link_slot(rv, up, cd.down, tu, ln)
            if j == 0 and not rules.scored:
                start = max(now, rv.res[cd.w].last_end)
            else:
                start = _fit(rv, cd.w, ts + ln, li)
            score = start + li
            if rules.scored and j < last_j and rv.res[cd.up].last_end > score:
                score = rv.res[cd.up].last_end
            if score < best:
                best, bw, bts, bstart = score, c, ts, start
                if start <= floor and not rules.scored:
                    break
        st, cd = buf[j], pl.cand[bw]
        st.w, st.start, st.li, st.up, st.down, st.ts, st.ln = cd.w, bstart, li, up, cd.down, bts, ln
        tg = bstart + li
        up = cd.up
    return tg, tg - now - busy


# ---------------------------------------------------------------------- Algorithm 1: schedule


@njit(cache=True, inline='always')
def _pick(pl, rv, sc, rules, run, m, now):
    """Step 1: the pipeline of DNN ``m`` with the least waiting time at its planned batch size (strictly less:
    ties to the first in plan order), its path in ``sc.bufs[dec.kb]``."""
    dc = sc.dec[0]
    p0, p1 = pl.mp_off[m], pl.mp_off[m + 1]
    best = pl.mp_pipe[p0]
    kb = 0
    finish, best_wait = _probe(pl, rv, rules, run, best, pl.p_batch[best], now, sc.bufs[0])
    for x in range(p0 + 1, p1):
        p = pl.mp_pipe[x]
        f, wt = _probe(pl, rv, rules, run, p, pl.p_batch[p], now, sc.bufs[1 - kb])
        if wt < best_wait:
            best_wait, best, finish, kb = wt, p, f, 1 - kb
    dc.best, dc.kb, dc.finish, dc.bs = best, kb, finish, pl.p_batch[best]


@njit(cache=True, inline='always')
def _largest_meeting(pl, rv, sc, rules, run, now, top, lowest, buf):
    """The largest batch size from ``top`` down to ``lowest`` whose path (probed into ``buf``) finishes by the
    head's deadline, and its finish; 0 and the last finish probed (the decision's if none) if there is none."""
    dc = sc.dec[0]
    finish = dc.finish
    for b in range(top, lowest - 1, -1):
        finish, _ = _probe(pl, rv, rules, run, dc.best, b, now, buf)
        if finish <= dc.deadline:
            return b, finish
    return 0, finish


@njit(cache=True, inline='always')
def _head_ok(pl, rv, sc, rules, run, now):
    """Rule (b): a new head is admitted only if a batch of round(0.95·bs) … bs meets its deadline."""
    dc = sc.dec[0]
    if dc.finish <= dc.deadline:
        return True
    planned = pl.p_batch[dc.best]
    lowest = max(1, int(0.95 * planned + 0.5))
    return _largest_meeting(pl, rv, sc, rules, run, now, planned - 1, lowest, sc.bufs[1 - dc.kb])[0] > 0


@njit(cache=True, inline='always')
def _meet_deadline(pl, rv, sc, rules, run, now):
    """Step 2: from the planned batch size down to 1, the first whose finish meets the head's deadline (its
    path in ``sc.bufs[dec.kb]``); 0 if none."""
    dc = sc.dec[0]
    if dc.finish > dc.deadline:
        dc.bs, dc.finish = _largest_meeting(pl, rv, sc, rules, run, now, pl.p_batch[dc.best] - 1, 1,
                                            sc.bufs[dc.kb])


@njit(cache=True, inline='always')
def _wait(dn, run, m, until, need):
    """DNN ``m`` waits until ``until`` for a batch of ``need`` (a timer then; the set order counts up)."""
    dn.dnn[m].wait_until, dn.dnn[m].wait_need = until, need
    rs = run[0]
    rs.seq += 1
    timers.push(dn.heap, rs.nh, until, rs.seq, m)
    rs.nh += 1
    return WAIT


@njit(cache=True, inline='always')
def _short_queue(pl, rv, dn, sc, rules, run, m, now, last_moment):
    """Fewer requests queued than the batch size: wait (rule (e): until a batch of queued + 1 misses the
    deadline even with no queueing; else till the last moment, when ``wait`` is on and there is slack and
    this is not that moment) or send what is queued (probed again at that size). SEND, WAIT or DROP."""
    dc = sc.dec[0]
    queued = dn.dnn[m].qe - dn.dnn[m].qh
    if rules.fill_wait and rules.wait:
        small, wait_small = _probe(pl, rv, rules, run, dc.best, queued + 1, now, sc.bufs[1 - dc.kb])
        if small > dc.deadline:
            return DROP
        return _wait(dn, run, m, dc.deadline - (small - now - wait_small) + 1, 0)  # every arrival re-decides
    slack = dc.deadline - dc.finish
    if rules.wait and slack > 0 and not last_moment:
        return _wait(dn, run, m, now + slack, dc.bs)
    dc.bs = queued  # the last moment: send what is queued
    dc.finish, _ = _probe(pl, rv, rules, run, dc.best, queued, now, sc.bufs[dc.kb])
    return DROP if dc.finish > dc.deadline else SEND  # (a smaller batch is never slower)


@njit(cache=True, inline='always')
def _decide(req, pl, rv, dn, sc, rules, run, m, now, last_moment):
    """Algorithm 1 for the head of DNN ``m``'s queue: SEND (``sc.dec`` holds the pipeline, the buffer with its
    path and the batch size), WAIT or DROP (the head)."""
    _pick(pl, rv, sc, rules, run, m, now)
    dc, q = sc.dec[0], dn.dnn[m]
    dc.head = dn.order[q.qh]
    dc.deadline = req.d[dc.head]
    if rules.head_drop and dc.head != q.admitted:
        if not _head_ok(pl, rv, sc, rules, run, now):
            return DROP
        q.admitted = dc.head
    _meet_deadline(pl, rv, sc, rules, run, now)
    if dc.bs == 0:
        return DROP
    if q.qe - q.qh < dc.bs:
        return _short_queue(pl, rv, dn, sc, rules, run, m, now, last_moment)
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
        if not _room(rv, buf[j].w, now, 3 * ns):
            grow = True
        if j and not (_room(rv, buf[j].up, now, 3 * ns) and _room(rv, buf[j].down, now, 3 * ns)):
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
        st = buf[j]
        if j:
            for r in (st.up, st.down):
                e = _reserve(rv, r, st.ts, st.ln)
                if e != E_OK:
                    return _fail(run, e, r, st.ts, st.ln)
        e = _reserve(rv, st.w, st.start, st.li)
        if e != E_OK:
            return _fail(run, e, st.w, st.start, st.li)
    return True


@njit(cache=True, inline='always')
def _record_path(req, dn, blog, w_busy, buf, ns, m, bs, now, run):
    """The recorder's record mode: a batch row per stage (each stage's time to its vGPU's busy time), the
    queue's first ``bs`` requests from the last stage; returns the log (grown when full)."""
    nb = run[0].nb
    if nb + ns > len(blog):
        grown = np.zeros(2 * len(blog) + ns, BATCH)
        grown[:nb] = blog[:nb]
        blog = grown
    for j in range(ns):
        st, row = buf[j], blog[nb]
        if st.start < now or st.li <= 0:
            _fail(run, E_EMPTY, st.w, st.start, st.li)
            return blog
        row.worker, row.model, row.size, row.start, row.end = st.w, m, bs, st.start, st.start + st.li
        w_busy[st.w] += st.li
        nb += 1
    run[0].nb = nb
    last = blog[nb - 1]
    for x in range(dn.dnn[m].qh, dn.dnn[m].qh + bs):
        r = dn.order[x]
        req.start[r], req.finish[r], req.worker[r], req.batch[r] = last.start, last.end, last.worker, nb - 1
        req.outcome[r] = SERVED if req.d[r] >= last.end else LATE
    return blog


# ---------------------------------------------------------------------- the loop


@njit(cache=True, inline='always')
def _schedule(req, pl, rv, dn, sc, rules, run, blog, w_busy, m, now, last_moment):
    """Algorithm 1 for DNN ``m`` at ``now`` until its queue is empty or it waits (a DNN without a pipeline
    drops what it queues); returns the reservations and the log (either may have grown)."""
    q = dn.dnn[m]
    if pl.mp_off[m] == pl.mp_off[m + 1]:
        for x in range(q.qh, q.qe):
            req.outcome[dn.order[x]] = DROPPED
        q.qh = q.qe
        return rv, blog
    while q.qe > q.qh:
        what = _decide(req, pl, rv, dn, sc, rules, run, m, now, last_moment)
        if what == WAIT:
            break
        dc = sc.dec[0]
        if what == DROP:
            req.outcome[dc.head] = DROPPED
            q.qh += 1
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
        q.qh += dc.bs
        q.wait_until = -1
        last_moment = False
    return rv, blog


@njit(cache=True, inline='always')
def _next_event(req, dn, rules, run):
    """The next event: a timer at or before the next arrival (timers first at equal times), else the arrival.
    (DNN, time, whether it is the last moment of its wait); DNN −1: nothing to decide, −2: the run is over."""
    rs = run[0]
    i, n = rs.i, len(req.t)
    if rs.nh > 0 and (i >= n or dn.heap[0, 0] <= req.t[i]):
        now, m = dn.heap[0, 0], dn.heap[2, 0]
        timers.pop(dn.heap, rs.nh)
        rs.nh -= 1
        q = dn.dnn[m]
        if q.wait_until != now:
            return -1, now, False  # stale: the DNN no longer waits for this moment
        q.wait_until = -1
        return m, now, not rules.fill_wait
    if i >= n:
        return -2, 0, False
    now, m = req.t[i], req.model[i]
    q = dn.dnn[m]
    q.qe += 1
    rs.i = i + 1
    if now < q.wait_until and q.qe - q.qh < q.wait_need:
        return -1, now, False  # it joins the queue of a DNN waiting for a larger batch
    return m, now, False


@njit(cache=True)
def run_ppipe(req, pl, dn, rules, run, n_res, n_gpus, max_stages):
    """The run (module docstring): fills the request columns; returns (batch log (:data:`BATCH`), w_busy).
    ``run`` holds the counters and the error (code, resource, start and length)."""
    room = 64  # reservations per resource at first (they grow: _make_room)
    rv = Reservations(np.zeros((n_res, room), np.int64), np.zeros((n_res, room), np.int64), np.zeros(n_res, RES))
    w_busy = np.zeros(n_gpus, np.int64)
    sc = Scratch(np.zeros((2, max_stages), STAGE), np.zeros(1, DECISION))
    blog = np.zeros(max(len(req.t), 16), BATCH)
    while run[0].err == E_OK:
        m, now, last_moment = _next_event(req, dn, rules, run)
        if m == -2:
            break
        if m >= 0:
            rv, blog = _schedule(req, pl, rv, dn, sc, rules, run, blog, w_busy, m, now, last_moment)
    for x in range(len(req.t)):
        if req.outcome[x] == 0:  # never served (PENDING)
            req.outcome[x] = DROPPED
    return blog[:run[0].nb].copy(), w_busy


def pipes(runtime_pipes: list, n_models: int, n_gpus: int) -> Pipes:
    """The kernel's plan from the runtime's pipelines (``PipeRuntime``, in plan order): per model its
    pipelines in that order; per pipeline its batch size and stages; per stage its pool's candidates
    (vGPU, its server's downlink, uplink: resources ``n_gpus + 2·node (+1)``, :mod:`~shepherd.core.pipelines.table`)
    and its latency and inbound transfer per batch size."""
    by_model: list[list[int]] = [[] for _ in range(n_models)]
    for i, p in enumerate(runtime_pipes):
        by_model[p.model].append(i)
    stages = [(p, j) for p in runtime_pipes for j in range(len(p.workers))]
    cand = np.array([(w, n_gpus + 2 * nd + 1, n_gpus + 2 * nd) for p, j in stages
                     for w, nd in zip(p.workers[j], p.nodes[j])], CAND)
    width = max([len(p.lat[j]) for p, j in stages], default=1)
    lat = np.zeros((max(len(stages), 1), width), np.int64)
    tin = np.zeros((max(len(stages), 1), width), np.int64)
    for s, (p, j) in enumerate(stages):
        if p.batch >= len(p.lat[j]):
            raise ValueError(f"pipeline of model {p.model}: batch size {p.batch} beyond its profiled "
                             f"{len(p.lat[j]) - 1}")
        lat[s, :len(p.lat[j])] = p.lat[j]
        tin[s, :len(p.transfer_in[j])] = p.transfer_in[j]
    return Pipes(_offsets([len(x) for x in by_model]), np.array([i for x in by_model for i in x], np.int64),
                 np.array([p.batch for p in runtime_pipes], np.int64),
                 _offsets([len(p.workers) for p in runtime_pipes]), _offsets([len(p.workers[j]) for p, j in stages]),
                 cand, lat, tin)


def _offsets(counts: list[int]) -> np.ndarray:
    """``[0, c0, c0 + c1, …]``: where each of consecutive runs of these lengths starts, and the end."""
    off = np.zeros(len(counts) + 1, np.int64)
    off[1:] = np.cumsum(counts)
    return off


def run_group(engine, config, runtime) -> dict:
    """The run of the one serving group (the ``engine`` mode of :mod:`.`): the kernel over the whole trace, writing the
    recorder's columns; returns the policy's counters."""
    rec = engine.rec
    tables = runtime.tables
    n_gpus = len(engine.res.w_hw)
    n_models = int(engine.model.max()) + 1 if len(engine.model) else 0
    n_models = max(n_models, max((p.model + 1 for p in tables["pipelines"]), default=0))
    pl = pipes(list(tables["pipelines"]), n_models, n_gpus)
    t, d, m = (np.require(col, np.int64, ["C", "W"]) for col in (engine.arrival, engine.deadline, engine.model))
    dnn = np.zeros(n_models, DNN)
    dnn["qh"] = dnn["qe"] = _offsets(np.bincount(m, minlength=n_models))[:-1]
    dnn["admitted"] = dnn["wait_until"] = -1
    dn = Dnns(np.argsort(m, kind="stable").astype(np.int64),  # each model's requests in trace order
              dnn, np.zeros((3, 2 * len(t) + 16), np.int64))
    req = Requests(t, d, m, rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome)
    rules = Rules(bool(config.wait), bool(config.uplink_score), bool(config.head_drop), bool(config.fill_wait))
    run = np.zeros(1, RUN)
    max_stages = int(np.diff(pl.st_off).max(initial=1))
    blog, w_busy = run_ppipe(req, pl, dn, rules, run, n_gpus + 2 * max(tables["nodes"], 1), n_gpus, max_stages)
    err = run[0]
    slot = f"[{err['err_start']}, {err['err_start'] + err['err_len']})"
    if err["err"] == E_OVERLAP:  # pragma: no cover - the reference's Reservations.reserve refuses it so
        raise RuntimeError(f"resource {err['err_res']}: {slot} overlaps a reservation")
    if err["err"] == E_EMPTY:  # pragma: no cover - the reference's Recorder.record_path refuses it so
        raise RuntimeError(f"worker {err['err_res']}: cannot book {slot} at the decision")
    rec.set_batches(*(np.ascontiguousarray(blog[f]) for f in BATCH.names), np.zeros(len(blog), np.int64))
    rec.w_busy[:] = w_busy.tolist()
    return {"probes": int(err["probes"]), "dispatched": int(err["dispatched"])}


from shepherd.core.engine import outcomes  # noqa: E402  (keys this module's JIT cache)
from shepherd.core.engine.fast import jitcache  # noqa: E402

jitcache.refresh(__name__, timers, outcomes)
