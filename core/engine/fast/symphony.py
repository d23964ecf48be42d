"""Symphony's compiled fast path (Symphony §4.3, Appendix C): one serving group's reference run, over arrays.

Same outcomes as ``core/policies/symphony.py`` on the reference engine — per request outcome, worker, batch,
start and finish, per batch every column, per worker busy time, the shed requests, and the policy's counters
(``tests/test_engine_fast.py``) — for ``symphony`` and ``symphony-wc`` with zero control/data delays
(``d_ctrl_us = d_data_us = 0``, the default), autoscaling off (the default), any ``rule`` (``text``,
``frontrun``, ``target-batch``, ``beta-lambda-authors``), ``prune`` (``window``, ``clipper``), ``rank``
(``schedulable``, ``all``) and ``rate_window_ms``, overhead mode ``model`` or ``none``, one serving group (any hardware mix: decisions use
the group's first worker's table, as the policy does, a batch runs for its own worker's ℓ(b)).

Why those: with zero delays no GPU is ever granted its next batch ahead (Appendix C ``set_gpu_timer``), so
nothing is booked and an idle GPU's ``free_at`` is its last completion (``g = now`` in every candidate);
autoscaling reads the recorder's windows during the run; several groups would need the timers in the
clock replay of :mod:`.replay` (a timer's place among equal-time events of other groups). Those runs stay on
the reference engine (``why_not`` in :mod:`shepherd.core.engine.fast` says so).

What it re-enacts, and where the reference says it:

* the clock (:mod:`..clock`): at equal times completions (in batch order), then timers (in the order they
  were set), then arrivals (in trace order); a cancelled timer never fires;
* Symphony (the policy module, whose docstring gives the reasons): per model its deadline queue, the
  arrivals of the last rate window (λ, counted from the first arrival while shorter), one live model timer;
  the candidate — heads that cannot finish alone dropped, the ``window`` prune, the largest feasible
  earliest-deadline prefix, ``sched_at``, schedulability by the rule (the authors' two with their bucketed
  rate meter and target batch, :mod:`shepherd.core.policies.symphony_rules`); the GPU that takes one — the idle
  GPU freed earliest (then the lower index), the schedulable candidate with the earliest ``sched_at``
  (ties: the lower model), under ``rank="all"`` the earliest waiting one if earlier still; the timers of
  the waiting candidates set at ``max(now + 1, sched_at)`` (kept if unchanged, else cancelled and set
  again), the taken candidate's cancelled; on an arrival only its model is looked at (every model under
  ``rank="all"``), on a completion or a timer every model;
* the scheduler clock and admission control, the queues, the batch log, the completion order: :mod:`.common`.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (B_COLS, INF, NONE, S_SHED, arrive, at_chunk_end, bisect_right, decide,
                                              finish, log_batch, next_completion, q_expire, q_push, q_take, queues,
                                              serve_rows, shed_arrival)
from shepherd.core.engine.outcomes import DROPPED

#: the request columns a batch writes (:func:`.common.serve_rows`)
Served = namedtuple("Served", "d start finish worker batch outcome")

#: the policy's counters, in the order of ``Symphony.counters`` (the kernel returns them as an array)
COUNTERS = ("batches", "dropped_pruned", "stale_timer_fired", "timers_cancelled", "booked_ahead")
C_BATCHES, C_DROPPED, C_CANCELLED = 0, 1, 3
#: the schedulability rules, in the order of ``symphony_rules.RULES`` (the policy passes the index)
R_TEXT, R_FRONTRUN, R_TARGET_BATCH, R_BETA_LAMBDA_AUTHORS = 0, 1, 2, 3
#: per model the authors' bucketed rate meter (``symphony_rules.BucketMeter``: its non-empty buckets as a ring
#: of ``size`` slots from ``head``, ``n`` of them) and the estimator's constants (``XRPS``, ``XSTD``)
Meter = namedtuple("Meter", "span size xrps xstd idx cnt head n total sumsq")


def _new_meter(n_models, span, size, xrps, xstd):
    """Empty meters for ``n_models`` models."""
    z = np.zeros(n_models, np.int64)
    return Meter(span, size, xrps, xstd, np.zeros((n_models, size), np.int64), np.zeros((n_models, size), np.int64),
                 z.copy(), z.copy(), z.copy(), z.copy())


@njit(cache=True, inline='always')
def _meter_evict(mt, m, now):
    """``BucketMeter._evict``: drop model ``m``'s buckets older than ``size``; returns the current bucket."""
    cur = now // mt.span
    h, n = mt.head[m], mt.n[m]
    while n > 0 and mt.idx[m, h] <= cur - mt.size:
        c = mt.cnt[m, h]
        mt.total[m] -= c
        mt.sumsq[m] -= c * c
        h = (h + 1) % mt.size
        n -= 1
    mt.head[m] = h
    mt.n[m] = n
    return cur


