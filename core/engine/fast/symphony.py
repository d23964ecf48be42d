"""Symphony's compiled fast path (Symphony §4.3, Appendix C): one serving group's reference run, over arrays.

Same outcomes as ``core/policies/symphony.py`` on the reference engine — every request, batch and worker
column, the shed requests and the policy's counters (``tests/test_engine_fast.py``) — for ``symphony`` and
``symphony-wc`` with zero control/data delays, autoscaling off, one serving group (any hardware mix: decisions
read the first worker's ℓ(b)), any ``rule``, ``prune``, ``rank`` and ``rate_window_ms``, overhead mode ``model``
or ``none``. With zero delays no GPU is granted a batch ahead (Appendix C ``set_gpu_timer``): an idle GPU's
``free_at`` is its last completion (``g = now``). Autoscaling reads the recorder during the run, several groups
share one clock: those runs stay on the reference engine (the policy's ``FastPath``).

The expiry cutoff, the candidate's fit and sched_at, the window prune, the early rules (the rate meter, the target
batch, the secant β, the window's λ), when a candidate goes or retries, which GPU is granted and ``rank="all"`` are
the policy's own rules (:mod:`shepherd.core.rules.symphony`), compiled here; each helper names the part of
``Symphony`` it mirrors over the kernel's queues and records (the policy's are Python lists and objects, which
numba cannot take). At equal times the clock (:mod:`..clock`) takes completions in batch order, then timers in
the order set (a cancelled one never fires), then arrivals. :mod:`.common`: the scheduler clock, admission
control, the queues, the batch log. Per model and per worker the state is one structured array
(:func:`model_dtype`, :data:`WORKER`): a namedtuple handed to an inlined helper costs a refcount per member.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit
from numba.extending import register_jitable

from shepherd.core.engine.fast.common import (B_COLS, INF, NONE, S_SHED, Window, arrive, chunk_end, compiled,
                                              decide, finish, first_chunk_end, log_batch, next_completion, q_expire,
                                              q_push, q_take, queues, record, serve_rows, shed_request)
from shepherd.core.engine.outcomes import DROPPED
from shepherd.core.rules import symphony as rules

#: the policy's counters (``Symphony.counters``); the kernel's array has one more slot, the timer sequence
COUNTERS = ("batches", "dropped_pruned", "stale_timer_fired", "timers_cancelled", "booked_ahead")
C_BATCHES, C_DROPPED, C_CANCELLED, C_TIMER_SEQ = 0, 1, 3, len(COUNTERS)
#: the schedulability rules, in the order of ``symphony_rules.RULES`` (the policy passes the index)
R_TEXT, R_TARGET_BATCH = 0, 2

#: the policy's constants (``Symphony.__init__``; ``span``, ``xrps``, ``xstd``: ``symphony_rules``'s meter, estimator)
Policy = namedtuple("Policy", "lat maxb window wc rule window_prune rank_all span xrps xstd")
#: per model its deadline queue (``common.queues``) and, in the same slots, its admitted arrivals' times
Queues = namedtuple("Queues", "base h e d r arrived")
#: the scheduler clock (``common``: its state ``s`` and constants)
Clock = namedtuple("Clock", "s decision_ns per_request_ns arrival_ns active admit_on max_lag_ns chunk")


def model_dtype(max_batch: int, buckets: int) -> np.dtype:
    """Per model: ℓ(b) on the group's first worker, β (s), λ's arrivals (``[rate_lo, n_arrived)`` in the window),
    the SLO at the latest arrival, the live timer (−1: none) and its sequence, and the authors' rate meter
    (``BucketMeter``: its state and ring of buckets, :func:`shepherd.core.rules.symphony.meter_hit`)."""
    scalars = "n_arrived rate_lo slo timer_at timer_seq mono".split()
    return np.dtype([("lat", np.int64, (max_batch + 1,)), ("beta", np.float64)] + [(f, np.int64) for f in scalars]
                    + [("meter", np.int64, (4,)), ("bucket", np.int64, (buckets,)), ("bucket_count", np.int64, (buckets,))])


#: per worker: hardware, last completion (the policy's ``free_at`` while idle), running batch (start, end, id;
#: ``NONE``: idle), busy time
WORKER = record("hw free start end bid busy")


#: the policy's own rules (:mod:`shepherd.core.rules.symphony`), compiled here
(_early_rule, _meter_get, _meter_hit, _window_lo, _window_rate, _fit, _frontrun, _window_start, _cutoff, _goes_now,
 _retry_at, _earlier_gpu, _prefers_waiting) = compiled(
    rules.early, rules.meter_get, rules.meter_hit, rules.window_lo, rules.window_rate, rules.fit, rules.frontrun,
    rules.window_start, rules.cutoff, rules.goes_now, rules.retry_at, rules.earlier_gpu, rules.prefers_waiting)
for _called in (rules.fit, rules.meter_evict, rules.meter_rates, rules.secant_beta_s, rules.target_batch):  # rules call them
    register_jitable(_called)


@njit(cache=True, inline='always')
def _early(p, q, mr, m, now, b):
    """``symphony_rules.early`` (the rule compiled) on the kernel's λ or rate meter: may a candidate of ``b``
    that can still grow go before its ``sched_at``?"""
    lam, avg, std = 0.0, 0.0, 0.0
    if p.rule == R_TEXT:  # λ as Symphony.rate: the arrivals in (now − window, now], over min(window, now − first)
        base, end = q.base[m], mr.n_arrived
        j = mr.rate_lo = _window_lo(q.arrived, base + mr.rate_lo, base + end, now, p.window) - base
        lam = _window_rate(end - j, p.window, now - q.arrived[base] if end > 0 else 0)
    elif p.rule >= R_TARGET_BATCH:
        avg, std = _meter_get(mr.meter, mr.bucket, mr.bucket_count, now, p.span)
    return _early_rule(p.rule, b, mr.beta, lam, avg, std, mr.lat, mr.slo, 0.0, p.maxb, p.xrps, p.xstd)


@njit(cache=True, inline='always')
def _candidate(p, q, mr, m, now, r_outcome, counters):
    """(present, b, sched_at, schedulable) of model ``m``'s candidate after pruning (``Symphony.candidate``)."""
    lat_m, n0 = mr.lat, q.e[m] - q.h[m]
    while q_expire(q.h, q.e, q.d, q.r, m, _cutoff(lat_m, lat_m, now, now, max(1, min(p.maxb, q.e[m] - q.h[m])),
                                                  mr.mono), r_outcome, DROPPED):
        pass  # Symphony.candidate's expiry (g = now, zero delays)
    h = q.h[m]
    cut, b = _window_start(q.d, h, q.e[m], lat_m, lat_m, now, now, p.maxb, mr.mono) \
        if p.window_prune and q.e[m] - h > 1 else (h, -1)
    for x in range(h, cut):  # prune="window" (Symphony.candidate)
        r_outcome[q.r[x]] = DROPPED
    q_take(q.h, q.e, q.d, q.r, m, h, cut - h)
    n = q.e[m] - q.h[m]
    counters[C_DROPPED] += n0 - n  # (the expiry and the prune take heads only)
    if n == 0:
        return False, 0, 0, False
    dl = q.d[q.h[m]]
    if cut > h or b < 0:  # else the head's own batch, as the prune found it
        b = _fit(lat_m, lat_m, dl, now, now, min(n, p.maxb), mr.mono)
    sched_at, full = _frontrun(lat_m, dl, b, n, p.maxb)
    return True, b, sched_at, _goes_now(p.wc, full, now, sched_at) or _early(p, q, mr, m, now, b)


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
    """``Symphony._set_model_timer`` (``at`` −1: none); returns whether the model's timer changed."""
    if mr.timer_at == at:
        return False
    if mr.timer_at >= 0:
        counters[C_CANCELLED] += 1
    mr.timer_at = at
    if at >= 0:
        counters[C_TIMER_SEQ] += 1
        mr.timer_seq = counters[C_TIMER_SEQ]
    return True


