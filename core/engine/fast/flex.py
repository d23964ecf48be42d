"""Flex's compiled fast path (Shepherd §5.2, Algorithm 1; Flex-NP, §7.2): one serving group's reference run,
over arrays.

Same outcomes as ``core/policies/flex.py`` on the reference engine — per request outcome, worker, batch,
start, finish and preemptions, per batch every column, per worker busy and wasted time, the shed
requests (``tests/test_engine_fast.py``) — for overhead mode ``model`` or ``none``, any λ, exit points
and hardware mix the policy accepts. What it re-enacts, and where the reference says it:

* the clock (:mod:`..clock`): a completion at ``t`` before the arrivals at ``t``, completions of equal
  time in batch order, a preempted batch's completion stale;
* Flex (the policy module, whose docstring gives the reasons): BATCHGEN — the largest feasible batch
  across the queues (ties: the earliest first deadline, then the lower model), after dropping what
  cannot finish alone; on an arrival, the idle workers filled lowest first, else the preemption check
  against the worker with the smallest running batch, cascading, with the policy's incremental
  threshold (``thresh``) exactly as it keeps it — a full rescan after the running set changed, the
  arrived model's queue otherwise; the preempted batch stops at its next exit point, its requests
  re-enter (line 19) or are dropped; on a completion, the freed worker's BATCHGEN batch or idling;
* the scheduler clock and admission control: :mod:`.common`.

A batch's requests get their start, finish, worker, batch and outcome when it starts (a preemption
takes them back), so no request list outlives its batch; per worker only the running batch's requests
are kept (``w_reqs``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (B_COLS, B_END, B_PRE, DONE, GROW, INF, NONE, PAUSE, ST_BOFF,
                                              ST_I, ST_LAST, ST_LEN, ST_N, ST_NB, ST_NIDLE, ST_OFF, ST_THRESH,
                                              arrive, bit_fill, bit_lowest, chunk_end, cttz, decide, finish,
                                              first_chunk_end, grow_log, largest_feasible, log_row, nz_clear, nz_fill,
                                              nz_set, q_empty, q_expire, q_push, q_take, ready_us, run_insert,
                                              run_order, run_remove, save_loop, shed_request)
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED


@njit(cache=True, inline='always')
def _batchgen(now, lat, hw, lat1, maxb, qh, qe, qd, qr, r_outcome, nz, need):
    """(model, b, i0) of the largest feasible batch across all queues (``Flex.batchgen``) — exactly, whenever
    that batch has ``b ≥ need``; else some (model, b, i0) with ``b < need``. The scan visits only the
    non-empty queues (``nz``, lowest model first), which are the ones BATCHGEN does not skip, and drops the
    expired requests of each, as BATCHGEN does. ``need`` = 1 is BATCHGEN itself (a non-empty queue holds one
    request). The preemption check passes its ``need``, and only asks whether ``b ≥ need``: BATCHGEN's
    choice is the greatest (b, then earliest first deadline, then lowest model), an order that does not
    depend on the scan's, and a queue of fewer than ``need`` requests has b < need, so it can neither be
    that choice when b ≥ need nor matter when b < need — its (bisecting) largest feasible batch is skipped."""
    best_m, best_b, best_i, best_d = -1, 0, 0, INF
    for wi in range(len(nz)):
        x = nz[wi]
        while x != 0:
            m = (wi << 6) + cttz(x)
            x &= x - 1
            if q_expire(qh, qe, qd, qr, m, now + lat1[m], r_outcome, DROPPED) and qh[m] == qe[m]:
                nz_clear(nz, m)
                continue
            if qe[m] - qh[m] < need:
                continue
            b, i0 = largest_feasible(qh, qe, qd, m, now, lat, hw, maxb)
            if b > best_b or (b == best_b and b > 0 and qd[i0] < best_d):
                best_m, best_b, best_i, best_d = m, b, i0, qd[i0]
    return best_m, best_b, best_i


def init_flex(lat, w_hw, maxb, preemption, n_models):
    """The persistent state of one group's Flex run (:func:`run_flex`), before its first request."""
    n_workers = len(w_hw)
    lat1 = np.empty(n_models, np.int64)  # smallest ℓ(1) over the group's hardware: the expiry cutoff
    for m in range(n_models):
        lat1[m] = min(int(lat[h, m, 1]) for h in set(w_hw.tolist())) if n_workers else INF
    st = np.zeros(ST_LEN, np.int64)
    st[ST_THRESH], st[ST_NIDLE] = 0 if preemption else INF, n_workers
    return (lat1, *q_empty(n_models), np.empty((B_COLS, 1024), np.int64),
            np.zeros(n_workers, np.int64), np.zeros(n_workers, np.int64), np.zeros(n_workers, np.int64),
            np.full(n_workers, NONE, np.int64), np.zeros(n_workers, np.int64),
            np.zeros(n_workers, np.int64),  # w_size: Flex's run_size, 0 = idle
            np.empty((n_workers, maxb), np.int64), np.zeros(n_workers, np.int64), np.zeros(n_workers, np.int64),
            np.ones(n_workers, np.bool_), np.zeros(4, np.int64), st)



