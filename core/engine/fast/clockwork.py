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
* the scheduler as a single server (:mod:`..overhead`): arrivals charged
  lazily — a decision at ``t`` after the arrivals before ``t`` only, and
  every arrival of a feed chunk charged when the chunk has been handled (the
  reference's one approximation, kept here so that the outcomes are its own);
* admission control (:mod:`..admission`) as its literal per-arrival recursion:
  an arrival is shed when the backlog it finds with every admitted arrival
  and decision before it charged exceeds the bound.

No Python object per request: the loop runs in numba over the trace's numpy
columns; the JIT cache lives on disk (``NUMBA_CACHE_DIR``, else numba's
default ``__pycache__`` beside this file or a user cache folder).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

NONE = -1


@njit(cache=True)
def _bisect_right(row, x, lo, hi):
    while lo < hi:
        mid = (lo + hi) // 2
        if x < row[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True)
def _bisect_left(a, x, lo, hi):
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _ceil_us(ns):
    return -((-ns) // 1000)


@njit(cache=True)
def run_clockwork(t, d, model, lat, n_workers, maxb, decision_ns, per_request_ns, arrival_ns, active, admit,
                  max_lag_ns, chunk):
    """One group's Clockwork run over arrays; returns the request, batch and worker columns."""
    n = len(t)
    n_models = lat.shape[0]
    # queues: model m's requests live in [base[m], base[m + 1]); live part [qh[m], qe[m])
    counts = np.zeros(n_models + 1, np.int64)
    for i in range(n):
        counts[model[i] + 1] += 1
    base = np.cumsum(counts)
    qh = base[:-1].copy()
    qe = base[:-1].copy()
    qd = np.empty(n, np.int64)
    qr = np.empty(n, np.int64)
    # per request
    r_start = np.full(n, -1, np.int64)
    r_finish = np.full(n, -1, np.int64)
    r_worker = np.full(n, -1, np.int32)
    r_batch = np.full(n, -1, np.int64)
    r_outcome = np.zeros(n, np.int8)
    shed = np.zeros(n, np.bool_)
    n_shed = 0
    # per batch (grown by doubling)
    cap = 1024
    b_worker = np.empty(cap, np.int64)
    b_model = np.empty(cap, np.int64)
    b_size = np.empty(cap, np.int64)
    b_start = np.empty(cap, np.int64)
    b_end = np.empty(cap, np.int64)
    nb = 0
    # per worker
    w_free = np.zeros(n_workers, np.int64)
    w_end = np.zeros(n_workers, np.int64)
    w_bid = np.full(n_workers, NONE, np.int64)
    w_start = np.zeros(n_workers, np.int64)
    w_busy = np.zeros(n_workers, np.int64)
    idle = np.ones(n_workers, np.bool_)
    n_idle = n_workers
    # scheduler (overhead model)
    free = 0
    fall = 0  # ``free`` with every admitted arrival handled so far charged
    cp = 0  # first arrival not yet charged
    i = 0  # next arrival
    k = -1
    dirty = True
    queued = 0  # live requests in all queues
    while True:
        # the next completion: earliest end, then lowest batch id (found again only when a worker changed)
        if dirty:
            k = -1
            for w in range(n_workers):
                if w_bid[w] >= 0 and (k < 0 or w_end[w] < w_end[k]
                                      or (w_end[w] == w_end[k] and w_bid[w] < w_bid[k])):
                    k = w
            dirty = False
        if k >= 0 and (i >= n or w_end[k] <= t[i]):
            now = w_end[k]
            bid = w_bid[k]
            w_busy[k] += now - w_start[k]
            w_bid[k] = NONE
            w_free[k] = now
            dirty = True
            worker = k
            arriving = False
        elif i < n:
            now = t[i]
            # admission: the backlog with every admitted arrival before i charged (``fall``)
            if admit:
                if fall - now * 1000 > max_lag_ns:
                    shed[i] = True
                    n_shed += 1
                    r_outcome[i] = DROPPED
                    i += 1
                    if i % chunk == 0 or i == n:  # a chunk handled: all of it charged
                        free, cp = fall, i
                    continue
            if arrival_ns:
                fall = (fall if fall > now * 1000 else now * 1000) + arrival_ns
            m = model[i]
            dl = d[i]
            lo, e = qh[m], qe[m]
            if e == lo or dl >= qd[e - 1]:
                qd[e] = dl
                qr[e] = i
            else:
                p = _bisect_right(qd, dl, lo, e)
                for j in range(e, p, -1):
                    qd[j] = qd[j - 1]
                    qr[j] = qr[j - 1]
                qd[p] = dl
                qr[p] = i
            qe[m] = e + 1
            queued += 1
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
                worker = 0
                while not idle[worker]:
                    worker += 1
            # decision_time(now): charge the arrivals before now, then the scheduler's own clock
            if active:
                if arrival_ns:
                    while cp < i and t[cp] < now:
                        if not shed[cp]:
                            free = (free if free > t[cp] * 1000 else t[cp] * 1000) + arrival_ns
                        cp += 1
                ready = _ceil_us((free if free > now * 1000 else now * 1000) + decision_ns)
            else:
                ready = now
            # pick: the most urgent feasible head
            best_m, best_d = -1, np.int64(1) << 62
            for mm in range(n_models if queued else 0):  # nothing queued: nothing to pick or drop
                h, e = qh[mm], qe[mm]
                if h >= e:
                    continue
                cut = ready + lat[mm, 1]
                if qd[h] < cut:
                    j = _bisect_left(qd, cut, h, e)
                    for x in range(h, j):
                        r_outcome[qr[x]] = DROPPED
                    queued -= j - h
                    h = j
                    qh[mm] = j
                    if h >= e:
                        continue
                if qd[h] < best_d:
                    best_m, best_d = mm, qd[h]
            b = 0
            if best_m >= 0:
                b = _bisect_right(lat[best_m], best_d - ready, 1, maxb + 1) - 1
                qlen = qe[best_m] - qh[best_m]
                if qlen < b:
                    b = qlen
            if b <= 0:
                if not arriving:
                    idle[worker] = True
                    n_idle += 1
                break
            # start: the decision's cost, then the batch on the worker
            if active:
                free = (free if free > now * 1000 else now * 1000) + decision_ns + per_request_ns * b
                disp = _ceil_us(free)
                fall = free
                if arrival_ns:  # the admitted arrivals not charged yet (at ``now``) come after the decision
                    for j in range(cp, i):
                        if not shed[j]:
                            fall = (fall if fall > t[j] * 1000 else t[j] * 1000) + arrival_ns
            else:
                disp = now
            start = w_free[worker] if w_free[worker] > disp else disp
            end = start + lat[best_m, b]
            if nb == cap:
                cap *= 2
                b_worker = _grow(b_worker, cap)
                b_model = _grow(b_model, cap)
                b_size = _grow(b_size, cap)
                b_start = _grow(b_start, cap)
                b_end = _grow(b_end, cap)
            b_worker[nb], b_model[nb], b_size[nb], b_start[nb], b_end[nb] = worker, best_m, b, start, end
            h = qh[best_m]
            for x in range(h, h + b):
                r = qr[x]
                r_start[r] = start
                r_finish[r] = end
                r_worker[r] = worker
                r_batch[r] = nb
                r_outcome[r] = SERVED if d[r] >= end else LATE
            qh[best_m] = h + b
            queued -= b
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
        if arriving and (i % chunk == 0 or i == n):  # a chunk handled: all of it charged
            if arrival_ns:
                free = fall
            cp = i
    for r in range(n):
        if r_outcome[r] == 0:
            r_outcome[r] = DROPPED
    return (r_start, r_finish, r_worker, r_batch, r_outcome, shed, n_shed,
            b_worker[:nb], b_model[:nb], b_size[:nb], b_start[:nb], b_end[:nb], w_busy)


@njit(cache=True)
def _grow(a, cap):
    out = np.empty(cap, a.dtype)
    out[:len(a)] = a
    return out