@njit(cache=True)
def _meter_hit(mt, m, now):
    """``BucketMeter.hit``: one arrival of model ``m`` at ``now``."""
    cur = _meter_evict(mt, m, now)
    n = mt.n[m]
    last = (mt.head[m] + n - 1) % mt.size
    if n > 0 and mt.idx[m, last] == cur:
        c = mt.cnt[m, last]
        mt.cnt[m, last] = c + 1
        mt.sumsq[m] += 2 * c + 1
    else:
        slot = (mt.head[m] + n) % mt.size
        mt.idx[m, slot] = cur
        mt.cnt[m, slot] = 1
        mt.n[m] = n + 1
        mt.sumsq[m] += 1
    mt.total[m] += 1


@njit(cache=True)
def _meter_get(mt, m, now):
    """``BucketMeter.get``: (mean, sample std) of model ``m``'s bucket rates, req/s."""
    cur = _meter_evict(mt, m, now)
    k = cur + 1 if cur + 1 < mt.size else mt.size
    avg = mt.total[m] / k
    var = (mt.sumsq[m] - k * avg * avg) / (k - 1) if k > 1 else 0.0
    per_s = 1e6 / mt.span
    return avg * per_s, math.sqrt(max(0.0, var)) * per_s


@njit(cache=True)
def _target_batch(lat_m, budget, rate, std, maxb, xrps, xstd):
    """``symphony_rules.target_batch`` with ``d_data_us = 0`` (Eqs. 2–3 as the authors solve them)."""
    r = xrps * rate + xstd * std
    if r <= 0:
        return 1
    b, n = maxb, 0.0
    for bs in range(1, maxb + 1):
        sec = lat_m[bs] / 1e6
        n = r * sec / bs
        if sec * (1 + 1 / max(1.0, n)) > budget / 1e6:
            b = max(1, bs - 1)
            break
    if n > 1:
        return b
    for bs in range(2, maxb + 1):
        if lat_m[bs] / 1e6 + bs / r > budget / 1e6:
            return bs - 1
    return maxb


@njit(cache=True)
def _authors_early(rule, mt, m, now, lat_m, b, budget, maxb):
    """``symphony_rules.early`` for the authors' ``target-batch`` and ``beta-lambda-authors`` rules."""
    avg, std = _meter_get(mt, m, now)
    target = _target_batch(lat_m, budget, avg, std, maxb, mt.xrps, mt.xstd)
    if rule == R_TARGET_BATCH:
        return b >= target
    x = target if b != target else b + 1  # symphony_rules.secant_beta_s
    alpha = (lat_m[x] - lat_m[b]) / (x - b)
    return b >= (lat_m[x] - alpha * x) / 1e6 * avg


@njit(cache=True, inline='always')
def _fit(lat_m, dd, top):
    """Largest b ≤ ``top`` with ℓ(b) ≤ ``dd`` (``Symphony._fit`` with g = now and zero delays)."""
    return bisect_right(lat_m, dd, 1, top + 1) - 1


@njit(cache=True, inline='always')
def _next_timer(tm_at, tm_seq):
    """The model whose live timer fires next: earliest time, then the earliest set; −1 if none."""
    x = -1
    for m in range(len(tm_at)):
        if tm_at[m] >= 0 and (x < 0 or tm_at[m] < tm_at[x] or (tm_at[m] == tm_at[x] and tm_seq[m] < tm_seq[x])):
            x = m
    return x


