"""Symphony's compiled fast path (Symphony §4.3, Appendix C): one serving group's reference run, over arrays.

Same outcomes as ``core/policies/symphony.py`` on the reference engine — per request outcome, worker, batch,
start and finish, per batch every column, per worker busy time, the shed requests, and the policy's counters
(``tests/test_engine_fast.py``) — for ``symphony`` and ``symphony-wc`` with zero control/data delays
(``d_ctrl_us = d_data_us = 0``, the default), autoscaling off (the default), any ``rule`` (``text``,
``frontrun``, ``target-batch``, ``beta-lambda-authors``), ``prune`` (``window``, ``clipper``), ``rank``
(``schedulable``, ``all``) and ``rate_window_ms``, overhead mode ``model`` or ``none``, one serving group
(any hardware mix: decisions use the group's first worker's table, as the policy does, a batch runs for its
own worker's ℓ(b)).

Why those: with zero delays no GPU is ever granted its next batch ahead (Appendix C ``set_gpu_timer``), so
nothing is booked and an idle GPU's ``free_at`` is its last completion (``g = now`` in every candidate);
autoscaling reads the recorder's windows during the run; several groups would need the timers of every
group in one clock. Those runs stay on the reference engine (the policy's ``FastPath`` says so).

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

State travels as named records (built by :func:`run_group`): namedtuples of the constants and of the arrays
:mod:`.common` reads (:data:`Policy`, :data:`Requests`, :data:`Queues`, :data:`Clock`), structured arrays of
the per-model and per-worker state (:func:`model_dtype`, :data:`WORKER`; one array each: a namedtuple handed
to an inlined helper costs a reference count per member array).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (B_COLS, INF, NONE, S_SHED, arrive, bisect_right, chunk_end, decide,
                                              finish, first_chunk_end, log_batch, next_completion, q_expire, q_push,
                                              q_take, queues, serve_rows, shed_request)
from shepherd.core.engine.outcomes import DROPPED

#: the policy's counters, in the order of ``Symphony.counters``; the kernel's array has one more slot, the
#: timer sequence (orders timers set for the same time)
COUNTERS = ("batches", "dropped_pruned", "stale_timer_fired", "timers_cancelled", "booked_ahead")
C_BATCHES, C_DROPPED, C_CANCELLED, C_TIMER_SEQ = 0, 1, 3, len(COUNTERS)
#: the schedulability rules, in the order of ``symphony_rules.RULES`` (the policy passes the index)
R_TEXT, R_FRONTRUN, R_TARGET_BATCH, R_BETA_LAMBDA_AUTHORS = 0, 1, 2, 3

#: the policy's constants: ``lat[hw, model, b]`` (a batch runs for its worker's), ``window`` λ's window (µs),
#: the rule's index, the prune and rank switches, the authors' rate meter's bucket (µs) and their estimator's
#: XRPS, XSTD (``symphony_rules``)
Policy = namedtuple("Policy", "lat maxb window wc rule window_prune rank_all span xrps xstd")
#: the trace's columns and the request columns the kernel writes in place
Requests = namedtuple("Requests", "t d model start finish worker batch outcome shed")
#: per model its deadline queue (``common.queues``: slots ``[base[m], base[m+1])``, live ``[h[m], e[m])``)
#: and, in the same slots, the times of its admitted arrivals (λ counts ``[rate_lo, n_arrived)`` of them)
Queues = namedtuple("Queues", "base h e d r arrived")
#: the scheduler clock (``common``: its state ``s`` and constants)
Clock = namedtuple("Clock", "s decision_ns per_request_ns arrival_ns active admit_on max_lag_ns chunk")


def model_dtype(max_batch: int, buckets: int) -> np.dtype:
    """Per model: the policy's ℓ(b) (its group's first worker's table) and §4.3's β (s), λ's arrivals, its
    first arrival, its SLO at its latest arrival (the target batch's budget), its timer (−1: none) and the
    timer's sequence, and the authors' rate meter (``BucketMeter``): its non-empty buckets as a ring of
    ``buckets`` slots from ``meter_head``, ``meter_n`` of them."""
    scalars = ("n_arrived", "rate_lo", "first", "slo", "timer_at", "timer_seq", "meter_head", "meter_n",
               "meter_total", "meter_sumsq")
    return np.dtype([("lat", np.int64, (max_batch + 1,)), ("beta", np.float64)] + [(f, np.int64) for f in scalars]
                    + [("bucket", np.int64, (buckets,)), ("bucket_count", np.int64, (buckets,))])


#: per worker: its index, hardware, last completion (the engine's), ``free_at`` (the policy's), running batch
#: (start, end, id), busy time, idle
WORKER = np.dtype([(f, np.int64) for f in ("index", "hw", "free", "free_at", "start", "end", "busy", "bid")]
                  + [("idle", np.bool_)])


@njit(cache=True, inline='always')
def _fit(lat_m, dd, top):
    """Largest b ≤ ``top`` with ℓ(b) ≤ ``dd`` (``Symphony._fit`` with g = now and zero delays)."""
    return bisect_right(lat_m, dd, 1, top + 1) - 1


@njit(cache=True, inline='always')
def _meter_evict(mr, now, span):
    """``BucketMeter._evict`` on model record ``mr``: drop the expired buckets; returns the current one."""
    cur, size = now // span, len(mr.bucket)
    while mr.meter_n > 0 and mr.bucket[mr.meter_head] <= cur - size:
        c = mr.bucket_count[mr.meter_head]
        mr.meter_total -= c
        mr.meter_sumsq -= c * c
        mr.meter_head = (mr.meter_head + 1) % size
        mr.meter_n -= 1
    return cur


@njit(cache=True, inline='always')
def _meter_hit(mr, now, span):
    """``BucketMeter.hit``: one arrival at ``now``."""
    cur = _meter_evict(mr, now, span)
    last = (mr.meter_head + mr.meter_n - 1) % len(mr.bucket)
    if mr.meter_n > 0 and mr.bucket[last] == cur:
        c = mr.bucket_count[last]
        mr.bucket_count[last] = c + 1
        mr.meter_sumsq += 2 * c + 1
    else:
        slot = (mr.meter_head + mr.meter_n) % len(mr.bucket)
        mr.bucket[slot] = cur
        mr.bucket_count[slot] = 1
        mr.meter_n += 1
        mr.meter_sumsq += 1
    mr.meter_total += 1


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


@njit(cache=True, inline='always')
def _authors_early(p, mr, b, now):
    """``symphony_rules.early`` for the authors' ``target-batch`` and ``beta-lambda-authors`` rules, with
    ``BucketMeter.get``'s mean and sample std of the bucket rates."""
    k = min(_meter_evict(mr, now, p.span) + 1, len(mr.bucket))
    avg = mr.meter_total / k
    var = (mr.meter_sumsq - k * avg * avg) / (k - 1) if k > 1 else 0.0
    avg, std = avg * (1e6 / p.span), math.sqrt(max(0.0, var)) * (1e6 / p.span)
    lat_m = mr.lat
    target = _target_batch(lat_m, mr.slo, avg, std, p.maxb, p.xrps, p.xstd)
    if p.rule == R_TARGET_BATCH:
        return b >= target
    x = target if b != target else b + 1  # symphony_rules.secant_beta_s
    alpha = (lat_m[x] - lat_m[b]) / (x - b)
    return b >= (lat_m[x] - alpha * x) / 1e6 * avg


@njit(cache=True, inline='always')
def _early(p, q, mr, m, now, b):
    """Whether a candidate of ``b`` that can still grow is schedulable before its ``sched_at``, by the rule;
    λ as ``Symphony.rate``: the arrivals in (now − window, now], over min(window, now − first)."""
    if p.rule == R_FRONTRUN:
        return False
    if p.rule != R_TEXT:
        return _authors_early(p, mr, b, now)
    j, end, arrived = mr.rate_lo, mr.n_arrived, q.arrived
    while j < end and arrived[q.base[m] + j] <= now - p.window:
        j += 1
    mr.rate_lo = j
    span = min(p.window, now - mr.first) if mr.first >= 0 else 0
    return b >= mr.beta * ((end - j) * 1e6 / span if span > 0 else 0.0)


@njit(cache=True, inline='always')
def _window_prune(q, lat_m, maxb, m, now, r_outcome):
    """The ``window`` prune of ≥ 2 queued requests: drop the heads before the best window when the head's own
    batch is below ¾ of it; returns (heads dropped, the head's batch, −1 after a cut)."""
    h, qd = q.h[m], q.d
    n = q.e[m] - h
    lo, hi = h, h + n  # the first i with fit(d[i]) ≥ h + n − i (the best window starts there or just before)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _fit(lat_m, qd[mid] - now, maxb) >= h + n - mid:
            hi = mid
        else:
            lo = mid + 1
    head_b = _fit(lat_m, qd[h] - now, min(n, maxb))
    best_i, best_b = h, head_b
    for i in (lo - 1, lo):
        if h <= i < h + n:
            b = _fit(lat_m, qd[i] - now, min(h + n - i, maxb))
            if b > best_b:
                best_i, best_b = i, b
    if best_i > h and 4 * head_b < 3 * best_b:
        for x in range(h, best_i):
            r_outcome[q.r[x]] = DROPPED
        q_take(q.h, q.e, q.d, q.r, m, h, best_i - h)
        return best_i - h, -1
    return 0, head_b


@njit(cache=True, inline='always')
def _candidate(p, q, mr, m, now, r_outcome, counters):
    """(present, b, sched_at, schedulable) of model ``m``'s candidate after pruning (``Symphony.candidate``)."""
    lat_m = mr.lat
    dead = q_expire(q.h, q.e, q.d, q.r, m, now + lat_m[1], r_outcome, DROPPED)
    head_b = -1
    if p.window_prune and q.e[m] - q.h[m] > 1:  # (one request: the only window is the head's)
        cut, head_b = _window_prune(q, lat_m, p.maxb, m, now, r_outcome)
        dead += cut
    counters[C_DROPPED] += dead
    n = q.e[m] - q.h[m]
    if n == 0:
        return False, 0, 0, False
    dl = q.d[q.h[m]]
    b = head_b if head_b >= 0 else _fit(lat_m, dl - now, min(n, p.maxb))
    full = b >= p.maxb or b < n
    sched_at = dl - lat_m[b] if b >= p.maxb else dl - lat_m[b + 1]
    return True, b, sched_at, p.wc or full or now >= sched_at or _early(p, q, mr, m, now, b)


@njit(cache=True, inline='always')
def _next_timer(ms):
    """The model whose live timer fires next: earliest time, then the earliest set; −1 if none."""
    x = -1
    for m in range(len(ms)):
        at, xr = ms[m].timer_at, ms[x]
        if at >= 0 and (x < 0 or at < xr.timer_at or (at == xr.timer_at and ms[m].timer_seq < xr.timer_seq)):
            x = m
    return x


@njit(cache=True, inline='always')
def _set_timer(mr, at, counters):
    """``Symphony._set_model_timer``: keep an unchanged live timer, else cancel it and set ``at`` (−1: none);
    returns whether a timer changed."""
    if mr.timer_at >= 0:
        if mr.timer_at == at:
            return False
        mr.timer_at = -1
        counters[C_CANCELLED] += 1
    elif at < 0:
        return False
    if at >= 0:
        counters[C_TIMER_SEQ] += 1
        mr.timer_at, mr.timer_seq = at, counters[C_TIMER_SEQ]
    return True


@njit(cache=True, inline='always')
def _grant(p, q, ms, w, r_outcome, counters, now, m_lo, m_hi):
    """``Symphony._grant`` to the idle GPU freed earliest (then the lower index), over models [m_lo, m_hi):
    (worker, model, batch, whether a timer changed), model −1 when none is schedulable. A candidate not yet
    schedulable gets its timer at ``max(now + 1, sched_at)``, in model order as the reference sets them."""
    k = -1
    for x in range(len(w)):
        if w[x].idle and (k < 0 or w[x].free_at < w[k].free_at):
            k = x
    best, best_b, best_s = -1, 0, INF
    wait, wait_b, wait_s = -1, 0, INF  # the earliest waiting candidate (rank="all")
    changed, qh, qe = False, q.h, q.e
    for m in range(m_lo, m_hi):
        if qe[m] <= qh[m]:
            continue
        present, b, sched_at, ok = _candidate(p, q, ms[m], m, now, r_outcome, counters)
        if not present:
            changed |= _set_timer(ms[m], -1, counters)
        elif not ok:
            changed |= _set_timer(ms[m], max(now + 1, sched_at), counters)
            if sched_at < wait_s:
                wait, wait_b, wait_s = m, b, sched_at
        elif sched_at < best_s:
            best, best_b, best_s = m, b, sched_at
    if best >= 0:
        if p.rank_all and wait_s < best_s:
            best, best_b = wait, wait_b
        changed |= _set_timer(ms[best], -1, counters)
    return k, best, best_b, changed


@njit(cache=True, inline='always')
def _start(p, ck, req, q, wr, mr, m, b, now, i, nb):
    """``Resources.start(w, m, rids, now, at=now)``: batch ``nb`` of model ``m``'s ``b`` head requests on
    worker record ``wr`` (model record ``mr``), after the scheduler's decision and not before ``now``; returns
    (start, end)."""
    start = max(wr.free, now)
    if ck.active:
        start = max(start, decide(ck.s, req.t, req.shed, i, now, ck.decision_ns + ck.per_request_ns * b,
                                  ck.arrival_ns))
    end = start + p.lat[wr.hw, m, b]
    serve_rows(q.r, q.h[m], b, start, end, wr.index, nb, req)
    q_take(q.h, q.e, q.d, q.r, m, q.h[m], b)
    wr.bid, wr.start, wr.end, wr.free_at, wr.idle = nb, start, end, now + mr.lat[b], False
    return start, end


@njit(cache=True, inline='always')
def _admit(p, q, mr, m, i, dl, now):
    """``Symphony.on_arrival``'s bookkeeping for admitted request ``i`` of model ``m`` (record ``mr``), due at
    ``dl``: queued, counted for λ (and the authors' meter)."""
    q_push(q.base, q.h, q.e, q.d, q.r, m, dl, i)
    q.arrived[q.base[m] + mr.n_arrived] = now
    mr.n_arrived += 1
    if mr.first < 0:
        mr.first = now
    if p.rule >= R_TARGET_BATCH:
        _meter_hit(mr, now, p.span)
        mr.slo = dl - now


@njit(cache=True)
def run_symphony(p, req, q, ms, w, ck, counters):
    """One group's Symphony run: writes the request and worker columns in place; returns the batch log."""
    n, t = len(req.t), req.t
    blog = np.empty((B_COLS, 1024), np.int64)
    nb, n_idle, i, k, x = 0, len(w), 0, -1, -1
    dirty_w = dirty_t = True
    cend = first_chunk_end(0, 0, ck.chunk)
    while True:
        if dirty_w:
            k, dirty_w = next_completion(w.bid, w.end), False
        if dirty_t:
            x, dirty_t = _next_timer(ms), False
        ce = w[k].end if k >= 0 else INF
        te = ms[x].timer_at if x >= 0 else INF
        ta = t[i] if i < n else INF
        arriving = False
        m_lo, m_hi = 0, len(ms)  # on a completion or a timer every model is looked at
        if k >= 0 and ce <= te and ce <= ta:  # a completion (Symphony.on_completion): the GPU is idle
            wr = w[k]
            now = ce
            wr.busy += now - wr.start
            wr.bid, wr.free, wr.free_at, wr.idle = NONE, now, now, True
            n_idle += 1
            dirty_w = True
        elif x >= 0 and te <= ta:  # a model timer fires (Symphony.on_timer)
            now = te
            ms[x].timer_at = -1
            dirty_t = True
        elif i < n:  # an arrival (Symphony.on_arrival): only its model, every model under rank="all"
            now = ta
            if not arrive(ck.s, now, ck.admit_on, ck.arrival_ns, ck.max_lag_ns):
                i, cend = shed_request(ck.s, req.shed, req.outcome, i, cend, 0, ck.chunk, n, ck.arrival_ns, DROPPED)
                continue
            m = req.model[i]
            _admit(p, q, ms[m], m, i, req.d[i], now)
            i += 1
            arriving = True
            if not p.rank_all:
                m_lo, m_hi = m, m + 1
        else:
            break
        while n_idle > 0:  # Symphony._dispatch: idle GPUs take candidates while one is taken
            kk, best, b, changed = _grant(p, q, ms, w, req.outcome, counters, now, m_lo, m_hi)
            dirty_t |= changed
            if best < 0:
                break
            start, end = _start(p, ck, req, q, w[kk], ms[best], best, b, now, i, nb)
            blog = log_batch(blog, nb, kk, best, b, start, end)
            counters[C_BATCHES] += 1
            nb += 1
            n_idle -= 1
            dirty_w = True
        if arriving:
            cend = chunk_end(ck.s, i, cend, 0, ck.chunk, n, ck.arrival_ns)
    finish(req.outcome, DROPPED)
    return blog[:, :nb].copy()


def run_group(params: tuple, make_policy, runtime, max_batch: int, common: tuple, lat: np.ndarray,
              w_hw: np.ndarray, t: np.ndarray, d: np.ndarray, m: np.ndarray, out: tuple) -> tuple:
    """One group's run (the ``whole`` mode, :mod:`.whole`): ``params`` = (the policy's config, whether it is
    work-conserving, the rule's index in ``symphony_rules.RULES``, the rate meter's (span µs, buckets) and the
    estimator's (XRPS, XSTD)); the policy's constants as ``Symphony.__init__`` computes them, then the
    kernel; returns (batch log, w_busy, w_waste, shed count, the policy's counters as a dict)."""
    config, work_conserving, rule, (span, buckets, xrps, xstd) = params
    n_models, n_workers = lat.shape[1], len(w_hw)
    beta = np.array([max(0.0, (2 * row[1] - row[2]) / 1e6) if max_batch > 1 else row[1] / 1e6
                     for row in runtime.lat[int(w_hw[0])]], np.float64)
    policy = Policy(lat, max_batch, max(1, int(round(config.rate_window_ms * 1000))), work_conserving, rule,
                    config.prune == "window", config.rank == "all", span, xrps, xstd)
    r_start, r_finish, r_worker, r_batch, r_outcome, _, shed = out
    req = Requests(t, d, m, r_start, r_finish, r_worker, r_batch, r_outcome, shed)
    models = np.zeros(n_models, model_dtype(max_batch, buckets))
    models["lat"], models["beta"] = lat[w_hw[0], :, :max_batch + 1], beta
    models["first"] = models["timer_at"] = -1
    workers = np.zeros(n_workers, WORKER)
    workers["index"], workers["hw"], workers["bid"], workers["idle"] = np.arange(n_workers), w_hw, NONE, True
    clock = Clock(np.zeros(4, np.int64), *common)
    counters = np.zeros(len(COUNTERS) + 1, np.int64)
    blog = run_symphony(policy, req, Queues(*queues(m, n_models), np.empty(len(t), np.int64)), models, workers,
                        clock, counters)
    return blog, workers["busy"].copy(), np.zeros(n_workers, np.int64), clock.s[S_SHED], \
        dict(zip(COUNTERS, counters[:len(COUNTERS)].tolist()))

from shepherd.core.engine import outcomes  # noqa: E402  (with common.py, keys this module's JIT cache)
from shepherd.core.engine.fast import common as fast_common, jitcache  # noqa: E402

jitcache.refresh(__name__, fast_common, outcomes)
