"""Flex's compiled fast path (Shepherd §5.2, Algorithm 1; Flex-NP, §7.2): one serving group's reference run,
over arrays — the tables of ``core/policies/flex.py`` on the reference engine, whole (``tests/test_engine_fast.py``),
for overhead mode ``model`` or ``none`` and any λ, exit points and hardware mix the policy accepts.

The loop re-enacts the clock (:mod:`..clock`: a completion at ``t`` before the arrivals at ``t``, equal ends in
batch order, a preempted batch's completion stale) and the policy's rules as its docstring gives them:
BATCHGEN (:func:`_batchgen`), the idle workers filled lowest first (:func:`_decide`), and with none idle the
preemption check against the smallest running batch, cascading, with the policy's incremental threshold
(:func:`_check_preempt`, :func:`_preempt`: the batch stops at its next exit point, line 19's re-entry). The
scheduler clock, admission control, queues and batch log are :mod:`.common`'s. A batch's requests get their
rows when it starts (a preemption takes them back); per worker only the running batch's requests are kept.
``preempt_need``, ``exit_delay``, ``smallest``, ``check_at``, ``reenters`` and BATCHGEN's per-model step
``largest_feasible`` and choice ``better_batch`` are the policy's own rules (:mod:`shepherd.core.rules.flex`),
compiled here; BATCHGEN's loop over the models and the queues are mirrored: the policy's queues are Python lists
with a head offset, which numba cannot take.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (ARRIVAL, B_END, B_PRE, DONE, END, GROW, INF, NONE, SHED, ST_BOFF, ST_LAST,
                                              ST_LEN, ST_N, ST_NB, ST_NIDLE, ST_OFF, ST_THRESH, Queues, Run, Sched,
                                              chunk_end, compiled, cttz, decider, finish, grow_log, must_pause,
                                              next_event, nz_clear, nz_set, queues, q_expire, q_push, ready_at, resume,
                                              run_insert, run_remove, save_loop, scratch, set_idle, start_batch,
                                              workers)
from shepherd.core.engine.outcomes import DROPPED
from shepherd.core.rules import flex as rules
from shepherd.core.rules import latency

#: the policy's own rules (:mod:`shepherd.core.rules.flex`), compiled here
_preempt_need, _exit_delay, _largest_feasible, _better_batch, _smallest, _check_at, _reenters = compiled(
    rules.preempt_need, rules.exit_delay, rules.largest_feasible, rules.better_batch, rules.smallest, rules.check_at,
    rules.reenters)

#: Flex's tables: ``lat[hw, model, b]``, each worker's hardware, the largest batch, λ, whether it preempts, each
#: model's exit points, each model's least ℓ(b) over the group's hardware (the expiry cutoff: ℓ(1) on a
#: monotone table), and per hardware and model whether ℓ is non-decreasing (``mono``: BATCHGEN may bisect)
FlexTables = namedtuple("FlexTables", "lat w_hw maxb lam preemption exits lat1 mono")


@njit(cache=True, inline='always')
def _batchgen(g, now, hw, need):
    """(model, b, i0) of the largest feasible batch across all queues (``Flex.batchgen``) — exactly, whenever
    that batch has ``b ≥ need``; else some (model, b, i0) with ``b < need``. The scan visits only the
    non-empty queues (``nz``, lowest model first), which are the ones BATCHGEN does not skip, and drops the
    expired requests of each, as BATCHGEN does. ``need`` = 1 is BATCHGEN itself (a non-empty queue holds one
    request). The preemption check passes its ``need``, and only asks whether ``b ≥ need``: BATCHGEN's
    choice is the greatest (b, then earliest first deadline, then lowest model), an order that does not
    depend on the scan's, and a queue of fewer than ``need`` requests has b < need, so it can neither be
    that choice when b ≥ need nor matter when b < need — its (bisecting) largest feasible batch is skipped."""
    q, nz, lat1 = g.q, g.scr.nz, g.pol.lat1
    best_m, best_b, best_i, best_d = -1, 0, 0, INF
    for wi in range(len(nz)):
        x = nz[wi]
        while x != 0:
            m = (wi << 6) + cttz(x)
            x &= x - 1
            if q_expire(q.qh, q.qe, q.qd, q.qr, m, now + lat1[m], g.win.outcome, DROPPED) and q.qh[m] == q.qe[m]:
                nz_clear(nz, m)
                continue
            if q.qe[m] - q.qh[m] < need:
                continue
            b, i0 = _largest_feasible(q.qd, q.qh[m], q.qe[m], now, g.pol.lat[hw, m], g.pol.maxb,
                                      g.pol.mono[hw, m])
            if _better_batch(b, q.qd, i0, best_b, best_d):
                best_m, best_b, best_i, best_d = m, b, i0, q.qd[i0]
    return best_m, best_b, best_i


def make(params, runtime, max_batch, sched, chunk, lat, w_hw):
    """One group's kernel for the ``chunked`` mode (:mod:`.stream`). ``params``: (λ, preemption, each model's
    exit points), as the policy declares them."""
    from shepherd.core.engine.fast.stream import Kernel

    lam, preemption, exits = params
    n_workers, n_models = len(w_hw), lat.shape[1]
    lat1 = np.array(rules.expiry_floor(lat, sorted(set(w_hw.tolist())), max_batch), np.int64)  # the policy's
    mono = np.array([[latency.monotone(t, max_batch) for t in per_hw] for per_hw in lat], np.bool_)
    st = np.zeros(ST_LEN, np.int64)
    st[ST_THRESH], st[ST_NIDLE] = 0 if preemption else INF, n_workers
    pol = FlexTables(lat, w_hw, max_batch, float(lam), bool(preemption), np.array(exits, np.int64), lat1, mono)
    sc = Sched(sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
               sched.max_lag_ns, chunk)
    q = Queues(*queues(np.empty(0, np.int64), n_models))
    return Kernel(run_flex, pol, sc, q, workers(n_workers, max_batch), np.zeros(4, np.int64), st, True)


@njit(cache=True)
def run_flex(pol, sc, q, blog, w, s, st, win):
    """One group's Flex run over the window of requests loaded (``win``, written in place; local ids, the
    first being global id ``st[ST_OFF]``), resumable: it returns the batch log (rows from global id
    ``st[ST_BOFF]``) when it needs the next arrival beyond the window and ``st[ST_LAST]`` is 0, the run's
    state kept in the records and ``st`` (:mod:`.common`). The loop itself is :func:`_loop` (no allocation,
    hence no reference counting: see :mod:`.common`); this wrapper gives it its scratch space and grows the
    log when it asks."""
    scr = scratch(len(q.qh), len(pol.w_hw), pol.maxb)
    while True:
        code = _loop(Run(pol, sc, q, w, win, scr, s, st, blog))
        if code == GROW:
            blog = grow_log(blog, st[ST_NB] - st[ST_BOFF], _room(len(pol.w_hw), pol.maxb))
            continue
        if code == DONE:
            finish(win.outcome, DROPPED)
        return blog


@njit(cache=True, inline='always')
def _room(n_workers, maxb):
    """The most batches one event makes: every idle worker filled, or a preemption cascade, in which each
    preempted worker's batch grows (λ > 1: ``need`` > its size) up to ``maxb``."""
    return n_workers * (maxb + 1) + 1