@njit(cache=True, inline='always')
def _candidate(m, now, lat_m, beta_m, maxb, wc, rule, window_prune, window, qh, qe, qd, qr, rt, base,
               rcnt, rlo, first, r_outcome, counters, mt, slo):
    """(present, b, sched_at, schedulable) of model ``m``'s candidate after pruning (``Symphony.candidate``)."""
    dead = q_expire(qh, qe, qd, qr, m, now + lat_m[1], r_outcome, DROPPED)
    h = qh[m]
    n = qe[m] - h
    head_b = -1
    if n > 1 and window_prune:  # (one request: the only window is the head's)
        lo, hi = h, h + n
        while lo < hi:
            mid = (lo + hi) >> 1
            if _fit(lat_m, qd[mid] - now, maxb) >= h + n - mid:
                hi = mid
            else:
                lo = mid + 1
        top = n if n < maxb else maxb
        head_b = _fit(lat_m, qd[h] - now, top)
        best_i, best_b = h, head_b
        for i in (lo - 1, lo):
            if h <= i < h + n:
                rest = h + n - i
                b = _fit(lat_m, qd[i] - now, rest if rest < maxb else maxb)
                if b > best_b:
                    best_i, best_b = i, b
        if best_i > h and 4 * head_b < 3 * best_b:
            for x in range(h, best_i):
                r_outcome[qr[x]] = DROPPED
            q_take(qh, qe, qd, qr, m, h, best_i - h)
            dead += best_i - h
            n = qe[m] - qh[m]
            head_b = -1
    counters[C_DROPPED] += dead
    if n == 0:
        return False, 0, 0, False
    dl = qd[qh[m]]
    b = head_b if head_b >= 0 else _fit(lat_m, dl - now, n if n < maxb else maxb)
    full = b >= maxb or b < n
    sched_at = dl - lat_m[b] if b >= maxb else dl - lat_m[b + 1]
    if wc or full or now >= sched_at:
        return True, b, sched_at, True
    if rule == R_FRONTRUN:
        return True, b, sched_at, False
    if rule != R_TEXT:
        return True, b, sched_at, _authors_early(rule, mt, m, now, lat_m, b, slo[m], maxb)
    # λ (Symphony.rate): the model's arrivals in (now − window, now], over min(window, now − first)
    lo_t = now - window
    j = rlo[m]
    end = rcnt[m]
    while j < end and rt[base[m] + j] <= lo_t:
        j += 1
    rlo[m] = j
    span = now - first[m] if first[m] >= 0 else 0
    if span > window:
        span = window
    rate = (end - j) * 1e6 / span if span > 0 else 0.0
    return True, b, sched_at, b >= beta_m * rate


@njit(cache=True, inline='always')
def _set_timer(tm_at, tm_seq, m, at, seq, counters):
    """``Symphony._set_model_timer``: keep an unchanged live timer, else cancel it and set ``at`` (−1: none);
    returns (the timer sequence counter, whether a timer changed)."""
    changed = False
    if tm_at[m] >= 0:
        if at >= 0 and tm_at[m] == at:
            return seq, False
        tm_at[m] = -1
        counters[C_CANCELLED] += 1
        changed = True
    if at >= 0:
        seq += 1
        tm_at[m] = at
        tm_seq[m] = seq
        changed = True
    return seq, changed


