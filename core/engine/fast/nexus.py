"""Nexus's compiled fast path (Shepherd §7, Symphony §2.2 / §3.3, Nexus §6.1): one serving group's reference
run, over arrays.

Same outcomes as ``core/policies/nexus.py`` on the reference engine — per request outcome, worker, batch,
start and finish, per batch every column, per worker busy time, the shed requests
(``tests/test_engine_fast_nexus.py``) — for any ``epoch_s``, ``peak_window_s``, ``provision``,
``frontends`` (K ≥ 1) and ``spare``, overhead mode ``model`` or ``none``, any hardware mix in the group
(plans and drops on the group's first worker's table, as the policy does; a batch runs for its own
worker's ℓ(b)), one serving group (``why_not`` in :mod:`shepherd.core.engine.fast`).

**Nothing is drawn or planned here.** The policy object, built as the reference builds it, holds the group's
:class:`~shepherd.core.policies.nexus_schedule.NexusSchedule` — every request's session, admission coin and
frontend, and every epoch's plan laid out with its routers' phases — made before the run from the group's
own seed; :func:`plans` flattens the epochs into a :data:`Plans` record, and the kernel reads that and the
per-request arrays.

**The kernel** re-enacts the rest, per request:

* the clock (:mod:`..clock`): at equal times completions (in batch order), then timers (in the order they
  were set: the epoch timer, and per worker the end of its duty cycle — the policy never cancels one, a
  stale one still fires and re-dispatches an idle worker), then arrivals (in trace order); the first
  epoch's configuration is the policy's ``on_start`` (a timer at 0 set first, which is the same order);
* the policy (whose docstring gives the reasons): the admission coin against the epoch's factor s, the
  session's token bucket, the request's frontend's smooth weighted round-robin (each router set to its
  phase at every configuration), the per-slot FIFO queues, a backend's round-robin over its slots within
  its duty cycle (heads that cannot finish in the batch dropped, each slot at most once per cycle, a wake-up
  at the cycle's end), and at an epoch boundary the queued requests re-routed in (deadline, id) order or
  dropped, then the idle workers dispatched lowest first;
* the scheduler clock and admission control, the batch log, the completion order: :mod:`.common`.

State travels in named records (:data:`Requests`, :data:`Plans`, :data:`Workers`, :data:`Slots`,
:data:`Routers`, :data:`Sched`, :data:`Tables`, the run's scalars in one structured record :data:`RUN`);
every helper is inlined into the loop (``inline='always'``), so handing it a record costs no call.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Callable

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (B_COLS, INF, NONE, S_SHED, arrive, at_chunk_end, decide, finish,
                                              log_batch, next_completion, ready_us, shed_arrival)
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

#: the group's requests (arrival, deadline, session, coin, frontend; the recorder's columns written in place)
Requests = namedtuple("Requests", "t d sess coin front start finish worker batch outcome shed")
#: every epoch's plan, flattened (:func:`plans`): per epoch and worker its duty cycle and slots
#: ``[sb, sb + ns)``; per epoch its factor s; per epoch and session whether it is planned, its bucket's rate
#: and depth, its allocations ``[eb, eb + ne)`` and their total weight; per allocation (unique over the run)
#: its slot, worker, weight and, per frontend, router phase; per slot its batch cap and model
Plans = namedtuple("Plans", "duty sb ns scale planned rate depth eb ne total ent_slot ent_worker ent_w phase "
                            "cap model")
#: per worker: its plan now (duty, sb, ns), its duty cycle (round-robin position, cycle end, slots served,
#: pending wake-up), idle, and its running batch (free since, start, end, batch id) and busy time
Workers = namedtuple("Workers", "duty sb ns rr cyc nserved wake idle free start end bid busy")
#: per slot a FIFO of requests linked by ``nxt`` (per request), and whether it ran in the current cycle
Slots = namedtuple("Slots", "head tail length served nxt")
#: per frontend and allocation the round-robin's current value; per session its token bucket
Routers = namedtuple("Routers", "cur tokens last")
#: the scheduler's costs (:mod:`.common`)
Sched = namedtuple("Sched", "decision_ns per_request_ns arrival_ns active admit_on max_lag_ns chunk")
#: latency tables: per hardware (``lat``), the planning worker's (``lat0``); each worker's hardware
Tables = namedtuple("Tables", "lat lat0 w_hw")
#: the run's scalars: the epoch now, its factor s, the next arrival, batches logged, timers (count, set order)
RUN = np.dtype([("epoch", np.int64), ("scale", np.float64), ("i", np.int64), ("nb", np.int64),
                ("hsize", np.int64), ("hseq", np.int64)])


# ---------------------------------------------------------------------- timers: (at, set order, payload)


@njit(cache=True)
def t_push(h, size, at, seq, payload):
    """Push a timer onto the heap ``h`` (rows: time, set order, payload; it doubles when full); returns it."""
    if size == h.shape[1]:
        grown = np.empty((3, 2 * size + 8), np.int64)
        grown[:, :size] = h[:, :size]
        h = grown
    i = size
    h[0, i], h[1, i], h[2, i] = at, seq, payload
    while i > 0:
        p = (i - 1) // 2
        if h[0, i] < h[0, p] or (h[0, i] == h[0, p] and h[1, i] < h[1, p]):
            for c in range(3):
                h[c, i], h[c, p] = h[c, p], h[c, i]
            i = p
        else:
            break
    return h


@njit(cache=True)
def t_pop(h, size):
    """Remove the earliest timer (``h[:, 0]``, read it first) from a heap of ``size``."""
    size -= 1
    for c in range(3):
        h[c, 0] = h[c, size]
    i = 0
    while True:
        lft, rgt, m = 2 * i + 1, 2 * i + 2, i
        if lft < size and (h[0, lft] < h[0, m] or (h[0, lft] == h[0, m] and h[1, lft] < h[1, m])):
            m = lft
        if rgt < size and (h[0, rgt] < h[0, m] or (h[0, rgt] == h[0, m] and h[1, rgt] < h[1, m])):
            m = rgt
        if m == i:
            break
        for c in range(3):
            h[c, i], h[c, m] = h[c, m], h[c, i]
        i = m


@njit(cache=True, inline='always')
def _set_timer(heap, run, at, payload):
    """``act.set_timer``: push (the set order counts up); returns the heap."""
    rs = run[0]
    rs.hseq += 1
    heap = t_push(heap, rs.hsize, at, rs.hseq, payload)
    rs.hsize += 1
    return heap


# ---------------------------------------------------------------------- the policy's steps


@njit(cache=True, inline='always')
def _enqueue(sl, slot, r):
    """Append request ``r`` to ``slot``'s FIFO."""
    sl.nxt[r] = -1
    if sl.length[slot] == 0:
        sl.head[slot] = r
    else:
        sl.nxt[sl.tail[slot]] = r
    sl.tail[slot] = r
    sl.length[slot] += 1


