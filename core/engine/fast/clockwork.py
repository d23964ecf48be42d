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

from shepherd.core.engine.fast.common import (B_COLS, INF, NONE, ST_BOFF, ST_DIRTY, ST_I, ST_K, ST_LAST, ST_LEN, ST_N,
                                              ST_NB, ST_NIDLE, ST_NQ, ST_OFF, arrive, at_chunk_end, bisect_right,
                                              decide, finish, log_batch, next_completion, q_empty, q_expire, q_push,
                                              q_take, ready_us, save_loop, shed_arrival)
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED


@njit(cache=True, inline='always')
def _pick(ready, lat_h, maxb, qh, qe, qd, qr, r_outcome, st):
    """(model, b) of the batch built for the most urgent feasible head (``Clockwork.pick``); the scan stops once
    it has seen every queued request (``st[ST_NQ]``), as Flex's does."""
    best_m, best_d = -1, INF
    left = st[ST_NQ]
    mm = 0
    while left > 0:
        h, e = qh[mm], qe[mm]
        if h < e:
            left -= e - h
            st[ST_NQ] -= q_expire(qh, qe, qd, qr, mm, ready + lat_h[mm, 1], r_outcome, DROPPED)
            h = qh[mm]
            if h < qe[mm] and qd[h] < best_d:
                best_m, best_d = mm, qd[h]
        mm += 1
    if best_m < 0:
        return -1, 0
    b = bisect_right(lat_h[best_m], best_d - ready, 1, maxb + 1) - 1
    qlen = qe[best_m] - qh[best_m]
    return best_m, (qlen if qlen < b else b)


def init_clockwork(lat, w_hw, n_models):
    """The persistent state of one group's Clockwork run (:func:`run_clockwork`), before its first request."""
    n_workers = len(w_hw)
    st = np.zeros(ST_LEN, np.int64)
    st[ST_K], st[ST_DIRTY], st[ST_NIDLE] = -1, 1, n_workers
    return (*q_empty(n_models), np.empty((B_COLS, 1024), np.int64), np.zeros(n_workers, np.int64),
            np.zeros(n_workers, np.int64), np.full(n_workers, NONE, np.int64), np.zeros(n_workers, np.int64),
            np.zeros(n_workers, np.int64), np.ones(n_workers, np.bool_), np.zeros(4, np.int64), st)


@njit(cache=True)
def run_clockwork(lat, w_hw, maxb, decision_ns, per_request_ns, arrival_ns, active, admit_on, max_lag_ns, chunk,
                  base, qh, qe, qd, qr, blog, w_free, w_end, w_bid, w_start, w_busy, idle, s, st,
                  t, d, model, r_start, r_finish, r_worker, r_batch, r_outcome, r_preempt, shed):
    """One group's Clockwork run (one hardware type: ``lat[w_hw[0]]``) over the window of requests loaded,
    resumable, as :func:`.flex.run_flex` is (``r_preempt`` is not written: Clockwork never preempts); returns
    the batch log."""
    n = len(t)
    lat_h = lat[w_hw[0]]
    i, k, dirty, n_idle, nb = st[ST_I], st[ST_K], st[ST_DIRTY] != 0, st[ST_NIDLE], st[ST_NB]
    off, boff, n_total, last = st[ST_OFF], st[ST_BOFF], st[ST_N], st[ST_LAST] != 0
    while True:
        if dirty:
            k = next_completion(w_bid, w_end)
            dirty = False
        if i >= n and not last:  # the window is used up: pause for the next chunk of the trace
            save_loop(st, i, k, n_idle, nb)
            return blog
        if k >= 0 and (i >= n or w_end[k] <= t[i]):
            now = w_end[k]
            unit = w_bid[k]
            w_busy[k] += now - w_start[k]
            w_bid[k] = NONE
            w_free[k] = now
            dirty = True
            worker = k
            arriving = False
        elif i < n:
            now = t[i]
            if not arrive(s, now, admit_on, arrival_ns, max_lag_ns):
                i = shed_arrival(s, shed, r_outcome, i, off, chunk, n_total, arrival_ns, DROPPED)
                continue
            q_push(base, qh, qe, qd, qr, model[i], d[i], i)
            st[ST_NQ] += 1
            i += 1
            worker = -1
            unit = now
            arriving = True
        else:
            break
        # decisions: a freed worker, or the idle workers lowest first
        while True:
            if arriving:
                if n_idle == 0:
                    break
                worker = 0
                while not idle[worker]:
                    worker += 1
            ready = ready_us(s, t, shed, i, now, active, decision_ns, arrival_ns)
            best_m, b = _pick(ready, lat_h, maxb, qh, qe, qd, qr, r_outcome, st)
            if b <= 0:
                if not arriving:
                    idle[worker] = True
                    n_idle += 1
                break
            if active:
                disp = decide(s, t, shed, i, now, decision_ns + per_request_ns * b, arrival_ns)
            else:
                disp = now
            start = w_free[worker] if w_free[worker] > disp else disp
            end = start + lat_h[best_m, b]
            blog = log_batch(blog, nb - boff, worker, best_m, b, start, end, 1 if arriving else 0, unit)
            h = qh[best_m]
            for x in range(h, h + b):  # common.serve_rows by hand: that call measured ≈ 9 % slower here
                r = qr[x]
                r_start[r] = start
                r_finish[r] = end
                r_worker[r] = worker
                r_batch[r] = nb
                r_outcome[r] = SERVED if d[r] >= end else LATE
            q_take(qh, qe, qd, qr, best_m, h, b)
            st[ST_NQ] -= b
            w_bid[worker] = nb
            w_start[worker] = start
            w_end[worker] = end
            dirty = True
            nb += 1
            if idle[worker]:
                idle[worker] = False
                n_idle -= 1
            if not arriving:
                break
        if arriving:
            at_chunk_end(s, i, off, chunk, n_total, arrival_ns)
    finish(r_outcome, DROPPED)
    save_loop(st, i, k, n_idle, nb)
    return blog