@njit(cache=True, _nrt=False)
def _loop(g):
    """:func:`run_flex`'s loop over one :data:`.common.Run`; returns PAUSE (the window is used up), GROW (the
    log needs room for the next event's batches, :func:`_room`) or DONE, its state saved in ``st`` each time."""
    sc, q, w, st = g.sc, g.q, g.w, g.st
    n = len(g.win.t)
    room = g.blog.shape[1] - _room(len(w.bid), g.pol.maxb)
    thresh, off, boff, n_total, last = st[ST_THRESH], st[ST_OFF], st[ST_BOFF], st[ST_N], st[ST_LAST] != 0
    i, n_idle, nb, n_run, cend = resume(g)
    while True:
        code = must_pause(i, n, last, nb - boff, room)
        if code >= 0:
            st[ST_THRESH] = thresh
            save_loop(st, i, n_idle, nb)
            return code
        # a completion (Flex.on_completion): the freed worker's BATCHGEN batch, or it idles; an arrival
        # (Flex.on_arrivals): the idle workers filled, or with none idle the preemption check
        event, now, worker, i, n_run, cend = next_event(g, i, n_run, cend)
        if event == END:
            break
        if event == ARRIVAL and n_idle == 0:
            m_arr = g.win.model[i - 1]
            if q.qe[m_arr] - q.qh[m_arr] >= thresh:
                thresh, nb, n_run = _check_preempt(g, m_arr, now, i, thresh == 0, nb, n_run)
            cend = chunk_end(g.s, i, cend, off, sc.chunk, n_total, sc.arrival_ns)
            continue
        if event == SHED:
            continue
        arriving = event == ARRIVAL
        nb, n_run, n_idle = _decide(g, worker, arriving, now, i, nb, n_run, n_idle)
        if g.pol.preemption:
            thresh = 0  # the running set changed: the next arrival's check rescans every queue
        if arriving:
            cend = chunk_end(g.s, i, cend, off, sc.chunk, n_total, sc.arrival_ns)
    st[ST_THRESH] = thresh
    save_loop(st, i, n_idle, nb)
    return DONE


