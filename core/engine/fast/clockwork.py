"""Clockwork's compiled fast path: the reference engine's run of one serving group, over arrays.

Same outcomes as ``core/policies/clockwork.py`` on the reference engine — per
request outcome, worker, batch, start and finish, per batch every column, per
worker busy time, the shed requests (``tests/test_engine_fast.py``) — for the
configurations it covers (:func:`covers`): one hardware type, urgency
``deadline``, ``admission="none"``, overhead mode ``model`` or ``none``.

What it re-enacts, and where the reference says it:

* the clock (:mod:`..clock`): a completion at ``t`` before the arrivals at
  ``t``, completions of equal time in batch order;
* Clockwork (the policy module): deadline-sorted queues per model (insertion
  after equal deadlines), the idle workers tried lowest first on each arrival,
  a freed worker tried at its completion, the most urgent head across models
  (lower model index on ties) after dropping what cannot finish alone, the
  largest batch its deadline allows;
* the scheduler clock, admission control, the queues, the batch log and the
  completion order: :mod:`.common` (shared with the other fast paths).

No Python object per request: the loop runs in numba over the trace's numpy
columns; the JIT cache lives on disk (``NUMBA_CACHE_DIR``, else numba's
default ``__pycache__`` beside this file or a user cache folder).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (B_COLS, DONE, GROW, INF, NONE, PAUSE, ST_BOFF, ST_I,
                                              ST_LAST, ST_LEN, ST_N, ST_NB, ST_NIDLE, ST_OFF, arrive,
                                              bisect_right, bit_fill, bit_lowest, chunk_end, cttz, decide, finish,
                                              first_chunk_end, grow_log, log_row, nz_clear, nz_fill, nz_set, q_empty,
                                              q_expire, q_push, q_take, ready_us, run_insert, run_order, save_loop,
                                              serve_rows, shed_request)
from shepherd.core.engine.outcomes import DROPPED


@njit(cache=True, inline='always')
def _pick(ready, lat_h, maxb, qh, qe, qd, qr, r_outcome, nz):
    """(model, b) of the batch built for the most urgent feasible head (``Clockwork.pick``); the scan visits
    only the non-empty queues (``nz``), lowest model first, as the reference's scan skips the empty ones."""
    best_m, best_d = -1, INF
    for wi in range(len(nz)):
        x = nz[wi]
        while x != 0:
            mm = (wi << 6) + cttz(x)
            x &= x - 1
            if q_expire(qh, qe, qd, qr, mm, ready + lat_h[mm, 1], r_outcome, DROPPED) and qh[mm] == qe[mm]:
                nz_clear(nz, mm)
                continue
            h = qh[mm]
            if qd[h] < best_d:
                best_m, best_d = mm, qd[h]
    if best_m < 0:
        return -1, 0
    b = bisect_right(lat_h[best_m], best_d - ready, 1, maxb + 1) - 1
    qlen = qe[best_m] - qh[best_m]
    return best_m, (qlen if qlen < b else b)


def init_clockwork(lat, w_hw, n_models):
    """The persistent state of one group's Clockwork run (:func:`run_clockwork`), before its first request."""
    n_workers = len(w_hw)
    st = np.zeros(ST_LEN, np.int64)
    st[ST_NIDLE] = n_workers
    return (*q_empty(n_models), np.empty((B_COLS, 1024), np.int64), np.zeros(n_workers, np.int64),
            np.zeros(n_workers, np.int64), np.full(n_workers, NONE, np.int64), np.zeros(n_workers, np.int64),
            np.zeros(n_workers, np.int64), np.ones(n_workers, np.bool_), np.zeros(4, np.int64), st)



def make(params, runtime, max_batch, sched, chunk, lat, w_hw):
    """One group's kernel for the ``chunked`` mode (:mod:`.stream`): (run, static arguments, state, where
    the queues sit in the state, False: no Flex running-batch rows). ``params``: none."""
    common = (sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
              sched.max_lag_ns, chunk)
    return run_clockwork, (lat, w_hw, max_batch, *common), list(init_clockwork(lat, w_hw, lat.shape[1])), 0, False


