"""Nexus's compiled fast path (Shepherd §7, Symphony §2.2 / §3.3, Nexus §6.1): one serving group's run, over
arrays, with the reference engine's tables for ``core/policies/nexus.py`` (``tests/test_engine_fast_nexus.py``).

* Coverage: one serving group, overhead mode ``model`` or ``none``, any option and hardware mix; the rest runs
  on the reference (``Nexus.fast_path``'s ``covers``).
* Nothing is drawn or planned here: :func:`plans` flattens the policy object's schedule (built as the reference
  builds it: :class:`~shepherd.core.policies.nexus_schedule.NexusSchedule`).
* Admission, the token bucket, the frontends' router and its start, the re-routing order, the duty cycle's slot
  order and wake-up and the slot's head drop are the policy's own rules (:mod:`shepherd.core.rules.nexus`),
  compiled here.
* Each helper mirrors the policy method it names, whose docstring gives the rules; the loop keeps the clock's
  order (:mod:`..clock`: completions in batch order, then timers in the order set — ``on_start`` is a timer at
  0, set first — then arrivals); the scheduler clock, admission control and batch log are :mod:`.common`'s.
* Helpers are inlined into the loop, and an inlined helper's record arguments are reference-counted per array:
  hence per-index state in structured arrays (named tuples of ~40 arrays made the kernel ~5× slower).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Callable

import numpy as np
from numba import njit

from shepherd.core.engine.fast import timers
from shepherd.core.engine.fast.common import (B_COLS, INF, NONE, S_SHED, Sched, arrive, chunk_end, compiled, decide,
                                              finish, first_chunk_end, log_batch, next_completion, ready_us,
                                              record, shed_request)
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED
from shepherd.core.rules import nexus as rules

#: the policy's own rules (:mod:`shepherd.core.rules.nexus`), compiled here
(_admits, _take_token, _router_start, _reroute_order, _swrr_pick, _head_misses, _cycle_over, _cycle_slot,
 _cycle_wake) = compiled(rules.admits, rules.take_token, rules.router_start, rules.reroute_order, rules.swrr_pick,
                         rules.head_misses, rules.cycle_over, rules.cycle_slot, rules.cycle_wake)

#: the group's requests: the recorder's arrival, deadline, shed and outcome columns (written in place) and ``rq``
Requests = namedtuple("Requests", "t d shed outcome rq")
#: per request: session, frontend, admission coin, the next request in its slot's FIFO, and the recorder's
#: start, finish, worker and batch (copied from and to its columns around the run)
REQUEST = record("sess front coin nxt start finish worker batch", coin=np.float32)
#: every epoch's plan, flattened: ``ew[e, w]``, ``es[e, s]``, ``ent[x]`` (and its weight ``wt[x]``), ``slot[j]``,
#: ``scale[e]``, ``phase[f, x]``
Plans = namedtuple("Plans", "ew es ent wt slot scale phase")
#: per epoch and worker: its duty cycle and slots ``[sb, sb + ns)``
EPOCH_WORKER = record("duty sb ns")
#: per epoch and session: planned, its bucket (rate, depth), its allocations ``[eb, eb + ne)``, their total weight
EPOCH_SESSION = record("planned rate depth eb ne total", planned=np.bool_, rate=np.float64, depth=np.float64,
                       total=np.float64)
#: per allocation: its slot, worker and weight
ENTRY = record("slot worker w", w=np.float64)
#: per slot: its batch cap and model
SLOT = record("cap model")
#: per worker: its plan now (duty, sb, ns), its duty cycle (round-robin position, end, slots served, pending
#: wake-up), idle, its running batch (free since, start, end, id), busy time
WORKER = record("duty sb ns rr cyc nserved wake idle free start end bid busy", idle=np.bool_)
#: per slot: its FIFO (head, tail and length of a :data:`REQUEST` ``nxt`` chain), whether it ran this cycle
QUEUE = record("head tail length served", served=np.bool_)
#: per session: its token bucket (tokens, last refill)
BUCKET = record("tokens last", tokens=np.float64)
#: per frontend and allocation its router's current value; per session its bucket
Routers = namedtuple("Routers", "cur bucket")
#: ``lat[hw, model, b]`` (a batch's run on its worker), ``lat0`` of the first worker's ``hw`` (plans, drops), ``w_hw``
Tables = namedtuple("Tables", "lat lat0 w_hw")
#: the run's scalars: the epoch now, the next arrival, batches logged, timers (count, set order)
RUN = record("epoch i nb hsize hseq")


# ---------------------------------------------------------------------- the policy's steps


@njit(cache=True, inline='always')
def _set_timer(heap, run, at, payload):
    """``act.set_timer``: push (the set order counts up; the heap doubles when full); returns the heap."""
    rs = run[0]
    if rs.hsize == heap.shape[1]:
        heap = np.concatenate((heap, np.empty((3, rs.hsize + 8), np.int64)), axis=1)
    rs.hseq += 1
    timers.push(heap, rs.hsize, at, rs.hseq, payload)
    rs.hsize += 1
    return heap


@njit(cache=True, inline='always')
def _enqueue(req, plan, sl, rt, es, r):
    """``Nexus._enqueue``: request ``r`` appended to the FIFO of the allocation of its session (record ``es``)
    that its frontend's router picks (``SmoothWeightedRoundRobin.pick``); returns that allocation's worker."""
    rq = req.rq
    best = es.eb if es.ne == 1 else _swrr_pick(rt.cur[rq[r].front], plan.wt, es.eb, es.eb + es.ne, es.total)
    q = sl[plan.ent[best].slot]
    if q.length == 0:
        q.head = r
    else:
        rq[q.tail].nxt = r
    q.tail = r
    q.length += 1
    return plan.ent[best].worker


@njit(cache=True, inline='always')
def _configure(req, plan, wk, sl, rt, run, e, now, qbuf, dq):
    """``Nexus._configure`` of epoch ``e``; its dispatches are the idle workers, put in ``dq``: returns how many."""
    nq = 0
    for w in range(len(wk)):  # the requests queued under the plan so far, re-routed in (deadline, id) order
        for j in range(wk[w].sb, wk[w].sb + wk[w].ns):
            r = sl[j].head
            for _ in range(sl[j].length):
                qbuf[nq] = r
                nq += 1
                r = req.rq[r].nxt
    queued = qbuf[:nq]
    queued = queued[_reroute_order(req.d[queued], queued)]
    run[0].epoch = e
    for w in range(len(wk)):
        ew, x = plan.ew[e, w], wk[w]
        x.sb, x.ns, x.duty = ew.sb, ew.ns, ew.duty
        x.rr, x.cyc, x.nserved = 0, 0, 0
    for s in range(plan.es.shape[1]):
        es = plan.es[e, s]
        if es.planned:
            rt.bucket[s].tokens = es.depth
            rt.bucket[s].last = now
            for x in range(es.eb, es.eb + es.ne):
                for f in range(rt.cur.shape[0]):
                    rt.cur[f, x] = _router_start(plan.ent[x].w, es.ne, plan.phase[f, x])
    for r in queued:
        s = req.rq[r].sess
        if plan.es[e, s].planned:
            _enqueue(req, plan, sl, rt, plan.es[e, s], r)
        else:
            req.outcome[r] = DROPPED
    nd = 0
    for w in range(len(wk)):
        if wk[w].idle:
            dq[nd] = w
            nd += 1
    return nd


@njit(cache=True, inline='always')
def _admit(req, plan, sl, rt, run, r, now):
    """``Nexus.on_arrival`` / ``_admit`` of request ``r`` up to its dispatch: its worker, or −1 (dropped)."""
    e, s = run[0].epoch, req.rq[r].sess
    es = plan.es[e, s]
    if _admits(es.planned, req.rq[r].coin, plan.scale[e]):
        bk = rt.bucket[s]
        ok, bk.tokens = _take_token(bk.tokens, bk.last, es.rate, es.depth, now)
        bk.last = now
        if ok:
            return _enqueue(req, plan, sl, rt, es, r)
    req.outcome[r] = DROPPED
    return -1


@njit(cache=True, inline='always')
def _batch_size(req, q, lat0, cap, m, ready):
    """Drop the heads of slot ``q`` that would miss their deadline in its batch; that batch's size (0: none)."""
    while q.length > 0 and _head_misses(req.d[q.head], ready, lat0[m], cap, q.length):
        req.outcome[q.head] = DROPPED
        q.head = req.rq[q.head].nxt
        q.length -= 1
    return min(cap, q.length)