def make(params, runtime, max_batch, sched, chunk, lat, w_hw):
    """One group's kernel for the ``chunked`` mode (:mod:`.stream`): (run, static arguments, state, where
    the queues sit in the state, True: Flex's running-batch rows). ``params``: (λ, preemption, each model's
    exit points), as the policy declares them."""
    lam, preemption, exits = params
    common = (sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
              sched.max_lag_ns, chunk)
    state = list(init_flex(lat, w_hw, max_batch, bool(preemption), lat.shape[1]))
    static = (lat, w_hw, max_batch, float(lam), bool(preemption), np.array(exits, np.int64), *common)
    return run_flex, static, state, 1, True


@njit(cache=True)
def run_flex(lat, w_hw, maxb, lam, preemption, exits, decision_ns, per_request_ns, arrival_ns, active, admit_on,
             max_lag_ns, chunk, lat1, base, qh, qe, qd, qr, blog, w_free, w_start, w_end, w_bid, w_model, w_size,
             w_reqs, w_busy, w_waste, idle, s, st, t, d, model, r_start, r_finish, r_worker, r_batch, r_outcome,
             r_preempt, shed):
    """One group's Flex run over the window of requests loaded (``t``, ``d``, ``model`` and the request
    columns, written in place; local ids, the first being global id ``st[ST_OFF]``), resumable: it returns
    the batch log (rows from global id ``st[ST_BOFF]``) when it needs the next arrival beyond the window and
    ``st[ST_LAST]`` is 0, the run's state kept in the arrays and ``st`` (:mod:`.common`, "streaming").
    ``lat[hw, model, b]``; ``w_hw`` per worker; ``exits`` per model. The loop itself is :func:`_loop` (no
    allocation, hence no reference counting: see :mod:`.common`); this wrapper gives it its scratch space and
    grows the log when it asks."""
    n_workers = len(w_hw)
    nz = np.empty((len(qh) + 63) >> 6, np.int64)
    order = np.empty(n_workers, np.int64)
    idle_bits = np.empty((n_workers + 63) >> 6, np.int64)
    victims = np.empty(maxb, np.int64)
    while True:
        code = _loop(lat, w_hw, maxb, lam, preemption, exits, decision_ns, per_request_ns, arrival_ns, active,
                     admit_on, max_lag_ns, chunk, lat1, base, qh, qe, qd, qr, blog, w_free, w_start, w_end, w_bid,
                     w_model, w_size, w_reqs, w_busy, w_waste, idle, s, st, t, d, model, r_start, r_finish,
                     r_worker, r_batch, r_outcome, r_preempt, shed, nz, order, idle_bits, victims)
        if code == GROW:
            blog = grow_log(blog, st[ST_NB] - st[ST_BOFF], _room(n_workers, maxb))
            continue
        if code == DONE:
            finish(r_outcome, DROPPED)
        return blog


@njit(cache=True, inline='always')
def _room(n_workers, maxb):
    """The most batches one event makes: every idle worker filled, or a preemption cascade, in which each
    preempted worker's batch grows (λ > 1: ``need`` > its size) up to ``maxb``."""
    return n_workers * (maxb + 1) + 1


