"""Clockwork's compiled fast path: one serving group's reference run, over arrays — the tables of
``core/policies/clockwork.py`` on the reference engine, whole (``tests/test_engine_fast.py``), for what its
declaration covers: one hardware type, urgency ``deadline``, ``admission="none"``, overhead ``model`` or ``none``.

The loop re-enacts the clock (:mod:`..clock`) and the policy's rules: the idle workers tried lowest first on
an arrival, a freed worker at its completion, each given the largest batch its most urgent feasible head's
deadline allows (:func:`_pick`). Queues, scheduler clock, admission control and batch log: :mod:`.common`.
The batch size, the expiry cutoff and the heads' urgency are the policy's own rules (:mod:`shepherd.core.rules.
clockwork`), compiled here; the loop over the queues' heads is mirrored (the policy's queues are Python lists).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (ARRIVAL, DONE, END, GROW, INF, SHED, ST_BOFF, ST_LAST, ST_LEN, ST_N,
                                              ST_NB, ST_NIDLE, ST_OFF, Queues, Run, Sched, chunk_end, compiled,
                                              cttz, decider, finish, grow_log, must_pause, next_event, nz_clear,
                                              queues, q_expire, ready_at, resume, run_insert, save_loop, scratch,
                                              set_idle, start_batch, workers)
from shepherd.core.engine.outcomes import DROPPED
from shepherd.core.rules import clockwork as rules
from shepherd.core.rules import latency

#: the policy's own rules (:mod:`shepherd.core.rules.clockwork`), compiled here
_batch_for, _expiry_cutoff, _urgency = compiled(rules.batch_for, rules.expiry_cutoff, rules.urgency)

#: Clockwork's tables: ``lat[hw, model, b]`` (one hardware type: ``w_hw[0]``'s), each worker's hardware, the
#: largest batch, and per hardware and model whether ℓ is non-decreasing (``mono``) and its prefix minima
#: (``floor``) — computed by :mod:`shepherd.core.rules.latency`'s functions, as the policy computes them
Tables = namedtuple("Tables", "lat w_hw maxb mono floor")


@njit(cache=True, inline='always')
def _pick(g, lat_h, mono_h, floor_h, ready):
    """(model, b) of the batch built for the most urgent feasible head (``Clockwork.pick``); the scan visits
    only the non-empty queues (``nz``), lowest model first, as the reference's scan skips the empty ones."""
    q, nz = g.q, g.scr.nz
    best_m, best_d = -1, INF
    for wi in range(len(nz)):
        x = nz[wi]
        while x != 0:
            mm = (wi << 6) + cttz(x)
            x &= x - 1
            while q_expire(q.qh, q.qe, q.qd, q.qr, mm, _expiry_cutoff(floor_h[mm], ready, g.pol.maxb,
                                                                     q.qe[mm] - q.qh[mm]), g.win.outcome, DROPPED):
                pass  # ends at once on a monotone table, as the policy's loop
            if q.qh[mm] == q.qe[mm]:
                nz_clear(nz, mm)
                continue
            h = q.qh[mm]
            if _urgency(q.qd[h], lat_h[mm], False) < best_d:  # (urgency="deadline": what the kernel covers)
                best_m, best_d = mm, q.qd[h]
    if best_m < 0:
        return -1, 0
    return best_m, _batch_for(lat_h[best_m], best_d - ready, g.pol.maxb, q.qe[best_m] - q.qh[best_m],
                              mono_h[best_m])


def make(params, runtime, max_batch, sched, chunk, lat, w_hw):
    """One group's kernel for the ``chunked`` mode (:mod:`.stream`). ``params``: none."""
    from shepherd.core.engine.fast.stream import Kernel

    n_workers = len(w_hw)
    st = np.zeros(ST_LEN, np.int64)
    st[ST_NIDLE] = n_workers
    sc = Sched(sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
               sched.max_lag_ns, chunk)
    mono = np.array([[latency.monotone(t, max_batch) for t in per_hw] for per_hw in lat], np.bool_)
    floor = np.array([[latency.prefix_min(t, max_batch) for t in per_hw] for per_hw in lat], np.int64)
    return Kernel(run_clockwork, Tables(lat, w_hw, max_batch, mono, floor), sc, Queues(*queues(np.empty(0, np.int64), lat.shape[1])),
                  workers(n_workers, 1), np.zeros(4, np.int64), st, False)


@njit(cache=True)
def run_clockwork(pol, sc, q, blog, w, s, st, win):
    """One group's Clockwork run over the window of requests loaded, resumable, as :func:`.flex.run_flex` is
    (``win.preempt`` is not written: Clockwork never preempts); returns the batch log. The loop itself is
    :func:`_loop` (no allocation, hence no reference counting: see :mod:`.common`); this wrapper gives it its
    scratch space and grows the log when it asks."""
    scr = scratch(len(q.qh), len(pol.w_hw), 0)
    while True:
        code = _loop(Run(pol, sc, q, w, win, scr, s, st, blog))
        if code == GROW:
            blog = grow_log(blog, st[ST_NB] - st[ST_BOFF], len(pol.w_hw) + 1)
            continue
        if code == DONE:
            finish(win.outcome, DROPPED)
        return blog


@njit(cache=True, _nrt=False)
def _loop(g):
    """:func:`run_clockwork`'s loop over one :data:`.common.Run`; returns PAUSE (the window is used up), GROW
    (the log needs room for the next event's batches: at most one per worker) or DONE, its state saved in
    ``st`` each time."""
    w, st = g.w, g.st
    n = len(g.win.t)
    room = g.blog.shape[1] - len(w.bid) - 1
    boff, last = st[ST_BOFF], st[ST_LAST] != 0
    i, n_idle, nb, n_run, cend = resume(g)
    while True:
        code = must_pause(i, n, last, nb - boff, room)
        if code >= 0:
            save_loop(st, i, n_idle, nb)
            return code
        event, now, worker, i, n_run, cend = next_event(g, i, n_run, cend)
        if event == END:
            break
        if event == SHED:
            continue
        arriving = event == ARRIVAL
        nb, n_run, n_idle = _decide(g, worker, arriving, now, i, nb, n_run, n_idle)
        if arriving:
            cend = chunk_end(g.s, i, cend, st[ST_OFF], g.sc.chunk, st[ST_N], g.sc.arrival_ns)
    save_loop(st, i, n_idle, nb)
    return DONE


@njit(cache=True, inline='always')
def _decide(g, worker, arriving, now, i, nb, n_run, n_idle):
    """The decisions of an event: the freed ``worker`` (it idles if nothing is feasible), or on an arrival the
    idle workers lowest first. Returns (next batch id, running count, idle count)."""
    w, scr = g.w, g.scr
    hw = g.pol.w_hw[0]
    lat_h, mono_h, floor_h = g.pol.lat[hw], g.pol.mono[hw], g.pol.floor[hw]
    while True:
        worker = decider(g, worker, arriving, n_idle)
        if worker < 0:
            break
        best_m, b = _pick(g, lat_h, mono_h, floor_h, ready_at(g, i, now))
        if b <= 0:
            if not arriving:
                n_idle += set_idle(g, worker, True)
            break
        end = start_batch(g, worker, best_m, g.q.qh[best_m], b, now, i, nb)
        n_run = run_insert(scr.order, n_run, w.end, worker, end)
        nb += 1
        if w.idle[worker]:
            n_idle += set_idle(g, worker, False)
        if not arriving:
            break
    return nb, n_run, n_idle

from shepherd.core.engine.fast import jitcache  # noqa: E402  (what it imports keys its JIT cache)

jitcache.refresh(__name__)