@njit(cache=True, inline='always')
def _start(req, x, q, tb, sc, s, run, blog, k, m, b, now):
    """``act.start``: the first ``b`` requests of slot ``q`` (model ``m``) on worker ``k`` (``x``); returns the log."""
    issued = now
    if sc.active:
        issued = decide(s, req.t, req.shed, run[0].i, now, sc.decision_ns + sc.per_request_ns * b, sc.arrival_ns)
    start = max(x.free, issued)
    end = start + tb.lat[tb.w_hw[k], m, b]
    nb = run[0].nb
    x.bid, x.start, x.end = nb, start, end
    run[0].nb = nb + 1
    r = q.head
    for _ in range(b):
        rr = req.rq[r]
        rr.start, rr.finish, rr.worker, rr.batch = start, end, k, nb
        req.outcome[r] = SERVED if req.d[r] >= end else LATE
        r = rr.nxt
    q.head = r
    q.length -= b
    return log_batch(blog, nb, k, m, b, start, end)


@njit(cache=True, inline='always')
def _dispatch(req, plan, wk, sl, tb, sc, s, run, blog, k, now):
    """``Nexus._dispatch`` on worker ``k`` up to its wake-up (which the loop sets); returns the batch log."""
    ready = ready_us(s, req.t, req.shed, run[0].i, now, sc.active, sc.decision_ns, sc.arrival_ns)
    x = wk[k]
    b0, nsl = x.sb, x.ns
    if _cycle_over(now, x.cyc):
        x.cyc = now + x.duty
        for j in range(b0, b0 + nsl):
            sl[j].served = False
        x.nserved = 0
    for step in range(nsl):
        j = _cycle_slot(x.rr, step, nsl)
        q, ps = sl[b0 + j], plan.slot[b0 + j]
        if q.served:
            continue
        b = _batch_size(req, q, tb.lat0, ps.cap, ps.model, ready)
        if b == 0:
            continue
        blog = _start(req, x, q, tb, sc, s, run, blog, k, ps.model, b, now)
        q.served = True
        x.nserved += 1
        x.rr = _cycle_slot(j, 1, nsl)
        x.idle = False
        return blog
    x.idle = True
    return blog