@njit(cache=True, inline='always')
def _grant(p, q, ms, w, r_outcome, counters, now, m_lo, m_hi):
    """``Symphony._grant`` to the idle GPU freed earliest (then the lower index), over models [m_lo, m_hi): (worker,
    model (−1: none schedulable), batch, whether a timer changed); the waiting ones' timers set in model order."""
    k = -1
    for x in range(len(w)):
        if w[x].bid == NONE and _earlier_gpu(w[x].free, x, w[k].free, k):
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
            changed |= _set_timer(ms[m], _retry_at(now, sched_at), counters)
            if sched_at < wait_s:
                wait, wait_b, wait_s = m, b, sched_at
        elif sched_at < best_s:
            best, best_b, best_s = m, b, sched_at
    if best >= 0:
        if _prefers_waiting(best_s, wait_s, p.rank_all):
            best, best_b = wait, wait_b
        changed |= _set_timer(ms[best], -1, counters)
    return k, best, best_b, changed


@njit(cache=True, inline='always')
def _start(p, ck, req, q, w, k, m, b, now, i, nb):
    """``Resources.start(w, m, rids, now, at=now)`` once the scheduler's decision is issued: batch ``nb`` of model
    ``m``'s ``b`` head requests on idle worker ``k``; returns (start, end)."""
    cost = ck.decision_ns + ck.per_request_ns * b
    start = max(now, decide(ck.s, req.t, req.shed, i, now, cost, ck.arrival_ns)) if ck.active else now
    end = start + p.lat[w[k].hw, m, b]
    serve_rows(q.r, q.h[m], b, start, end, k, nb, req)
    q_take(q.h, q.e, q.d, q.r, m, q.h[m], b)
    w[k].bid, w[k].start, w[k].end = nb, start, end
    return start, end