@njit(cache=True, inline='always')
def _route(plan, rt, e, s, f):
    """``Nexus._enqueue``'s pick: among session ``s``'s allocations, the one frontend ``f``'s smooth weighted
    round-robin picks (``SmoothWeightedRoundRobin.pick``: add every weight, take the first maximum, subtract
    the total)."""
    x, nx = plan.eb[e, s], plan.ne[e, s]
    if nx == 1:
        return x
    best = x
    cur = rt.cur
    for y in range(x, x + nx):
        cur[f, y] += plan.ent_w[y]
        if cur[f, y] > cur[f, best]:
            best = y
    cur[f, best] -= plan.total[e, s]
    return best


@njit(cache=True, inline='always')
def _queued(req, wk, sl, qbuf):
    """Every request queued under the current plan, in (deadline, id) order."""
    nq = 0
    for w in range(len(wk.ns)):
        for slot in range(wk.sb[w], wk.sb[w] + wk.ns[w]):
            r = sl.head[slot]
            for _ in range(sl.length[slot]):
                qbuf[nq] = r
                nq += 1
                r = sl.nxt[r]
    queued = np.sort(qbuf[:nq])
    return queued[np.argsort(req.d[queued], kind="mergesort")]


@njit(cache=True, inline='always')
def _configure(req, plan, wk, sl, rt, run, e, now, qbuf):
    """``Nexus._configure``: epoch ``e``'s plan on the workers, fresh buckets and routers (each at its phase),
    the queued requests re-routed or dropped."""
    queued = _queued(req, wk, sl, qbuf)
    run[0].epoch = e
    run[0].scale = plan.scale[e]
    for w in range(len(wk.ns)):
        wk.sb[w], wk.ns[w], wk.duty[w] = plan.sb[e, w], plan.ns[e, w], plan.duty[e, w]
        wk.rr[w], wk.cyc[w], wk.nserved[w] = 0, 0, 0
    for s in range(plan.planned.shape[1]):
        if plan.planned[e, s]:
            rt.tokens[s] = plan.depth[e, s]
            rt.last[s] = now
            for x in range(plan.eb[e, s], plan.eb[e, s] + plan.ne[e, s]):
                for f in range(rt.cur.shape[0]):
                    rt.cur[f, x] = plan.ent_w[x] * plan.ne[e, s] * plan.phase[f, x]
    for r in queued:
        s = req.sess[r]
        if plan.planned[e, s]:
            _enqueue(sl, plan.ent_slot[_route(plan, rt, e, s, req.front[r])], r)
        else:
            req.outcome[r] = DROPPED