@njit(cache=True, _nrt=False)
def _loop(lat, w_hw, maxb, lam, preemption, exits, decision_ns, per_request_ns, arrival_ns, active, admit_on,
          max_lag_ns, chunk, lat1, base, qh, qe, qd, qr, blog, w_free, w_start, w_end, w_bid, w_model, w_size,
          w_reqs, w_busy, w_waste, idle, s, st, t, d, model, r_start, r_finish, r_worker, r_batch, r_outcome,
          r_preempt, shed, nz, order, idle_bits, victims):
    """:func:`run_flex`'s loop; returns PAUSE (the window is used up), GROW (the log needs room for the next
    event's batches, :func:`_room`) or DONE, its state saved in ``st`` each time."""
    n = len(t)
    n_workers = len(w_hw)
    room = blog.shape[1] - _room(n_workers, maxb)
    ovh = (active, decision_ns, per_request_ns, arrival_ns)
    Q = (qh, qe, qd, qr)
    W = (w_free, w_start, w_end, w_bid, w_model, w_size, w_reqs)
    R = (r_start, r_finish, r_worker, r_batch, r_outcome)
    i, thresh, n_idle, nb = st[ST_I], st[ST_THRESH], st[ST_NIDLE], st[ST_NB]
    off, boff, n_total, last = st[ST_OFF], st[ST_BOFF], st[ST_N], st[ST_LAST] != 0
    nz_fill(nz, qh, qe)
    n_run = run_order(order, w_bid, w_end)
    bit_fill(idle_bits, idle)
    cend = first_chunk_end(i, off, chunk)
    while True:
        k = order[n_run - 1] if n_run else -1
        if i >= n and not last:  # the window is used up: pause for the next chunk of the trace
            st[ST_THRESH] = thresh
            save_loop(st, i, n_idle, nb)
            return PAUSE
        if nb - boff > room:
            st[ST_THRESH] = thresh
            save_loop(st, i, n_idle, nb)
            return GROW
        if k >= 0 and (i >= n or w_end[k] <= t[i]):
            # ---- a completion (Flex.on_completion): the freed worker's BATCHGEN batch, or it idles
            now = w_end[k]
            w_busy[k] += now - w_start[k]
            w_bid[k] = NONE
            w_free[k] = now
            w_size[k] = 0
            n_run -= 1
            worker = k
            arriving = False
        else:
            if i >= n:
                break
            # ---- an arrival (Flex.on_arrivals)
            now = t[i]
            if not arrive(s, now, admit_on, arrival_ns, max_lag_ns):
                i, cend = shed_request(s, shed, r_outcome, i, cend, off, chunk, n_total, arrival_ns, DROPPED)
                continue
            m_arr = model[i]
            q_push(base, qh, qe, qd, qr, m_arr, d[i], i)
            nz_set(nz, m_arr)
            i += 1
            if n_idle == 0:
                if qe[m_arr] - qh[m_arr] >= thresh:  # _check_preempt
                    full = thresh == 0
                    while True:
                        kk = 0
                        for w in range(1, n_workers):
                            if w_size[w] < w_size[kk]:
                                kk = w
                        small = w_size[kk]
                        if small == 0:
                            thresh = 0
                            break
                        need = np.int64(math.ceil(lam * small - 1e-9))
                        if need > maxb:
                            thresh = INF
                            break
                        if full:  # a BATCHGEN that can neither find `need` nor drop anything: thresh = need
                            ready = ready_us(s, t, shed, i, now, active, decision_ns, arrival_ns)
                            upto = w_end[kk] if w_end[kk] > ready else ready
                            if not _may_batch(nz, qh, qe, qd, lat1, upto, need):
                                thresh = need
                                break
                        nb, n_run = _preempt(kk, need, full, m_arr, now, i, nb, boff, n_run, exits, lat, w_hw, maxb,
                                             lat1, base, qh, qe, qd, qr, blog, w_free, w_start, w_end, w_bid, w_model,
                                             w_size, w_reqs, w_waste, s, t, d, model, shed, r_start, r_finish,
                                             r_worker, r_batch, r_outcome, r_preempt, nz, order, victims, active,
                                             decision_ns, per_request_ns, arrival_ns)
                        if n_run < 0:
                            n_run = -1 - n_run
                            thresh = need
                            break
                        full = True
                cend = chunk_end(s, i, cend, off, chunk, n_total, arrival_ns)
                continue
            worker = -1
            arriving = True
        # decisions (one BATCHGEN a worker): the freed worker, or the idle workers lowest first (_fill_idle)
        while True:
            if arriving:
                if n_idle == 0:
                    break
                worker = bit_lowest(idle_bits)
            ready = ready_us(s, t, shed, i, now, active, decision_ns, arrival_ns)
            m, b, i0 = _batchgen(ready, lat, w_hw[worker], lat1, maxb, qh, qe, qd, qr, r_outcome, nz, 1)
            if b == 0:
                if not arriving:
                    idle[worker] = True
                    nz_set(idle_bits, worker)
                    n_idle += 1
                break
            nb = _start(worker, m, i0, b, now, blog, nb, boff, s, t, shed, i, ovh, lat, w_hw, Q, d, W, R, nz)
            n_run = run_insert(order, n_run, w_end, worker, w_end[worker])
            if not arriving:
                break
            idle[worker] = False
            nz_clear(idle_bits, worker)
            n_idle -= 1
        if preemption:
            thresh = 0  # the running set changed: the next arrival's check rescans every queue
        if arriving:
            cend = chunk_end(s, i, cend, off, chunk, n_total, arrival_ns)
    st[ST_THRESH] = thresh
    save_loop(st, i, n_idle, nb)
    return DONE