@njit(cache=True)
def run_clockwork(lat, w_hw, maxb, decision_ns, per_request_ns, arrival_ns, active, admit_on, max_lag_ns, chunk,
                  base, qh, qe, qd, qr, blog, w_free, w_end, w_bid, w_start, w_busy, idle, s, st,
                  t, d, model, r_start, r_finish, r_worker, r_batch, r_outcome, r_preempt, shed):
    """One group's Clockwork run (one hardware type: ``lat[w_hw[0]]``) over the window of requests loaded,
    resumable, as :func:`.flex.run_flex` is (``r_preempt`` is not written: Clockwork never preempts); returns
    the batch log. The loop itself is :func:`_loop` (no allocation, hence no reference counting: see
    :mod:`.common`); this wrapper gives it its scratch space and grows the log when it asks."""
    n_workers = len(w_hw)
    nz = np.empty((len(qh) + 63) >> 6, np.int64)
    order = np.empty(n_workers, np.int64)
    idle_bits = np.empty((n_workers + 63) >> 6, np.int64)
    while True:
        code = _loop(lat, w_hw, maxb, decision_ns, per_request_ns, arrival_ns, active, admit_on, max_lag_ns,
                     chunk, base, qh, qe, qd, qr, blog, w_free, w_end, w_bid, w_start, w_busy, idle, s, st,
                     t, d, model, r_start, r_finish, r_worker, r_batch, r_outcome, shed, nz, order, idle_bits)
        if code == GROW:
            blog = grow_log(blog, st[ST_NB] - st[ST_BOFF], n_workers + 1)
            continue
        if code == DONE:
            finish(r_outcome, DROPPED)
        return blog


@njit(cache=True, _nrt=False)
def _loop(lat, w_hw, maxb, decision_ns, per_request_ns, arrival_ns, active, admit_on, max_lag_ns, chunk,
          base, qh, qe, qd, qr, blog, w_free, w_end, w_bid, w_start, w_busy, idle, s, st,
          t, d, model, r_start, r_finish, r_worker, r_batch, r_outcome, shed, nz, order, idle_bits):
    """:func:`run_clockwork`'s loop; returns PAUSE (the window is used up), GROW (the log needs room for the
    next event's batches: at most one per worker) or DONE, its state saved in ``st`` each time."""
    n = len(t)
    lat_h = lat[w_hw[0]]
    room = blog.shape[1] - len(w_hw) - 1
    i, n_idle, nb = st[ST_I], st[ST_NIDLE], st[ST_NB]
    off, boff, n_total, last = st[ST_OFF], st[ST_BOFF], st[ST_N], st[ST_LAST] != 0
    nz_fill(nz, qh, qe)
    n_run = run_order(order, w_bid, w_end)
    bit_fill(idle_bits, idle)
    cend = first_chunk_end(i, off, chunk)
    while True:
        k = order[n_run - 1] if n_run else -1
        if i >= n and not last:  # the window is used up: pause for the next chunk of the trace
            save_loop(st, i, n_idle, nb)
            return PAUSE
        if nb - boff > room:
            save_loop(st, i, n_idle, nb)
            return GROW
        if k >= 0 and (i >= n or w_end[k] <= t[i]):
            now = w_end[k]
            w_busy[k] += now - w_start[k]
            w_bid[k] = NONE
            w_free[k] = now
            n_run -= 1
            worker = k
            arriving = False
        elif i < n:
            now = t[i]
            if not arrive(s, now, admit_on, arrival_ns, max_lag_ns):
                i, cend = shed_request(s, shed, r_outcome, i, cend, off, chunk, n_total, arrival_ns, DROPPED)
                continue
            q_push(base, qh, qe, qd, qr, model[i], d[i], i)
            nz_set(nz, model[i])
            i += 1
            worker = -1
            arriving = True
        else:
            break
        # decisions: a freed worker, or the idle workers lowest first
        while True:
            if arriving:
                if n_idle == 0:
                    break
                worker = bit_lowest(idle_bits)
            ready = ready_us(s, t, shed, i, now, active, decision_ns, arrival_ns)
            best_m, b = _pick(ready, lat_h, maxb, qh, qe, qd, qr, r_outcome, nz)
            if b <= 0:
                if not arriving:
                    idle[worker] = True
                    nz_set(idle_bits, worker)
                    n_idle += 1
                break
            if active:
                disp = decide(s, t, shed, i, now, decision_ns + per_request_ns * b, arrival_ns)
            else:
                disp = now
            start = w_free[worker] if w_free[worker] > disp else disp
            end = start + lat_h[best_m, b]
            log_row(blog, nb - boff, worker, best_m, b, start, end)
            h = qh[best_m]
            serve_rows(qr, h, b, start, end, worker, nb, d, r_start, r_finish, r_worker, r_batch, r_outcome)
            q_take(qh, qe, qd, qr, best_m, h, b)
            if qh[best_m] == qe[best_m]:
                nz_clear(nz, best_m)
            w_bid[worker] = nb
            w_start[worker] = start
            w_end[worker] = end
            n_run = run_insert(order, n_run, w_end, worker, end)
            nb += 1
            if idle[worker]:
                idle[worker] = False
                nz_clear(idle_bits, worker)
                n_idle -= 1
            if not arriving:
                break
        if arriving:
            cend = chunk_end(s, i, cend, off, chunk, n_total, arrival_ns)
    save_loop(st, i, n_idle, nb)
    return DONE

from shepherd.core.engine import outcomes  # noqa: E402  (with common.py, keys this module's JIT cache)
from shepherd.core.engine.fast import common as fast_common, jitcache  # noqa: E402

jitcache.refresh(__name__, fast_common, outcomes)