@njit(cache=True)
def run_symphony(t, d, model, lat, w_hw, maxb, beta, window, wc, rule, window_prune, rank_all, mt,
                 decision_ns, per_request_ns, arrival_ns, active, admit_on, max_lag_ns, chunk,
                 r_start, r_finish, r_worker, r_batch, r_outcome, shed):
    """One group's Symphony run; writes the request columns in place and returns (batch log, w_busy,
    w_waste, shed count, counters). ``lat[hw, model, b]``; ``w_hw`` per worker; ``beta[m]`` the policy's
    β in seconds; ``window`` the rate window, µs."""
    n = len(t)
    n_models = lat.shape[1]
    n_workers = len(w_hw)
    rows = Served(d, r_start, r_finish, r_worker, r_batch, r_outcome)
    lat0 = lat[w_hw[0]]  # the policy's table: its group's first worker
    base, qh, qe, qd, qr = queues(model, n_models)
    rt = np.empty(n, np.int64)  # per model (slots [base[m], base[m+1])) the times of its admitted arrivals
    rcnt = np.zeros(n_models, np.int64)
    rlo = np.zeros(n_models, np.int64)
    first = np.full(n_models, -1, np.int64)
    slo = np.zeros(n_models, np.int64)  # the model's SLO at its latest arrival (the target batch's budget)
    blog = np.empty((B_COLS, 1024), np.int64)
    nb = 0
    w_free = np.zeros(n_workers, np.int64)  # the engine's: the last completion
    free_at = np.zeros(n_workers, np.int64)  # the policy's
    w_start = np.zeros(n_workers, np.int64)
    w_end = np.zeros(n_workers, np.int64)
    w_bid = np.full(n_workers, NONE, np.int64)
    w_busy = np.zeros(n_workers, np.int64)
    idle = np.ones(n_workers, np.bool_)
    n_idle = n_workers
    tm_at = np.full(n_models, -1, np.int64)
    tm_seq = np.zeros(n_models, np.int64)
    seq = 0
    wait_m = np.empty(n_models, np.int64)
    wait_s = np.empty(n_models, np.int64)
    wait_b = np.empty(n_models, np.int64)
    counters = np.zeros(len(COUNTERS), np.int64)
    s = np.zeros(4, np.int64)  # the scheduler clock (.common)
    i = 0
    k = -1
    x = -1
    dirty_w = True
    dirty_t = True
    while True:
        if dirty_w:
            k = next_completion(w_bid, w_end)
            dirty_w = False
        if dirty_t:
            x = _next_timer(tm_at, tm_seq)
            dirty_t = False
        ce = w_end[k] if k >= 0 else INF
        te = tm_at[x] if x >= 0 else INF
        ta = t[i] if i < n else INF
        arriving = False
        if k >= 0 and ce <= te and ce <= ta:
            # ---- a completion (Symphony.on_completion): the GPU is idle, every model looked at
            now = ce
            w_busy[k] += now - w_start[k]
            w_bid[k] = NONE
            w_free[k] = now
            free_at[k] = now
            idle[k] = True
            n_idle += 1
            dirty_w = True
            m_lo, m_hi = 0, n_models
        elif x >= 0 and te <= ta:
            # ---- a model timer fires (Symphony.on_timer)
            now = te
            tm_at[x] = -1
            dirty_t = True
            m_lo, m_hi = 0, n_models
        elif i < n:
            # ---- an arrival (Symphony.on_arrival): only its model is looked at
            now = ta
            if not arrive(s, now, admit_on, arrival_ns, max_lag_ns):
                i = shed_arrival(s, shed, r_outcome, i, 0, chunk, n, arrival_ns, DROPPED)
                continue
            m = model[i]
            q_push(base, qh, qe, qd, qr, m, d[i], i)
            rt[base[m] + rcnt[m]] = now
            rcnt[m] += 1
            if first[m] < 0:
                first[m] = now
            if rule >= R_TARGET_BATCH:
                _meter_hit(mt, m, now)
                slo[m] = d[i] - now
            i += 1
            arriving = True
            m_lo, m_hi = (0, n_models) if rank_all else (m, m + 1)
        else:
            break
        # ---- Symphony._dispatch: the idle GPU freed earliest takes a candidate, while one is taken
        while n_idle > 0:
            kk = -1
            for w in range(n_workers):
                if idle[w] and (kk < 0 or free_at[w] < free_at[kk]):
                    kk = w
            best, best_b, best_s = -1, 0, INF
            n_wait = 0
            for m in range(m_lo, m_hi):
                if qe[m] <= qh[m]:
                    continue
                present, b, sched_at, ok = _candidate(m, now, lat0[m], beta[m], maxb, wc, rule,
                                                      window_prune, window, qh, qe, qd, qr, rt, base, rcnt,
                                                      rlo, first, r_outcome, counters, mt, slo)
                if not present:
                    seq, ch = _set_timer(tm_at, tm_seq, m, -1, seq, counters)
                    dirty_t |= ch
                    continue
                if not ok:
                    wait_m[n_wait] = m
                    wait_s[n_wait] = sched_at
                    wait_b[n_wait] = b
                    n_wait += 1
                    continue
                if best < 0 or sched_at < best_s:
                    best, best_b, best_s = m, b, sched_at
            for j in range(n_wait):  # an idle GPU takes it the moment it becomes schedulable
                at = wait_s[j] if wait_s[j] > now + 1 else now + 1
                seq, ch = _set_timer(tm_at, tm_seq, wait_m[j], at, seq, counters)
                dirty_t |= ch
            if best < 0:
                break
            if rank_all and n_wait > 0:
                u = 0
                for j in range(1, n_wait):
                    if wait_s[j] < wait_s[u]:
                        u = j
                if wait_s[u] < best_s:
                    best = wait_m[u]
                    best_s = wait_s[u]
                    best_b = wait_b[u]
            seq, ch = _set_timer(tm_at, tm_seq, best, -1, seq, counters)
            dirty_t |= ch
            counters[C_BATCHES] += 1
            # Resources.start(w, m, rids, now, at=now): after the scheduler's decision, not before now
            start = w_free[kk]
            if active:
                disp = decide(s, t, shed, i, now, decision_ns + per_request_ns * best_b, arrival_ns)
                if start < disp:
                    start = disp
            if start < now:
                start = now
            end = start + lat[w_hw[kk], best, best_b]
            blog = log_batch(blog, nb, kk, best, best_b, start, end)
            h = qh[best]
            serve_rows(qr, h, best_b, start, end, kk, nb, rows)
            q_take(qh, qe, qd, qr, best, h, best_b)
            w_bid[kk] = nb
            w_start[kk] = start
            w_end[kk] = end
            free_at[kk] = now + lat0[best, best_b]
            idle[kk] = False
            n_idle -= 1
            nb += 1
            dirty_w = True
        if arriving:
            at_chunk_end(s, i, 0, chunk, n, arrival_ns)
    finish(r_outcome, DROPPED)
    return blog[:, :nb].copy(), w_busy, np.zeros(n_workers, np.int64), s[S_SHED], counters