@njit(cache=True, _nrt=False)
def _preempt(kk, need, full, m_arr, now, i, nb, boff, n_run, exits, lat, w_hw, maxb, lat1, base, qh, qe, qd, qr,
             blog, w_free, w_start, w_end, w_bid, w_model, w_size, w_reqs, w_waste, s, t, d, model, shed, r_start,
             r_finish, r_worker, r_batch, r_outcome, r_preempt, nz, order, victims, active, decision_ns,
             per_request_ns, arrival_ns):
    """The preemption check's rest, once ``need`` is known and the check may matter (:func:`_may_batch`):
    BATCHGEN at the worker ``kk``'s next exit point (all queues if ``full``, else the arrived model's) and,
    if it finds ``need``, the preemption (``Resources.preempt``, line 19). Returns (next batch id, running
    count), the count as ``−1 − count`` when there is no preemption (the check ends: ``thresh = need``).
    Apart from the loop (not inlined, no reference counting): it runs for a few arrivals in a thousand, and
    the loop's hot paths keep their registers."""
    ovh = (active, decision_ns, per_request_ns, arrival_ns)
    Q = (qh, qe, qd, qr)
    W = (w_free, w_start, w_end, w_bid, w_model, w_size, w_reqs)
    R = (r_start, r_finish, r_worker, r_batch, r_outcome)
    delay = _delay(w_start[kk], w_end[kk], exits[w_model[kk]], now)
    if delay < 0:  # past its last exit point: it finishes shortly
        return nb, -1 - n_run
    ready = ready_us(s, t, shed, i, now, active, decision_ns, arrival_ns)
    t_eff = now + delay if now + delay > ready else ready
    hk = w_hw[kk]
    if full:
        m, b, i0 = _batchgen(t_eff, lat, hk, lat1, maxb, qh, qe, qd, qr, r_outcome, nz, need)
    else:
        m = m_arr
        b, i0 = largest_feasible(qh, qe, qd, m, t_eff, lat, hk, maxb)
    if b < need:
        return nb, -1 - n_run
    # preempt (Resources.preempt): the batch stops at its exit point, the time it ran is waste
    st0 = w_start[kk]
    stop = st0 if st0 >= now else (now + delay if now + delay < w_end[kk] else w_end[kk])
    bid = w_bid[kk] - boff
    blog[B_END, bid] = stop
    blog[B_PRE, bid] = 1
    w_waste[kk] += stop - st0
    nv = w_size[kk]
    for x in range(nv):
        r = w_reqs[kk, x]
        victims[x] = r
        r_start[r] = -1
        r_finish[r] = -1
        r_worker[r] = -1
        r_batch[r] = -1
        r_outcome[r] = 0
        r_preempt[r] += 1
    w_bid[kk] = NONE
    w_free[kk] = stop
    n_run = run_remove(order, n_run, kk)
    nb = _start(kk, m, i0, b, now, blog, nb, boff, s, t, shed, i, ovh, lat, w_hw,
                Q, d, W, R, nz)
    n_run = run_insert(order, n_run, w_end, kk, w_end[kk])
    for x in range(nv):  # line 19: re-enter as new arrivals what can still meet its deadline
        r = victims[x]
        mr = model[r]
        if d[r] >= stop + lat1[mr]:
            q_push(base, qh, qe, qd, qr, mr, d[r], r)
            nz_set(nz, mr)
        else:
            r_outcome[r] = DROPPED
    return nb, n_run