@njit(cache=True, inline='always')
def _decide(g, worker, arriving, now, i, nb, n_run, n_idle):
    """The decisions of an event, one BATCHGEN a worker: the freed ``worker`` (it idles if BATCHGEN finds
    nothing), or on an arrival the idle workers lowest first (``_fill_idle``). Returns (next batch id,
    running count, idle count)."""
    while True:
        worker = decider(g, worker, arriving, n_idle)
        if worker < 0:
            break
        m, b, i0 = _batchgen(g, ready_at(g, i, now), g.pol.w_hw[worker], 1)
        if b == 0:
            if not arriving:
                n_idle += set_idle(g, worker, True)
            break
        nb = _start(g, worker, m, i0, b, now, i, nb)
        n_run = run_insert(g.scr.order, n_run, g.w.end, worker, g.w.end[worker])
        if not arriving:
            break
        n_idle += set_idle(g, worker, False)
    return nb, n_run, n_idle


@njit(cache=True, inline='always')
def _check_preempt(g, m_arr, now, i, full, nb, n_run):
    """``Flex._check_preempt`` on an arrival of model ``m_arr`` that found no idle worker, cascading: against
    the worker with the smallest running batch, ``need`` = ⌈λ·size⌉, BATCHGEN at its next exit point (all
    queues if ``full``: the running set changed, else the arrived model's) preempts it when it finds ``need``.
    Returns the policy's incremental threshold as it keeps it, the next batch id and the running count."""
    w, pol = g.w, g.pol
    while True:
        kk = _smallest(w.size)
        small = w.size[kk]
        if small == 0:
            return 0, nb, n_run
        need = _preempt_need(pol.lam, small)
        if need > pol.maxb:
            return INF, nb, n_run
        if full:  # a BATCHGEN that can neither find `need` nor drop anything: thresh = need
            ready = ready_at(g, i, now)
            if not _may_batch(g, w.end[kk] if w.end[kk] > ready else ready, need):
                return need, nb, n_run
        nb, n_run = _preempt(g, kk, need, full, m_arr, now, i, nb, n_run)
        if n_run < 0:
            return need, nb, -1 - n_run
        full = True