def run_group(params: tuple, make_policy, runtime, max_batch: int, common: tuple, lat: np.ndarray,
              w_hw: np.ndarray, t: np.ndarray, d: np.ndarray, m: np.ndarray, out: tuple) -> tuple:
    """One group's run (the ``whole`` mode, :mod:`.whole`): ``params`` = (the policy's config, whether it is
    work-conserving, the rule's index in ``symphony_rules.RULES``, the rate meter's (span µs, buckets) and the
    estimator's (XRPS, XSTD)); the policy's constants as ``Symphony.__init__`` computes them, then
    the kernel; returns (batch log, w_busy, w_waste, shed count, the policy's counters as a dict)."""
    config, work_conserving, rule, meter = params
    lat0 = runtime.lat[int(w_hw[0])]
    top = max_batch + 1
    beta = np.array([max(0.0, (2 * row[1] - row[2]) / 1e6) if top > 2 else row[1] / 1e6 for row in lat0],
                    np.float64)
    window = max(1, int(round(config.rate_window_ms * 1000)))
    r_start, r_finish, r_worker, r_batch, r_outcome, _, shed = out
    blog, w_busy, w_waste, n_shed, counters = run_symphony(
        t, d, m, lat, w_hw, max_batch, beta, window, work_conserving, rule, config.prune == "window",
        config.rank == "all", _new_meter(lat.shape[1], *meter), *common, r_start, r_finish, r_worker,
        r_batch, r_outcome, shed)
    return blog, w_busy, w_waste, n_shed, dict(zip(COUNTERS, counters.tolist()))

from shepherd.core.engine import outcomes  # noqa: E402  (with common.py, keys this module's JIT cache)
from shepherd.core.engine.fast import common as fast_common, jitcache  # noqa: E402

jitcache.refresh(__name__, fast_common, outcomes)