@njit(cache=True)
def run_nexus(req, plan, wk, sl, rt, tb, sc, run, epoch_us, last_epoch):
    """One group's Nexus run over the whole trace, writing the request columns and worker records in place;
    returns (batch log, shed count). An event lists in ``dq`` the workers it dispatches (then their wake-ups)."""
    n = len(req.t)
    dq = np.empty(len(wk), np.int64)
    qbuf = np.empty(n, np.int64)
    s = np.zeros(4, np.int64)  # the scheduler clock (.common)
    blog = np.empty((B_COLS, 1024), np.int64)
    heap = _set_timer(np.empty((3, 4 * len(wk) + 8), np.int64), run, 0, 0)  # on_start: epoch 0 first
    rs = run[0]
    k, dirty = -1, True
    cend = first_chunk_end(rs.i, 0, sc.chunk)
    while True:
        if dirty:
            k, dirty = next_completion(wk.bid, wk.end), False
        ce = wk[k].end if k >= 0 else INF
        te = heap[0, 0] if rs.hsize > 0 else INF
        i = rs.i
        ta = req.t[i] if i < n else INF
        nd, next_epoch = 0, -1
        if k >= 0 and ce <= te and ce <= ta:  # a completion (``Nexus.on_completion``)
            now, x = ce, wk[k]
            x.busy += now - x.start
            x.bid, x.free = NONE, now
            dq[0], nd, dirty = k, 1, True
        elif rs.hsize > 0 and te <= ta:  # a timer (``Nexus.on_timer``)
            now, p = te, heap[2, 0]
            timers.pop(heap, rs.hsize)
            rs.hsize -= 1
            if p >= 0:  # epoch p; its successor's timer is set after the dispatches
                nd = _configure(req, plan, wk, sl, rt, run, p, now, qbuf, dq)
                next_epoch = p + 1 if p < last_epoch else -1
            else:  # the end of worker −1 − p's duty cycle
                w = -p - 1
                if wk[w].wake == now:
                    wk[w].wake = -1
                dq[0], nd = w, 1 if wk[w].idle else 0
        elif i < n:  # an arrival (``Nexus.on_arrival``)
            now = ta
            if not arrive(s, now, sc.admit, sc.arrival_ns, sc.max_lag_ns):
                rs.i, cend = shed_request(s, req.shed, req.outcome, i, cend, 0, sc.chunk, n, sc.arrival_ns, DROPPED)
                continue
            rs.i = i + 1
            w = _admit(req, plan, sl, rt, run, i, now)
            if w >= 0 and wk[w].idle:
                dq[0], nd = w, 1
        else:
            break
        for q in range(nd):
            kk = dq[q]
            blog = _dispatch(req, plan, wk, sl, tb, sc, s, run, blog, kk, now)
            x = wk[kk]
            dirty = dirty or not x.idle
            at = _cycle_wake(x.nserved > 0, x.wake, x.cyc, now) if x.idle else -1
            if at >= 0:
                x.wake = at
                heap = _set_timer(heap, run, at, -kk - 1)
        if next_epoch >= 0:
            heap = _set_timer(heap, run, next_epoch * epoch_us, next_epoch)
        if rs.i > i:  # an arrival was handled
            cend = chunk_end(s, rs.i, cend, 0, sc.chunk, n, sc.arrival_ns)
    finish(req.outcome, DROPPED)
    return blog[:, :rs.nb].copy(), s[S_SHED]