@njit(cache=True, _nrt=False)
def _preempt(g, kk, need, full, m_arr, now, i, nb, n_run):
    """The preemption check's rest, once ``need`` is known and the check may matter (:func:`_may_batch`):
    BATCHGEN at the worker ``kk``'s next exit point (all queues if ``full``, else the arrived model's) and,
    if it finds ``need``, the preemption (``Resources.preempt``, line 19). Returns (next batch id, running
    count), the count as ``−1 − count`` when there is no preemption (the check ends: ``thresh = need``).
    Apart from the loop (not inlined, no reference counting): it runs for a few arrivals in a thousand, and
    the loop's hot paths keep their registers."""
    w, q, win, sc = g.w, g.q, g.win, g.sc
    delay = _exit_delay(w.start[kk], w.end[kk], g.pol.exits[w.model[kk]], now)
    if delay < 0:  # past its last exit point: it finishes shortly
        return nb, -1 - n_run
    ready = ready_at(g, i, now)
    t_eff = _check_at(now, delay, ready)
    hk = g.pol.w_hw[kk]
    if full:
        m, b, i0 = _batchgen(g, t_eff, hk, need)
    else:
        m = m_arr
        b, i0 = _largest_feasible(q.qd, q.qh[m], q.qe[m], t_eff, g.pol.lat[hk, m], g.pol.maxb, g.pol.mono[hk, m])
    if b < need:
        return nb, -1 - n_run
    # preempt (Resources.preempt): the batch stops at its exit point, the time it ran is waste
    st0 = w.start[kk]
    stop = st0 if st0 >= now else (now + delay if now + delay < w.end[kk] else w.end[kk])
    bid = w.bid[kk] - g.st[ST_BOFF]
    g.blog[B_END, bid] = stop
    g.blog[B_PRE, bid] = 1
    w.waste[kk] += stop - st0
    nv = w.size[kk]
    victims = g.scr.victims
    for x in range(nv):
        r = w.reqs[kk, x]
        victims[x] = r
        win.start[r], win.finish[r], win.worker[r], win.batch[r], win.outcome[r] = -1, -1, -1, -1, 0
        win.preempt[r] += 1
    w.bid[kk] = NONE
    w.free[kk] = stop
    n_run = run_remove(g.scr.order, n_run, kk)
    nb = _start(g, kk, m, i0, b, now, i, nb)
    n_run = run_insert(g.scr.order, n_run, w.end, kk, w.end[kk])
    lat1 = g.pol.lat1
    for x in range(nv):  # line 19: re-enter as new arrivals what can still meet its deadline
        r = victims[x]
        mr = win.model[r]
        if _reenters(win.d[r], stop, lat1[mr]):
            q_push(q.base, q.qh, q.qe, q.qd, q.qr, mr, win.d[r], r)
            nz_set(g.scr.nz, mr)
        else:
            win.outcome[r] = DROPPED
    return nb, n_run


@njit(cache=True, inline='always')
def _may_batch(g, upto, need):
    """Whether the preemption check's BATCHGEN may matter: some queue holds ``need`` requests, or BATCHGEN at
    some time ≤ ``upto`` may drop a request (a queue head due before ``upto + ℓ(1)``). That BATCHGEN runs at
    ``max(now + delay, ready)`` ≤ max(the batch's end, ready) (the next exit point precedes the end, and a
    running batch ends after ``now``); when every queue holds fewer than ``need`` requests it cannot find
    the batch it needs (expiry only shortens them), and when it drops nothing it changes nothing but the
    threshold — so the check skips it (and the exit-point arithmetic): the same outcome, exactly.
    (``ready_us`` only charges arrivals a later decision would charge first anyway.)"""
    nz, qh, qe, qd, lat1 = g.scr.nz, g.q.qh, g.q.qe, g.q.qd, g.pol.lat1
    for wi in range(len(nz)):
        x = nz[wi]
        while x != 0:
            m = (wi << 6) + cttz(x)
            x &= x - 1
            h = qh[m]
            if qe[m] - h >= need or qd[h] < upto + lat1[m]:
                return True
    return False


@njit(cache=True, inline='always')
def _start(g, wk, m, i0, b, now, i, nb):
    """Flex's batch start (:func:`.common.start_batch`), its requests kept for a preemption (``w_reqs``);
    returns the next batch id."""
    for x in range(b):
        g.w.reqs[wk, x] = g.q.qr[i0 + x]
    start_batch(g, wk, m, i0, b, now, i, nb)
    g.w.model[wk], g.w.size[wk] = m, b
    return nb + 1

from shepherd.core.engine.fast import jitcache  # noqa: E402  (what it imports keys its JIT cache)

jitcache.refresh(__name__)