@njit(cache=True, inline='always')
def _admit(p, q, mr, m, i, dl, now):
    """``Symphony.on_arrival``'s bookkeeping for admitted request ``i`` of model ``m``, due at ``dl``: queued,
    its time kept for λ, and under the authors' rules counted by their meter (``BucketMeter.hit``)."""
    q_push(q.base, q.h, q.e, q.d, q.r, m, dl, i)
    q.arrived[q.base[m] + mr.n_arrived] = now
    mr.n_arrived += 1
    if p.rule >= R_TARGET_BATCH:
        mr.slo = dl - now
        _meter_hit(mr.meter, mr.bucket, mr.bucket_count, now, p.span)


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
        now = min(ce, te, t[i] if i < n else INF)
        if now == INF:
            break
        arriving = False
        m_lo, m_hi = 0, len(ms)  # on a completion or a timer every model is looked at
        if ce == now:  # a completion (Symphony.on_completion): the GPU is idle
            w[k].busy += now - w[k].start
            w[k].bid, w[k].free = NONE, now
            n_idle += 1
            dirty_w = True
        elif te == now:  # a model timer fires (Symphony.on_timer)
            ms[x].timer_at = -1
            dirty_t = True
        else:  # an arrival (Symphony.on_arrival): only its model, every model under rank="all"
            if not arrive(ck.s, now, ck.admit_on, ck.arrival_ns, ck.max_lag_ns):
                i, cend = shed_request(ck.s, req.shed, req.outcome, i, cend, 0, ck.chunk, n, ck.arrival_ns, DROPPED)
                continue
            m = req.model[i]
            _admit(p, q, ms[m], m, i, req.d[i], now)
            i += 1
            arriving = True
            if not p.rank_all:
                m_lo, m_hi = m, m + 1
        while n_idle > 0:  # Symphony._dispatch: idle GPUs take candidates while one is taken
            kk, best, b, changed = _grant(p, q, ms, w, req.outcome, counters, now, m_lo, m_hi)
            dirty_t |= changed
            if best < 0:
                break
            start, end = _start(p, ck, req, q, w, kk, best, b, now, i, nb)
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
    """One group's run (:mod:`.whole`): the constants of the policy object as the reference builds it
    (``make_policy(0)``) and, from ``FastPath.params``, the rule's index and the authors' meter and estimator."""
    rule, (span, buckets, xrps, xstd) = params
    pol, n_models, n_workers = make_policy(0), lat.shape[1], len(w_hw)
    policy = Policy(lat, max_batch, pol.window, pol.work_conserving, rule, pol.window_prune, pol.rank_all, span,
                    xrps, xstd)
    req = Window(t, d, m, *out)  # the trace's columns and the request columns the kernel writes in place
    models = np.zeros(n_models, model_dtype(max_batch, buckets))
    models["lat"], models["beta"] = lat[w_hw[0], :, :max_batch + 1], pol.beta_s
    models["mono"] = pol.mono  # the policy's own table
    models["timer_at"] = -1
    workers = np.zeros(n_workers, WORKER)
    workers["hw"], workers["bid"] = w_hw, NONE
    clock = Clock(np.zeros(4, np.int64), *common)
    counters = np.zeros(len(COUNTERS) + 1, np.int64)
    blog = run_symphony(policy, req, Queues(*queues(m, n_models), np.empty(len(t), np.int64)), models, workers,
                        clock, counters)
    return blog, workers["busy"].copy(), np.zeros(n_workers, np.int64), clock.s[S_SHED], \
        dict(zip(COUNTERS, counters[:len(COUNTERS)].tolist()))

from shepherd.core.engine.fast import jitcache  # noqa: E402  (what it imports keys its JIT cache)

jitcache.refresh(__name__)