@njit(cache=True, inline='always')
def _admit(req, plan, sl, rt, run, r, now):
    """``Nexus.on_arrival`` for request ``r``: the coin, the session's token bucket, the frontend's round-robin;
    the worker of the allocation it joins, or −1 (dropped)."""
    e = run[0].epoch
    s = req.sess[r]
    if not plan.planned[e, s] or req.coin[r] >= run[0].scale:
        req.outcome[r] = DROPPED
        return -1
    tokens = rt.tokens[s] + (now - rt.last[s]) * plan.rate[e, s]
    depth = plan.depth[e, s]
    rt.tokens[s] = tokens if tokens < depth else depth
    rt.last[s] = now
    if rt.tokens[s] < 1.0:
        req.outcome[r] = DROPPED
        return -1
    rt.tokens[s] -= 1.0
    x = _route(plan, rt, e, s, req.front[r])
    _enqueue(sl, plan.ent_slot[x], r)
    return plan.ent_worker[x]


@njit(cache=True, inline='always')
def _batch_size(req, plan, sl, lat0, slot, ready):
    """Drop the heads of ``slot`` that would miss their deadline in its batch (at most its cap, ready at
    ``ready``); the batch size then (0: the slot is empty)."""
    cap, m = plan.cap[slot], plan.model[slot]
    while sl.length[slot] > 0:
        h = sl.head[slot]
        if req.d[h] >= ready + lat0[m, cap if cap < sl.length[slot] else sl.length[slot]]:
            break
        req.outcome[h] = DROPPED
        sl.head[slot] = sl.nxt[h]
        sl.length[slot] -= 1
    return cap if cap < sl.length[slot] else sl.length[slot]


@njit(cache=True, inline='always')
def _start(req, wk, tb, sc, s, run, blog, k, m, b, now, unit):
    """Start a batch of ``b`` of model ``m`` on worker ``k``: its start (the worker free, the decision
    issued) and end on the worker, the batch logged as ``run``'s next; returns the log."""
    start = wk.free[k]
    if sc.active:
        disp = decide(s, req.t, req.shed, run[0].i, now, sc.decision_ns + sc.per_request_ns * b, sc.arrival_ns)
        start = start if start > disp else disp
    elif start < now:
        start = now
    end = start + tb.lat[tb.w_hw[k], m, b]
    nb = run[0].nb
    wk.bid[k], wk.start[k], wk.end[k] = nb, start, end
    run[0].nb = nb + 1
    return log_batch(blog, nb, k, m, b, start, end, unit[0], unit[1])


