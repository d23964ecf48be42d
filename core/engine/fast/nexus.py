"""Nexus's compiled fast path (Shepherd §7, Symphony §2.2 / §3.3, Nexus §6.1): one serving group's reference
run, over arrays.

Same outcomes as ``core/policies/nexus.py`` on the reference engine — per request outcome, worker, batch,
start and finish, per batch every column, per worker busy time, the shed requests
(``tests/test_engine_fast_nexus.py``) — for any ``epoch_s``, ``peak_window_s``, ``provision``,
``frontends`` (K ≥ 1) and ``spare``, overhead mode ``model`` or ``none``, any hardware mix in the group
(plans and drops on the group's first worker's table, as the policy does; a batch runs for its own
worker's ℓ(b)), one serving group: its epoch and duty-cycle timers are not in the clock replay of
:mod:`.replay` (a timer's place among other groups' equal-time events), so several groups run on the
reference engine (``why_not`` in :mod:`shepherd.core.engine.fast`).

**Planning stays in Python**, once per epoch, not per request: the policy object is built as the
reference builds it (its constructor draws the admission coins — and, with K > 1 frontends, the seed of
their generator — from the run's generator, in the reference's order), and its own ``_plan`` (squishy bin
packing, the admitted fraction's bisection, ``spread``) and ``layout`` give every epoch's duty cycles,
(session, batch) slots, allocations, shares and token buckets; those are flattened into arrays
(:func:`run_group`). Planning does not depend on the run (it reads the trace's peaks and the coins), so
every epoch is planned before the kernel starts.

**The kernel** re-enacts the rest, per request, without Python objects:

* the clock (:mod:`..clock`): at equal times completions (in batch order), then timers (in the order they
  were set: the epoch timer, and per worker the end of its duty cycle — the policy never cancels one, a
  stale one still fires and re-dispatches an idle worker), then arrivals (in trace order); the first
  epoch's configuration is the policy's ``on_start`` (a timer at 0 set first, which is the same order);
* the policy (whose docstring gives the reasons): the admission coin against the epoch's factor s, the
  session's token bucket, the frontends' smooth weighted round-robin (with K > 1 frontends a frontend
  drawn per request by ``random.Random.randrange`` — the Mersenne Twister re-implemented here on the
  generator's own state, :func:`mt_next`, checked draw for draw against CPython's in the tests — and each
  frontend's router phases drawn at every configuration), the per-slot FIFO queues, a backend's
  round-robin over its slots within its duty cycle (heads that cannot finish in the batch dropped, each
  slot at most once per cycle, a wake-up at the cycle's end), and at an epoch boundary the queued
  requests re-routed in (deadline, id) order or dropped, then the idle workers dispatched lowest first;
* the scheduler clock and admission control, the batch log, the completion order: :mod:`.common`.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numba import njit

from shepherd.core.engine.fast.common import (B_COLS, INF, NONE, S_SHED, arrive, at_chunk_end, decide, finish,
                                              log_batch, next_completion, ready_us, shed_arrival)
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

MT_N = 624  #: words of the Mersenne Twister's state (CPython's ``random``)


# ---------------------------------------------------------------------- CPython's random, on its own state


@njit(cache=True)
def _mt_twist(mt):
    for k in range(MT_N):
        y = (mt[k] & 0x80000000) | (mt[(k + 1) % MT_N] & 0x7fffffff)
        v = mt[(k + 397) % MT_N] ^ (y >> 1)
        if y & 1:
            v ^= 0x9908b0df
        mt[k] = v


@njit(cache=True, inline='always')
def mt_next(mt, pos):
    """The next 32-bit output of MT19937 (``genrand_uint32`` of CPython's ``_randommodule.c``); ``mt`` holds
    ``random.getstate()[1][:624]``, ``pos[0]`` its index."""
    if pos[0] >= MT_N:
        _mt_twist(mt)
        pos[0] = 0
    y = mt[pos[0]]
    pos[0] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9d2c5680
    y ^= (y << 15) & 0xefc60000
    y ^= y >> 18
    return y


@njit(cache=True, inline='always')
def mt_random(mt, pos):
    """``random.random()``: 53 bits from two outputs."""
    a = mt_next(mt, pos) >> 5
    b = mt_next(mt, pos) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@njit(cache=True, inline='always')
def mt_below(mt, pos, n):
    """``random.randrange(n)`` for 1 ≤ n < 2³² (``_randbelow_with_getrandbits``: k = n.bit_length() bits,
    redrawn while ≥ n)."""
    k = 0
    while (n >> k) > 0:
        k += 1
    r = mt_next(mt, pos) >> (32 - k)
    while r >= n:
        r = mt_next(mt, pos) >> (32 - k)
    return r


# ---------------------------------------------------------------------- timers: (at, set order, payload)


@njit(cache=True)
def t_push(h, size, at, seq, payload):
    """Push a timer onto the heap ``h`` (rows: time, set order, payload; it doubles when full); returns it."""
    if size == h.shape[1]:
        grown = np.empty((3, 2 * size + 8), np.int64)
        grown[:, :size] = h[:, :size]
        h = grown
    i = size
    h[0, i], h[1, i], h[2, i] = at, seq, payload
    while i > 0:
        p = (i - 1) // 2
        if h[0, i] < h[0, p] or (h[0, i] == h[0, p] and h[1, i] < h[1, p]):
            for c in range(3):
                h[c, i], h[c, p] = h[c, p], h[c, i]
            i = p
        else:
            break
    return h


@njit(cache=True)
def t_pop(h, size):
    """Remove the earliest timer (``h[:, 0]``, read it first) from a heap of ``size``."""
    size -= 1
    for c in range(3):
        h[c, 0] = h[c, size]
    i = 0
    while True:
        lft, rgt, m = 2 * i + 1, 2 * i + 2, i
        if lft < size and (h[0, lft] < h[0, m] or (h[0, lft] == h[0, m] and h[1, lft] < h[1, m])):
            m = lft
        if rgt < size and (h[0, rgt] < h[0, m] or (h[0, rgt] == h[0, m] and h[1, rgt] < h[1, m])):
            m = rgt
        if m == i:
            break
        for c in range(3):
            h[c, i], h[c, m] = h[c, m], h[c, i]
        i = m


# ---------------------------------------------------------------------- the policy's steps


@njit(cache=True, inline='always')
def _route(fe, mt, mtpos, cur, x, nx, ent_w, tot):
    """``Nexus._enqueue``'s pick: among the session's allocations ``[x, x + nx)``, the one its smooth weighted
    round-robin picks (``SmoothWeightedRoundRobin.pick``: add every weight, take the first maximum, subtract
    the total) — a frontend's own, drawn per request (``randrange``) when there are several."""
    f = mt_below(mt, mtpos, fe) if fe > 1 else 0
    if nx == 1:
        return x
    best = x
    for y in range(x, x + nx):
        cur[f, y] += ent_w[y]
        if cur[f, y] > cur[f, best]:
            best = y
    cur[f, best] -= tot
    return best


@njit(cache=True)
def run_nexus(t, d, sess, coin, lat, w_hw, lat0, epoch_us, last_epoch, fe, mt, mtpos, EP, l_cap, l_model,
              decision_ns, per_request_ns, arrival_ns, active, admit_on, max_lag_ns, chunk,
              r_start, r_finish, r_worker, r_batch, r_outcome, shed):
    """One group's Nexus run over the whole trace (``sess``: each request's session, ``coin``: its admission
    coin); writes the request columns in place and returns (batch log, w_busy, w_waste, shed count).
    ``EP`` holds the epochs' plans (:func:`plans`); ``l_cap`` / ``l_model`` every epoch's slots.

    Each event names the workers to dispatch (``Nexus._dispatch``), which one block of the loop then does in
    order: a completion its worker, a wake-up its worker if idle, an arrival its allocation's worker if idle,
    an epoch every idle worker, lowest first. Every array is a local of this function: a helper handed
    tuples of arrays pays an atomic reference count per array per call (measured: ~75 % of the loop)."""
    n = len(t)
    n_workers = len(w_hw)
    ep_duty, ep_sb, ep_ns, ep_scale, ep_planned, ep_rate, ep_depth = EP[0], EP[1], EP[2], EP[3], EP[4], EP[5], EP[6]
    eb, ne, ent_slot, ent_worker, ent_w, total, order, n_order = EP[7], EP[8], EP[9], EP[10], EP[11], EP[12], \
        EP[13], EP[14]
    n_sess = ep_planned.shape[1]
    rr = np.zeros(n_workers, np.int64)
    duty = np.zeros(n_workers, np.int64)
    cyc = np.zeros(n_workers, np.int64)  # when the worker's duty cycle ends
    nserved = np.zeros(n_workers, np.int64)  # slots served in it
    wake = np.full(n_workers, -1, np.int64)
    idle = np.ones(n_workers, np.bool_)
    w_free = np.zeros(n_workers, np.int64)
    w_start = np.zeros(n_workers, np.int64)
    w_end = np.zeros(n_workers, np.int64)
    w_bid = np.full(n_workers, NONE, np.int64)
    w_busy = np.zeros(n_workers, np.int64)
    sb = np.zeros(n_workers, np.int64)  # the worker's slots this epoch: [sb, sb + ns)
    ns = np.zeros(n_workers, np.int64)
    dq = np.empty(n_workers, np.int64)  # the workers an event dispatches, in order
    n_slots = len(l_cap)
    l_head = np.full(n_slots, -1, np.int64)  # per slot a FIFO of requests linked by ``nxt``
    l_tail = np.full(n_slots, -1, np.int64)
    l_len = np.zeros(n_slots, np.int64)
    l_served = np.zeros(n_slots, np.bool_)  # started in its worker's current duty cycle
    nxt = np.empty(n, np.int64)
    qbuf = np.empty(n, np.int64)
    cur = np.zeros((fe, len(ent_w)), np.float64)  # per frontend, every allocation's round-robin state
    tok = np.zeros(n_sess, np.float64)  # token buckets: tokens, last refill
    t_last = np.zeros(n_sess, np.int64)
    s = np.zeros(4, np.int64)  # the scheduler clock (.common)
    blog = np.empty((B_COLS, 1024), np.int64)
    nb = 0
    heap = np.empty((3, 4 * n_workers + 8), np.int64)
    heap = t_push(heap, 0, 0, 0, 0)  # on_start: the first epoch's configuration, before anything at 0
    hsize, hseq = 1, 0
    e = -1
    scale = 0.0
    i = 0
    k = -1
    dirty = True
    while True:
        if dirty:
            k = next_completion(w_bid, w_end)
            dirty = False
        ce = w_end[k] if k >= 0 else INF
        te = heap[0, 0] if hsize > 0 else INF
        ta = t[i] if i < n else INF
        nd = 0
        arriving = False
        next_epoch = -1
        if k >= 0 and ce <= te and ce <= ta:
            # ---- a completion (Nexus.on_completion)
            now = ce
            w_busy[k] += now - w_start[k]
            ua, uk = 0, w_bid[k]
            w_bid[k] = NONE
            w_free[k] = now
            dirty = True
            dq[0] = k
            nd = 1
        elif hsize > 0 and te <= ta:
            # ---- a timer (Nexus.on_timer)
            now = te
            ua, uk = 3, now
            p = heap[2, 0]
            t_pop(heap, hsize)
            hsize -= 1
            if p < 0:  # a worker's duty cycle ended
                w = -p - 1
                if wake[w] == now:
                    wake[w] = -1
                if idle[w]:
                    dq[0] = w
                    nd = 1
            else:
                # ---- an epoch begins (Nexus._configure): the requests queued under the old plan, in
                # (deadline, id) order
                nq = 0
                if e >= 0:
                    for w in range(n_workers):
                        for sl in range(sb[w], sb[w] + ns[w]):
                            r = l_head[sl]
                            for _ in range(l_len[sl]):
                                qbuf[nq] = r
                                nq += 1
                                r = nxt[r]
                queued = np.sort(qbuf[:nq])
                queued = queued[np.argsort(d[queued], kind="mergesort")]
                e = p
                for w in range(n_workers):
                    sb[w] = ep_sb[e, w]
                    ns[w] = ep_ns[e, w]
                    duty[w] = ep_duty[e, w]
                    rr[w] = 0
                    cyc[w] = 0
                    nserved[w] = 0
                scale = ep_scale[e]
                for ss in range(n_sess):
                    if ep_planned[e, ss]:
                        tok[ss] = ep_depth[e, ss]
                        t_last[ss] = now
                if fe > 1:  # each frontend's routers start at a random phase
                    for f in range(fe):
                        for j in range(n_order[e]):
                            ss = order[e, j]
                            x0 = eb[e, ss]
                            nx = ne[e, ss]
                            for x in range(x0, x0 + nx):
                                cur[f, x] = ent_w[x] * nx * mt_random(mt, mtpos)
                for r in queued:
                    ss = sess[r]
                    if ep_planned[e, ss]:
                        sl = ent_slot[_route(fe, mt, mtpos, cur, eb[e, ss], ne[e, ss], ent_w, total[e, ss])]
                        nxt[r] = -1
                        if l_len[sl] == 0:
                            l_head[sl] = r
                        else:
                            nxt[l_tail[sl]] = r
                        l_tail[sl] = r
                        l_len[sl] += 1
                    else:
                        r_outcome[r] = DROPPED
                for w in range(n_workers):
                    if idle[w]:
                        dq[nd] = w
                        nd += 1
                if e < last_epoch:
                    next_epoch = e + 1
        elif i < n:
            # ---- an arrival (Nexus.on_arrival): coin, token bucket, a frontend's round-robin, the backend
            now = ta
            if not arrive(s, now, admit_on, arrival_ns, max_lag_ns):
                i = shed_arrival(s, shed, r_outcome, i, 0, chunk, n, arrival_ns, DROPPED)
                continue
            ua, uk = 1, now
            arriving = True
            r = i
            i += 1
            ss = sess[r]
            if not ep_planned[e, ss] or coin[r] >= scale:
                r_outcome[r] = DROPPED
            else:
                tokens = tok[ss] + (now - t_last[ss]) * ep_rate[e, ss]
                depth = ep_depth[e, ss]
                tok[ss] = tokens if tokens < depth else depth
                t_last[ss] = now
                if tok[ss] < 1.0:
                    r_outcome[r] = DROPPED
                else:
                    tok[ss] -= 1.0
                    x = _route(fe, mt, mtpos, cur, eb[e, ss], ne[e, ss], ent_w, total[e, ss])
                    sl = ent_slot[x]
                    nxt[r] = -1
                    if l_len[sl] == 0:
                        l_head[sl] = r
                    else:
                        nxt[l_tail[sl]] = r
                    l_tail[sl] = r
                    l_len[sl] += 1
                    w = ent_worker[x]
                    if idle[w]:
                        dq[0] = w
                        nd = 1
        else:
            break
        # ---- Nexus._dispatch, for each worker the event named: the next slot of its duty cycle with
        # requests (heads that cannot finish in the slot's batch dropped first), or idling — with a wake-up at
        # the cycle's end if it served a slot in the cycle
        for q in range(nd):
            kk = dq[q]
            ready = ready_us(s, t, shed, i, now, active, decision_ns, arrival_ns)
            nsl = ns[kk]
            b0 = sb[kk]
            if now >= cyc[kk]:
                cyc[kk] = now + duty[kk]
                for j in range(b0, b0 + nsl):
                    l_served[j] = False
                nserved[kk] = 0
            started = False
            for step in range(nsl):
                j = rr[kk] + step
                if j >= nsl:
                    j -= nsl
                sl = b0 + j
                if l_served[sl]:
                    continue
                cap = l_cap[sl]
                m = l_model[sl]
                while l_len[sl] > 0:
                    h = l_head[sl]
                    if d[h] < ready + lat0[m, cap if cap < l_len[sl] else l_len[sl]]:
                        r_outcome[h] = DROPPED
                        l_head[sl] = nxt[h]
                        l_len[sl] -= 1
                    else:
                        break
                if l_len[sl] == 0:
                    continue
                b = cap if cap < l_len[sl] else l_len[sl]
                start = w_free[kk]
                if active:
                    disp = decide(s, t, shed, i, now, decision_ns + per_request_ns * b, arrival_ns)
                    if start < disp:
                        start = disp
                elif start < now:
                    start = now
                end = start + lat[w_hw[kk], m, b]
                blog = log_batch(blog, nb, kk, m, b, start, end, ua, uk)
                r = l_head[sl]
                for _ in range(b):
                    r_start[r] = start
                    r_finish[r] = end
                    r_worker[r] = kk
                    r_batch[r] = nb
                    r_outcome[r] = SERVED if d[r] >= end else LATE
                    r = nxt[r]
                l_head[sl] = r
                l_len[sl] -= b
                w_bid[kk] = nb
                w_start[kk] = start
                w_end[kk] = end
                nb += 1
                l_served[sl] = True
                nserved[kk] += 1
                rr[kk] = j + 1 if j + 1 < nsl else 0
                idle[kk] = False
                dirty = True
                started = True
                break
            if not started:
                idle[kk] = True
                if nserved[kk] > 0 and wake[kk] != cyc[kk] and cyc[kk] > now:
                    wake[kk] = cyc[kk]
                    hseq += 1
                    heap = t_push(heap, hsize, cyc[kk], hseq, -kk - 1)
                    hsize += 1
        if next_epoch >= 0:
            hseq += 1
            heap = t_push(heap, hsize, next_epoch * epoch_us, hseq, next_epoch)
            hsize += 1
        if arriving:
            at_chunk_end(s, i, 0, chunk, n, arrival_ns)
    finish(r_outcome, DROPPED)
    return blog[:, :nb].copy(), w_busy, np.zeros(n_workers, np.int64), s[S_SHED]


def plans(pol: Any) -> tuple:
    """Every epoch's plan as the policy object ``pol`` makes and lays it out (``Nexus._plan``,
    ``Nexus.layout``), flattened into the kernel's arrays: (last epoch, the per-epoch arrays ``EP``, every
    slot's batch cap and model). Slots and allocations get ids unique over the run (an epoch's are fresh)."""
    last = max(pol.peaks) if pol.peaks else 0
    n_epochs, n_workers, n_sess = last + 1, len(pol.workers), len(pol.stream_model)
    ep_duty = np.zeros((n_epochs, n_workers), np.int64)
    ep_sb = np.zeros((n_epochs, n_workers), np.int64)
    ep_ns = np.zeros((n_epochs, n_workers), np.int64)
    ep_scale = np.zeros(n_epochs, np.float64)
    ep_planned = np.zeros((n_epochs, n_sess), np.bool_)
    ep_rate = np.zeros((n_epochs, n_sess), np.float64)
    ep_depth = np.zeros((n_epochs, n_sess), np.float64)
    eb = np.zeros((n_epochs, n_sess), np.int64)
    ne = np.zeros((n_epochs, n_sess), np.int64)
    total = np.zeros((n_epochs, n_sess), np.float64)
    order = np.zeros((n_epochs, n_sess), np.int64)
    n_order = np.zeros(n_epochs, np.int64)
    l_cap: list[int] = []
    l_model: list[int] = []
    ent_slot: list[int] = []
    ent_worker: list[int] = []
    ent_w: list[float] = []
    for e in range(n_epochs):
        plan, scale, planned = pol._plan(e)
        duty, slots, targets, weights, rates, _ = pol.layout(plan, planned)
        ep_duty[e] = duty
        ep_scale[e] = scale
        for w in range(n_workers):
            ep_sb[e, w], ep_ns[e, w] = len(l_cap), len(slots[w])
            for ss, cap in slots[w]:
                l_cap.append(cap)
                l_model.append(pol.stream_model[ss])
        for j, (ss, tg) in enumerate(targets.items()):
            order[e, j] = ss
            eb[e, ss], ne[e, ss] = len(ent_slot), len(tg)
            acc = 0.0
            for (w, slot), weight in zip(tg, weights[ss]):
                ent_slot.append(int(ep_sb[e, w]) + slot)
                ent_worker.append(w)
                ent_w.append(weight)
                acc += weight  # SmoothWeightedRoundRobin.total: summed in entry order
            total[e, ss] = acc
            rate, depth = rates[ss]
            ep_planned[e, ss], ep_rate[e, ss], ep_depth[e, ss] = True, rate, depth
        n_order[e] = len(targets)
    EP = (ep_duty, ep_sb, ep_ns, ep_scale, ep_planned, ep_rate, ep_depth, eb, ne,
          np.array(ent_slot, np.int64), np.array(ent_worker, np.int64), np.array(ent_w, np.float64), total,
          order, n_order)
    return last, EP, np.array(l_cap, np.int64), np.array(l_model, np.int64)


def run_group(config: Any, make_policy: Callable[[int], Any], runtime: Any, max_batch: int, common: tuple,
              lat: np.ndarray, w_hw: np.ndarray, t: np.ndarray, d: np.ndarray, m: np.ndarray, out: tuple) -> tuple:
    """One group's run (the ``whole`` mode, :mod:`.whole`): the policy object built as the reference builds it
    (``make_policy(0)``: its draws from the run's generator), its plans (:func:`plans`), then the kernel;
    returns (batch log, w_busy, w_waste, shed count, the policy's counters — Nexus keeps none)."""
    pol = make_policy(0)
    last, EP, l_cap, l_model = plans(pol)
    fe = config.frontends if pol.fe_rng is not None else 1
    if pol.fe_rng is not None:
        state = pol.fe_rng.getstate()[1]  # (624 words, index)
        mt, mtpos = np.array(state[:-1], np.int64), np.array([state[-1]], np.int64)
    else:
        mt, mtpos = np.zeros(1, np.int64), np.zeros(1, np.int64)
    lat0 = np.ascontiguousarray(lat[pol.hw])
    r_start, r_finish, r_worker, r_batch, r_outcome, _, shed = out
    sess = np.ascontiguousarray(pol._session, dtype=np.int64)
    coin = np.ascontiguousarray(pol.coin[:len(t)])
    blog, w_busy, w_waste, n_shed = run_nexus(
        t, d, sess, coin, lat, w_hw, lat0, pol.epoch_us, last, fe, mt, mtpos, EP, l_cap, l_model, *common,
        r_start, r_finish, r_worker, r_batch, r_outcome, shed)
    return blog, w_busy, w_waste, n_shed, {}

from shepherd.core.engine import outcomes  # noqa: E402  (with common.py, keys this module's JIT cache)
from shepherd.core.engine.fast import common as fast_common, jitcache  # noqa: E402

jitcache.refresh(__name__, fast_common, outcomes)