# ---------------------------------------------------------------------- the schedule, flattened


def plans(schedule: Any, session_model: dict[int, int], n_workers: int) -> tuple:
    """The group's ``NexusSchedule`` flattened into a :data:`Plans` record (slot and allocation ids unique)."""
    n_e = len(schedule.epochs)
    ew = np.zeros((n_e, n_workers), EPOCH_WORKER)
    es = np.zeros((n_e, len(session_model)), EPOCH_SESSION)
    slots: list[tuple[int, int]] = []
    ents: list[tuple[int, int, float]] = []
    for e, ep in enumerate(schedule.epochs):
        ew["duty"][e] = ep.duty
        for w in range(n_workers):
            ew["sb"][e, w], ew["ns"][e, w] = len(slots), len(ep.slots[w])
            slots += [(b, session_model[s]) for s, b in ep.slots[w]]
        for s, tg in ep.targets.items():
            total = 0.0
            for weight in ep.weights[s]:  # SmoothWeightedRoundRobin.total: summed in entry order
                total += weight
            es[e, s] = (True, *ep.rates[s], len(ents), len(tg), total)
            ents += [(int(ew["sb"][e, w]) + j, w, weight) for (w, j), weight in zip(tg, ep.weights[s])]
    ent = np.array(ents, ENTRY)
    return Plans(ew, es, ent, np.ascontiguousarray(ent["w"]), np.array(slots, SLOT),
                 np.array([ep.scale for ep in schedule.epochs], np.float64),
                 np.ascontiguousarray(np.concatenate([ep.phase for ep in schedule.epochs], axis=1)))


def run_group(config: Any, make_policy: Callable[[int], Any], runtime: Any, max_batch: int, common: tuple,
              lat: np.ndarray, w_hw: np.ndarray, t: np.ndarray, d: np.ndarray, m: np.ndarray, out: tuple) -> tuple:
    """One group's run (:mod:`.whole`): the policy object built as the reference builds it, its schedule
    flattened, the kernel on fresh state; returns (batch log, w_busy, w_waste, shed count, no counters)."""
    pol = make_policy(0)
    sch = pol.schedule
    plan = plans(sch, pol.stream_model, len(pol.workers))
    r_start, r_finish, r_worker, r_batch, r_outcome, _, shed = out
    rq = np.zeros(len(t), REQUEST)
    rq["sess"], rq["front"], rq["coin"] = sch.session, sch.frontend, sch.coin
    cols = {"start": r_start, "finish": r_finish, "worker": r_worker, "batch": r_batch}
    for name, col in cols.items():
        rq[name] = col
    wk = np.zeros(len(w_hw), WORKER)
    wk["wake"], wk["idle"], wk["bid"] = -1, True, NONE
    sl = np.zeros(len(plan.slot), QUEUE)
    sl["head"], sl["tail"] = -1, -1
    rt = Routers(np.zeros(plan.phase.shape, np.float64), np.zeros(len(pol.stream_model), BUCKET))
    run = np.zeros(1, RUN)  # epoch 0's configuration (a timer at 0) comes before any arrival
    tb = Tables(lat, np.ascontiguousarray(lat[pol.hw]), w_hw)
    blog, n_shed = run_nexus(Requests(t, d, shed, r_outcome, rq), plan, wk, sl, rt, tb, Sched(*common), run,
                             pol.epoch_us, pol.last_epoch)
    for name, col in cols.items():
        col[:] = rq[name]
    return blog, wk["busy"].copy(), np.zeros(len(w_hw), np.int64), n_shed, {}


from shepherd.core.engine.fast import jitcache  # noqa: E402  (what it imports keys its JIT cache)

jitcache.refresh(__name__)