@njit(cache=True, inline='always')
def _serve(req, wk, sl, k, slot, b):
    """The first ``b`` requests of ``slot`` go in worker ``k``'s batch just started: their columns."""
    start, end, nb = wk.start[k], wk.end[k], wk.bid[k]
    r = sl.head[slot]
    for _ in range(b):
        req.start[r], req.finish[r], req.worker[r], req.batch[r] = start, end, k, nb
        req.outcome[r] = SERVED if req.d[r] >= end else LATE
        r = sl.nxt[r]
    sl.head[slot] = r
    sl.length[slot] -= b


@njit(cache=True, inline='always')
def _dispatch(req, plan, wk, sl, tb, sc, s, run, blog, k, now, unit):
    """``Nexus._dispatch`` on worker ``k``: the next slot of its duty cycle with requests (heads that cannot
    finish dropped first) started; or idling, with a wake-up at the cycle's end if it served a slot in the
    cycle (-1 − k as the timer's payload, the cycle's end as ``wk.wake``). Returns the log."""
    ready = ready_us(s, req.t, req.shed, run[0].i, now, sc.active, sc.decision_ns, sc.arrival_ns)
    b0, nsl = wk.sb[k], wk.ns[k]
    if now >= wk.cyc[k]:
        wk.cyc[k] = now + wk.duty[k]
        sl.served[b0:b0 + nsl] = False
        wk.nserved[k] = 0
    for step in range(nsl):
        j = wk.rr[k] + step
        j = j - nsl if j >= nsl else j
        slot = b0 + j
        if sl.served[slot]:
            continue
        b = _batch_size(req, plan, sl, tb.lat0, slot, ready)
        if b == 0:
            continue
        blog = _start(req, wk, tb, sc, s, run, blog, k, plan.model[slot], b, now, unit)
        _serve(req, wk, sl, k, slot, b)
        sl.served[slot] = True
        wk.nserved[k] += 1
        wk.rr[k] = j + 1 if j + 1 < nsl else 0
        wk.idle[k] = False
        return blog
    wk.idle[k] = True
    return blog


@njit(cache=True, inline='always')
def _wake_at(wk, k, now):
    """After an idle dispatch: the time of worker ``k``'s wake-up to set (its cycle's end), or −1."""
    if wk.idle[k] and wk.nserved[k] > 0 and wk.wake[k] != wk.cyc[k] and wk.cyc[k] > now:
        wk.wake[k] = wk.cyc[k]
        return wk.cyc[k]
    return -1


@njit(cache=True, inline='always')
def _complete(wk, k, now):
    """``Nexus.on_completion``'s bookkeeping: worker ``k``'s batch ends at ``now``."""
    wk.busy[k] += now - wk.start[k]
    uk = wk.bid[k]
    wk.bid[k] = NONE
    wk.free[k] = now
    return uk


@njit(cache=True, inline='always')
def _on_timer(req, plan, wk, sl, rt, run, p, now, qbuf, dq):
    """``Nexus.on_timer``: a worker's cycle end (payload −1 − k: dispatch it if idle) or epoch ``p``'s
    configuration (then every idle worker, lowest first). Fills ``dq`` with the workers to dispatch; their
    number."""
    if p < 0:
        w = -p - 1
        if wk.wake[w] == now:
            wk.wake[w] = -1
        dq[0] = w
        return 1 if wk.idle[w] else 0
    _configure(req, plan, wk, sl, rt, run, p, now, qbuf)
    nd = 0
    for w in range(len(wk.idle)):
        if wk.idle[w]:
            dq[nd] = w
            nd += 1
    return nd