@njit(cache=True, inline='always')
def _may_batch(nz, qh, qe, qd, lat1, upto, need):
    """Whether the preemption check's BATCHGEN may matter: some queue holds ``need`` requests, or BATCHGEN at
    some time ≤ ``upto`` may drop a request (a queue head due before ``upto + ℓ(1)``). That BATCHGEN runs at
    ``max(now + delay, ready)`` ≤ max(the batch's end, ready) (the next exit point precedes the end, and a
    running batch ends after ``now``); when every queue holds fewer than ``need`` requests it cannot find
    the batch it needs (expiry only shortens them), and when it drops nothing it changes nothing but the
    threshold — so the check skips it (and the exit-point arithmetic): the same outcome, exactly.
    (``ready_us`` only charges arrivals a later decision would charge first anyway.)"""
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
def _delay(start, end, e, now):
    """Time from ``now`` to the running batch's next exit point, −1 after the last (``Flex._delay``)."""
    if now <= start:
        return 0
    span = end - start
    nxt = (now - start) * (e + 1) // span
    while start + nxt * span // (e + 1) < now:
        nxt += 1
    if nxt > e:
        return -1
    return start + nxt * span // (e + 1) - now


@njit(cache=True, inline='always')
def _start(w, m, i0, b, now, blog, nb, boff, s, t, shed, i, ovh, lat, w_hw, Q, d, W, R, nz):
    """Take the batch from model ``m``'s queue and run it on worker ``w`` (``Resources.start``). Grouped
    arguments (numba inlines a function of at most ~30): ``ovh`` (active, decision_ns, per_request_ns,
    arrival_ns), ``Q`` the queues (qh, qe, qd, qr), ``W`` the workers' columns (free, start, end, batch,
    model, size, requests), ``R`` the request columns (start, finish, worker, batch, outcome); returns the next
    batch id."""
    active, decision_ns, per_request_ns, arrival_ns = ovh
    qh, qe, qd, qr = Q
    w_free, w_start, w_end, w_bid, w_model, w_size, w_reqs = W
    r_start, r_finish, r_worker, r_batch, r_outcome = R
    start = w_free[w]
    if active:
        disp = decide(s, t, shed, i, now, decision_ns + per_request_ns * b, arrival_ns)
        if start < disp:
            start = disp
    elif start < now:
        start = now
    end = start + lat[w_hw[w], m, b]
    for x in range(b):
        r = qr[i0 + x]
        w_reqs[w, x] = r
        r_start[r] = start
        r_finish[r] = end
        r_worker[r] = w
        r_batch[r] = nb
        r_outcome[r] = SERVED if d[r] >= end else LATE
    q_take(qh, qe, qd, qr, m, i0, b)
    if qh[m] == qe[m]:
        nz_clear(nz, m)
    log_row(blog, nb - boff, w, m, b, start, end)
    w_bid[w] = nb
    w_start[w] = start
    w_end[w] = end
    w_model[w] = m
    w_size[w] = b
    return nb + 1

from shepherd.core.engine import outcomes  # noqa: E402  (with common.py, keys this module's JIT cache)
from shepherd.core.engine.fast import common as fast_common, jitcache  # noqa: E402

jitcache.refresh(__name__, fast_common, outcomes)