@njit(cache=True)
def run_nexus(req, plan, wk, sl, rt, tb, sc, run, epoch_us, last_epoch):
    """One group's Nexus run over the whole trace; writes the request columns in place and returns (batch log,
    w_busy, w_waste, shed count). Each event names the workers to dispatch, which the loop then does in order:
    a completion its worker, a wake-up its worker if idle, an arrival its allocation's worker if idle, an
    epoch every idle worker, lowest first."""
    n = len(req.t)
    dq = np.empty(len(wk.idle), np.int64)  # the workers an event dispatches, in order
    qbuf = np.empty(n, np.int64)
    s = np.zeros(4, np.int64)  # the scheduler clock (.common)
    blog = np.empty((B_COLS, 1024), np.int64)
    heap = _set_timer(np.empty((3, 4 * len(wk.idle) + 8), np.int64), run, 0, 0)  # on_start: epoch 0 first
    rs = run[0]
    k, dirty = -1, True
    while True:
        if dirty:
            k, dirty = next_completion(wk.bid, wk.end), False
        ce = wk.end[k] if k >= 0 else INF
        te = heap[0, 0] if rs.hsize > 0 else INF
        i = rs.i
        ta = req.t[i] if i < n else INF
        nd, arriving, next_epoch = 0, False, -1
        if k >= 0 and ce <= te and ce <= ta:  # a completion
            now, ua, uk = ce, 0, _complete(wk, k, ce)
            dq[0], nd, dirty = k, 1, True
        elif rs.hsize > 0 and te <= ta:  # a timer
            now, ua, uk, p = te, 3, te, heap[2, 0]
            t_pop(heap, rs.hsize)
            rs.hsize -= 1
            nd = _on_timer(req, plan, wk, sl, rt, run, p, now, qbuf, dq)
            if 0 <= p < last_epoch:
                next_epoch = p + 1
        elif i < n:  # an arrival
            now = ta
            if not arrive(s, now, sc.admit_on, sc.arrival_ns, sc.max_lag_ns):
                rs.i = shed_arrival(s, req.shed, req.outcome, i, 0, sc.chunk, n, sc.arrival_ns, DROPPED)
                continue
            ua, uk, arriving = 1, now, True
            rs.i = i + 1
            w = _admit(req, plan, sl, rt, run, i, now)
            if w >= 0 and wk.idle[w]:
                dq[0], nd = w, 1
        else:
            break
        for q in range(nd):
            kk = dq[q]
            blog = _dispatch(req, plan, wk, sl, tb, sc, s, run, blog, kk, now, (ua, uk))
            dirty = dirty or not wk.idle[kk]
            wake = _wake_at(wk, kk, now)
            if wake >= 0:
                heap = _set_timer(heap, run, wake, -kk - 1)
        if next_epoch >= 0:
            heap = _set_timer(heap, run, next_epoch * epoch_us, next_epoch)
        if arriving:
            at_chunk_end(s, rs.i, 0, sc.chunk, n, sc.arrival_ns)
    finish(req.outcome, DROPPED)
    return blog[:, :rs.nb].copy(), wk.busy, np.zeros(len(wk.idle), np.int64), s[S_SHED]


# ---------------------------------------------------------------------- the schedule, flattened


def _epoch_arrays(schedule: Any, n_workers: int, n_sess: int) -> dict[str, np.ndarray]:
    """The per-epoch fields of :data:`Plans` (zeros), sized for ``schedule``'s epochs."""
    n_e = len(schedule.epochs)
    out = {name: np.zeros((n_e, n_workers), np.int64) for name in ("duty", "sb", "ns")}
    out.update({name: np.zeros((n_e, n_sess), np.int64) for name in ("eb", "ne")})
    out.update({name: np.zeros((n_e, n_sess), np.float64) for name in ("rate", "depth", "total")})
    out["planned"] = np.zeros((n_e, n_sess), np.bool_)
    out["scale"] = np.array([ep.scale for ep in schedule.epochs], np.float64)
    return out


def plans(schedule: Any, session_model: dict[int, int], n_workers: int) -> tuple:
    """The group's :class:`~shepherd.core.policies.nexus_schedule.NexusSchedule` flattened into a
    :data:`Plans` record. Slots and allocations get ids unique over the run (an epoch's are fresh)."""
    a = _epoch_arrays(schedule, n_workers, len(session_model))
    cap, model, ent_slot, ent_worker, ent_w, phase = [], [], [], [], [], []
    for e, ep in enumerate(schedule.epochs):
        a["duty"][e] = ep.duty
        for w in range(n_workers):
            a["sb"][e, w], a["ns"][e, w] = len(cap), len(ep.slots[w])
            cap += [b for _s, b in ep.slots[w]]
            model += [session_model[s] for s, _b in ep.slots[w]]
        for s, tg in ep.targets.items():
            a["eb"][e, s], a["ne"][e, s] = len(ent_slot), len(tg)
            ent_slot += [int(a["sb"][e, w]) + j for w, j in tg]
            ent_worker += [w for w, _j in tg]
            ent_w += ep.weights[s]
            total = 0.0
            for weight in ep.weights[s]:  # SmoothWeightedRoundRobin.total: summed in entry order
                total += weight
            a["total"][e, s] = total
            a["planned"][e, s] = True
            a["rate"][e, s], a["depth"][e, s] = ep.rates[s]
        phase.append(ep.phase)
    return Plans(**a, ent_slot=np.array(ent_slot, np.int64), ent_worker=np.array(ent_worker, np.int64),
                 ent_w=np.array(ent_w, np.float64), phase=np.ascontiguousarray(np.concatenate(phase, axis=1)),
                 cap=np.array(cap, np.int64), model=np.array(model, np.int64))


def _state(n: int, n_workers: int, plan: tuple, n_sess: int) -> tuple:
    """The kernel's fresh state: :data:`Workers`, :data:`Slots`, :data:`Routers`, the run record."""
    def z(size, dtype=np.int64):
        return np.zeros(size, dtype)

    wk = Workers(z(n_workers), z(n_workers), z(n_workers), z(n_workers), z(n_workers), z(n_workers),
                 np.full(n_workers, -1, np.int64), np.ones(n_workers, np.bool_), z(n_workers), z(n_workers),
                 z(n_workers), np.full(n_workers, NONE, np.int64), z(n_workers))
    n_slots = len(plan.cap)
    sl = Slots(np.full(n_slots, -1, np.int64), np.full(n_slots, -1, np.int64), z(n_slots), z(n_slots, np.bool_),
               np.empty(n, np.int64))
    rt = Routers(np.zeros(plan.phase.shape, np.float64), z(n_sess, np.float64), z(n_sess))
    run = np.zeros(1, RUN)
    run[0]["epoch"] = -1
    return wk, sl, rt, run


def run_group(make_policy: Callable[[], Any], config: Any, common: tuple, lat: np.ndarray, w_hw: np.ndarray,
              t: np.ndarray, d: np.ndarray, out: tuple) -> tuple:
    """One group's run: the policy object built as the reference builds it (its schedule: the draws and the
    plans), the schedule flattened (:func:`plans`), then the kernel; returns (batch log, w_busy, w_waste,
    shed count, the policy's counters — Nexus keeps none)."""
    pol = make_policy()
    sch = pol.schedule
    n_sess = len(pol.stream_model)
    plan = plans(sch, pol.stream_model, len(pol.workers))
    r_start, r_finish, r_worker, r_batch, r_outcome, _, shed = out
    req = Requests(t, d, np.ascontiguousarray(sch.session, dtype=np.int64), np.ascontiguousarray(sch.coin),
                   np.ascontiguousarray(sch.frontend, dtype=np.int64), r_start, r_finish, r_worker, r_batch,
                   r_outcome, shed)
    wk, sl, rt, run = _state(len(t), len(w_hw), plan, n_sess)
    tb = Tables(lat, np.ascontiguousarray(lat[pol.hw]), w_hw)
    blog, w_busy, w_waste, n_shed = run_nexus(req, plan, wk, sl, rt, tb, Sched(*common), run, pol.epoch_us,
                                              pol.last_epoch)
    return blog, w_busy, w_waste, n_shed, {}

from shepherd.core.engine import outcomes  # noqa: E402  (with common.py, keys this module's JIT cache)
from shepherd.core.engine.fast import common as fast_common, jitcache  # noqa: E402

jitcache.refresh(__name__, fast_common, outcomes)
