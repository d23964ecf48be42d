"""PPipe's data plane, compiled (PPipe §5.4, Appendix A.3 Algorithms 1 and 2): the reference run, over arrays.

Same outcomes as ``core/policies/ppipe.py`` on the reference engine with ``EngineConfig(reserved="record")``
— per request outcome, worker, batch, start and finish, per batch every column, per worker busy time, and
the policy's counters (``probes``, ``dispatched``) — under the paper's rules and under each of the six
artifact rule switches of :class:`~shepherd.core.policies.ppipe.PPipeDataPlaneConfig` (any mix), ``wait`` on
or off, overhead mode ``none`` (the policy's default), one serving group (``tests/test_engine_fast_ppipe.py``).
``reserved="events"`` (every stage executed as an engine event that checks its reservation) and a
scheduler-overhead model run on the reference engine (``why_not`` in :mod:`shepherd.core.engine.fast` says so).

The rule switches (:mod:`shepherd.core.pipelines.rules`): (c) ``slot_receive``, (d) ``stage_servers`` and (f)
``transfer_round`` change only the pipelines' links and transfer times, which ``prepare_pipelines`` builds
and this kernel reads as they are; (a) ``uplink_score`` is :func:`_probe_scored` (``probe_scored``'s plain
scan, every stage's GPU found by ``earliestSlot``); (b) ``head_drop`` and (e) ``fill_wait`` are the policy's
branches of the same names in the loop.

What it re-enacts, and where the reference says it:

* the clock (:mod:`..clock`) with nothing but arrivals and timers (``record`` mode books no event): at equal
  times the timers first, in the order they were set, then the arrivals in trace order; a timer whose DNN
  is no longer waiting for that moment (``wait_until``) does nothing (the policy's ``on_timer``);
* Algorithm 1 (the policy's ``schedule``): step 1, the pipeline with the least waiting time at its planned
  batch size (strictly less: ties to the first in plan order); step 2, from that batch size down to 1 the
  first whose finish meets the head's deadline; no size works — drop the head and start over; fewer
  requests queued than the size — wait till the last moment (a timer at ``now + deadline − finish``) when
  ``wait`` is on and there is slack and this is not that moment, else send what is queued (probed again at
  that size); otherwise reserve and dispatch the first ``bs``. Arrivals that find their DNN waiting with
  fewer than the awaited batch queued only join the queue (the policy's documented shortcut). A DNN
  without a pipeline drops what it queues;
* Algorithm 2's ``probe`` as the plain scan in pool order (:func:`_probe`): a first-stage vGPU starts at
  ``max(now, its last reservation's end)`` (its reservations never leave a gap after ``now``:
  :mod:`shepherd.core.pipelines.reservations`), a later stage's at the earliest slot of its GPU after the
  transfer's earliest common slot on the previous server's uplink and its own server's downlink; the
  earliest start wins, ties to the first in pool order — the answer the reference's indexed shortcuts give
  (its docstring, ``tests/test_ppipe_probe_index.py``). ``reserve`` marks each interval in per-resource
  sorted arrays (appends, or inserts into gaps; intervals over by ``now`` are dropped when a resource
  needs room: queries never start before ``now``);
* the recorder's ``record`` mode (:meth:`~shepherd.core.engine.recorder.Recorder.record_path`): one batch
  row per stage in dispatch order, the requests' start, finish, worker and batch from the last stage,
  served iff the finish meets the deadline, each stage's time added to its vGPU's busy time; requests
  never dispatched end dropped.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

NEVER = np.int64(1) << 62
#: probe buffer fields, per stage: vGPU, GPU start, GPU time, uplink of the transfer in, downlink, its start, its time
P_W, P_START, P_LI, P_UP, P_DOWN, P_TS, P_LN = range(7)
#: what the kernel returns as its error: none, a reservation overlapping another, a slot of zero length
E_OK, E_OVERLAP, E_EMPTY = range(3)


@njit(cache=True, inline='always')
def _fit(IS, IE, ilo, ihi, last_end, busy_from, r, t, length):
    """``earliestSlot`` of one resource: the earliest ``s ≥ t`` at which ``r`` is free for ``length``."""
    last = last_end[r]
    if last <= t or length <= 0:
        return t
    if t >= busy_from[r]:  # inside the final gap-free block
        return last
    lo, hi = ilo[r], ihi[r]
    while lo < hi:  # the first interval ending after t
        mid = (lo + hi) >> 1
        if IE[r, mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    i, n = lo, ihi[r]
    while i < n and IS[r, i] < t + length:
        if IE[r, i] > t:
            t = IE[r, i]
        i += 1
    return t


@njit(cache=True, inline='always')
def _link_slot(IS, IE, ilo, ihi, last_end, busy_from, up, down, ts, ln):
    """The earliest start ≥ ``ts`` (``up`` free there) at which both links are free for ``ln``."""
    while True:
        s = _fit(IS, IE, ilo, ihi, last_end, busy_from, down, ts, ln)
        if s == ts:
            return ts
        ts = _fit(IS, IE, ilo, ihi, last_end, busy_from, up, s, ln)
        if ts == s:
            return ts


@njit(cache=True, inline='always')
def _probe(p, bs, now, buf, st_off, pool_off, c_w, c_down, c_up, lat, tin, IS, IE, ilo, ihi, last_end, busy_from):
    """Algorithm 2 ``probe(p, bs)`` at ``now`` into ``buf`` (per stage: the probe buffer fields); (finish, wait)."""
    s0 = st_off[p]
    li = lat[s0, bs]
    best, bw = NEVER, -1
    for c in range(pool_off[s0], pool_off[s0 + 1]):
        w = c_w[c]
        t = last_end[w]
        if t <= now:
            best, bw = now, c
            break
        if t < best:
            best, bw = t, c
    buf[P_W, 0], buf[P_START, 0], buf[P_LI, 0] = c_w[bw], best, li
    busy = li
    tg = best + li
    up = c_up[bw]
    for j in range(1, st_off[p + 1] - s0):
        s = s0 + j
        li = lat[s, bs]
        ln = tin[s, bs]
        busy += li + ln
        floor = tg + ln  # no GPU of the pool starts earlier
        best, bw, bts = NEVER, -1, 0
        up_busy = ln > 0 and last_end[up] > tg
        tu = _fit(IS, IE, ilo, ihi, last_end, busy_from, up, tg, ln) if up_busy else tg
        for c in range(pool_off[s], pool_off[s + 1]):
            down = c_down[c]
            if ln > 0 and (up_busy or last_end[down] > tg):
                ts = _link_slot(IS, IE, ilo, ihi, last_end, busy_from, up, down, tu, ln)
            else:
                ts = tg
            start = _fit(IS, IE, ilo, ihi, last_end, busy_from, c_w[c], ts + ln, li)
            if start < best:
                best, bw, bts = start, c, ts
                if start <= floor:
                    break
        buf[P_W, j], buf[P_START, j], buf[P_LI, j] = c_w[bw], best, li
        buf[P_UP, j], buf[P_DOWN, j], buf[P_TS, j], buf[P_LN, j] = up, c_down[bw], bts, ln
        tg = best + li
        up = c_up[bw]
    return tg, tg - now - busy


@njit(cache=True, inline='always')
def _probe_scored(p, bs, now, buf, st_off, pool_off, c_w, c_down, c_up, lat, tin, IS, IE, ilo, ihi, last_end,
                  busy_from):
    """Rule (a), ``uplink_score`` (``reservations.probe_scored``): the plain scan in pool order, a candidate of a
    non-last stage scored by the later of its finish and its server uplink's last reservation; ties to the
    first. Same buffer and answer as :func:`_probe`."""
    s0 = st_off[p]
    last_j = st_off[p + 1] - s0 - 1
    tg = now
    up = -1
    busy = 0
    for j in range(last_j + 1):
        s = s0 + j
        li = lat[s, bs]
        ln = tin[s, bs] if j else 0
        busy += li + ln
        best, bw, bts, bstart = NEVER, -1, 0, 0
        for c in range(pool_off[s], pool_off[s + 1]):
            down = c_down[c]
            if j and ln > 0 and (last_end[up] > tg or last_end[down] > tg):
                ts = _link_slot(IS, IE, ilo, ihi, last_end, busy_from, up, down,
                                _fit(IS, IE, ilo, ihi, last_end, busy_from, up, tg, ln), ln)
            else:
                ts = tg
            start = _fit(IS, IE, ilo, ihi, last_end, busy_from, c_w[c], ts + ln, li)
            score = start + li
            if j < last_j and last_end[c_up[c]] > score:
                score = last_end[c_up[c]]
            if score < best:
                best, bw, bts, bstart = score, c, ts, start
        buf[P_W, j], buf[P_START, j], buf[P_LI, j] = c_w[bw], bstart, li
        buf[P_UP, j], buf[P_DOWN, j], buf[P_TS, j], buf[P_LN, j] = up, c_down[bw], bts, ln
        tg = bstart + li
        up = c_up[bw]
    return tg, tg - now - busy


@njit(cache=True)  # (a call, not inlined: inlined at its seven call sites the kernel took ~85 s to compile)
def _probe_any(scored, p, bs, now, buf, st_off, pool_off, c_w, c_down, c_up, lat, tin, IS, IE, ilo, ihi, last_end,
               busy_from):
    """Algorithm 2's probe: the artifact's GPU score (rule (a)) or the paper's."""
    if scored:
        return _probe_scored(p, bs, now, buf, st_off, pool_off, c_w, c_down, c_up, lat, tin, IS, IE, ilo, ihi,
                             last_end, busy_from)
    return _probe(p, bs, now, buf, st_off, pool_off, c_w, c_down, c_up, lat, tin, IS, IE, ilo, ihi, last_end,
                  busy_from)


@njit(cache=True, inline='always')
def _timer_push(ht, hs, hm, nh, wake, seq, m):
    """Set DNN ``m``'s wake-up at ``wake`` (push order ``seq``) in the binary heap of timers (sift up from the
    end); returns the heap's new size."""
    k = nh
    while k > 0:
        par = (k - 1) >> 1
        if ht[par] > wake or (ht[par] == wake and hs[par] > seq):
            ht[k], hs[k], hm[k] = ht[par], hs[par], hm[par]
            k = par
        else:
            break
    ht[k], hs[k], hm[k] = wake, seq, m
    return nh + 1


@njit(cache=True, inline='always')
def _room(IS, IE, ilo, ihi, r, now, need):
    """Make room for ``need`` more intervals of ``r`` (drop those over by ``now``, move the rest to the front);
    False if there is not enough room even so."""
    cap = IS.shape[1]
    if ihi[r] + need <= cap:
        return True
    lo = ilo[r]
    while lo < ihi[r] and IE[r, lo] <= now:
        lo += 1
    k = ihi[r] - lo
    for i in range(k):
        IS[r, i] = IS[r, lo + i]
        IE[r, i] = IE[r, lo + i]
    ilo[r], ihi[r] = 0, k
    return k + need <= cap


@njit(cache=True, inline='always')
def _reserve(IS, IE, ilo, ihi, last_end, busy_from, r, start, length):
    """``markReserved(r, start, length)`` (room made beforehand); an error code."""
    if length <= 0:
        return E_OK
    end = start + length
    last = last_end[r]
    lo, hi = ilo[r], ihi[r]
    if start >= last:
        if start == last and hi > lo:  # right after the last interval: extend it (the same busy time)
            IE[r, hi - 1] = end
        else:
            IS[r, hi], IE[r, hi] = start, end
            ihi[r] = hi + 1
            if start > last:  # after a gap: the gap-free block restarts here
                busy_from[r] = start
        last_end[r] = end
        return E_OK
    a, b = lo, hi  # the first interval starting after start
    while a < b:
        mid = (a + b) >> 1
        if IS[r, mid] <= start:
            a = mid + 1
        else:
            b = mid
    if (a > lo and IE[r, a - 1] > start) or (a < hi and IS[r, a] < end):
        return E_OVERLAP
    for i in range(hi, a, -1):
        IS[r, i] = IS[r, i - 1]
        IE[r, i] = IE[r, i - 1]
    IS[r, a], IE[r, a] = start, end
    ihi[r] = hi + 1
    return E_OK


@njit(cache=True)
def run_ppipe(t, d, model, q_order, q_base, mp_off, mp_pipe, p_batch, st_off, pool_off, c_w, c_down, c_up, lat,
              tin, n_res, n_gpus, max_stages, wait, scored, head_drop, fill_wait, cap, r_start, r_finish, r_worker,
              r_batch, r_outcome):
    """The run (module docstring): fills the request columns; returns (batch log [5, rows]: worker, model, size,
    start, end; w_busy; [probes, dispatched]; error code, and the resource, start and length of the slot it
    concerns)."""
    n = len(t)
    n_models = len(mp_off) - 1
    IS = np.zeros((n_res, cap), np.int64)
    IE = np.zeros((n_res, cap), np.int64)
    ilo = np.zeros(n_res, np.int64)
    ihi = np.zeros(n_res, np.int64)
    last_end = np.zeros(n_res, np.int64)
    busy_from = np.zeros(n_res, np.int64)
    w_busy = np.zeros(n_gpus, np.int64)
    bufs = np.zeros((2, 7, max(max_stages, 1)), np.int64)
    qh = q_base[:-1].copy()  # model m's queue: q_order[qh[m]:qe[m]]
    qe = q_base[:-1].copy()
    wait_until = np.full(n_models, -1, np.int64)
    wait_need = np.zeros(n_models, np.int64)
    admitted = np.full(n_models, -1, np.int64)  # rule (b): the request admitted last as its DNN's head
    # timers: a binary heap of (time, seq, model)
    hcap = 2 * n + 16
    ht = np.zeros(hcap, np.int64)
    hs = np.zeros(hcap, np.int64)
    hm = np.zeros(hcap, np.int64)
    nh = 0
    seq = 0
    blog = np.zeros((5, max(n, 16)), np.int64)
    nb = 0
    probes = 0
    dispatched = 0
    err = np.zeros(4, np.int64)
    i = 0
    while True:
        # the next event: a timer at or before the next arrival (timers first at equal times), else the arrival
        if nh > 0 and (i >= n or ht[0] <= t[i]):
            now, m = ht[0], hm[0]
            nh -= 1
            if nh > 0:  # pop: sift the last entry down from the root
                xt, xs, xm = ht[nh], hs[nh], hm[nh]
                k = 0
                while True:
                    c = 2 * k + 1
                    if c >= nh:
                        break
                    if c + 1 < nh and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hs[c + 1] < hs[c])):
                        c += 1
                    if ht[c] < xt or (ht[c] == xt and hs[c] < xs):
                        ht[k], hs[k], hm[k] = ht[c], hs[c], hm[c]
                        k = c
                    else:
                        break
                ht[k], hs[k], hm[k] = xt, xs, xm
            if wait_until[m] != now:
                continue  # stale: the DNN no longer waits for this moment
            wait_until[m] = -1
            last_moment = not fill_wait
        elif i < n:
            now, m = t[i], model[i]
            qe[m] += 1
            i += 1
            if now < wait_until[m] and qe[m] - qh[m] < wait_need[m]:
                continue
            last_moment = False
        else:
            break
        # Algorithm 1 for DNN m at now
        p0, p1 = mp_off[m], mp_off[m + 1]
        if p0 == p1:  # no pipeline: drop what is queued
            for x in range(qh[m], qe[m]):
                r_outcome[q_order[x]] = DROPPED
            qh[m] = qe[m]
            continue
        while qe[m] > qh[m]:
            # step 1: the pipeline with the least waiting time at its planned batch size
            kb = 0
            best = mp_pipe[p0]
            finish, best_wait = _probe_any(scored, best, p_batch[best], now, bufs[0], st_off, pool_off, c_w, c_down, c_up, lat,
                                       tin, IS, IE, ilo, ihi, last_end, busy_from)
            for x in range(p0 + 1, p1):  # (strictly less: ties to the first in plan order)
                p = mp_pipe[x]
                f, wt = _probe_any(scored, p, p_batch[p], now, bufs[1 - kb], st_off, pool_off, c_w, c_down, c_up, lat, tin,
                               IS, IE, ilo, ihi, last_end, busy_from)
                if wt < best_wait:
                    best_wait, best, finish, kb = wt, p, f, 1 - kb
            probes += p1 - p0
            # step 2: the largest batch size meeting the oldest request's deadline
            head = q_order[qh[m]]
            deadline = d[head]
            bs = p_batch[best]
            if head_drop and head != admitted[m]:
                # rule (b): a new head is admitted only if a batch of round(0.95·bs) … bs meets its deadline
                if finish > deadline:
                    lowest = max(1, int(0.95 * p_batch[best] + 0.5))
                    ok = False
                    for b in range(p_batch[best] - 1, lowest - 1, -1):
                        probes += 1
                        f, _ = _probe_any(scored, best, b, now, bufs[1 - kb], st_off, pool_off, c_w, c_down, c_up,
                                          lat, tin, IS, IE, ilo, ihi, last_end, busy_from)
                        if f <= deadline:
                            ok = True
                            break
                    if not ok:
                        r_outcome[head] = DROPPED
                        qh[m] += 1
                        continue
                admitted[m] = head
            if finish > deadline:
                bs = 0
                for b in range(p_batch[best] - 1, 0, -1):
                    finish, _ = _probe_any(scored, best, b, now, bufs[kb], st_off, pool_off, c_w, c_down, c_up, lat, tin,
                                       IS, IE, ilo, ihi, last_end, busy_from)
                    probes += 1
                    if finish <= deadline:
                        bs = b
                        break
            if bs == 0:  # drop the oldest and start over
                r_outcome[head] = DROPPED
                qh[m] += 1
                continue
            queued = qe[m] - qh[m]
            if queued < bs and fill_wait and wait:
                # rule (e): wait until a batch of queued + 1 misses the deadline even with no queueing
                small, wait_small = _probe_any(scored, best, queued + 1, now, bufs[1 - kb], st_off, pool_off, c_w,
                                               c_down, c_up, lat, tin, IS, IE, ilo, ihi, last_end, busy_from)
                probes += 1
                if small > deadline:
                    r_outcome[head] = DROPPED
                    qh[m] += 1
                    continue
                wake = deadline - (small - now - wait_small) + 1
                wait_until[m] = wake
                wait_need[m] = 0  # every arrival re-decides
                seq += 1
                nh = _timer_push(ht, hs, hm, nh, wake, seq, m)
                break
            if queued < bs:
                slack = deadline - finish
                if wait and slack > 0 and not last_moment:  # wait till the last moment
                    wake = now + slack
                    wait_until[m] = wake
                    wait_need[m] = bs
                    seq += 1
                    nh = _timer_push(ht, hs, hm, nh, wake, seq, m)
                    break
                bs = queued  # the last moment: send what is queued
                finish, _ = _probe_any(scored, best, bs, now, bufs[kb], st_off, pool_off, c_w, c_down, c_up, lat, tin,
                                   IS, IE, ilo, ihi, last_end, busy_from)
                probes += 1
                if finish > deadline:  # (a smaller batch is never slower)
                    r_outcome[head] = DROPPED
                    qh[m] += 1
                    continue
            # reserve the path (room first: an interval table may need to grow)
            buf = bufs[kb]
            ns = st_off[best + 1] - st_off[best]
            grow = False
            for j in range(ns):
                if not _room(IS, IE, ilo, ihi, buf[P_W, j], now, 3 * ns):
                    grow = True
                if j and not (_room(IS, IE, ilo, ihi, buf[P_UP, j], now, 3 * ns)
                              and _room(IS, IE, ilo, ihi, buf[P_DOWN, j], now, 3 * ns)):
                    grow = True
            if grow:  # (room for 3 per stage: a path may reserve one resource more than once)
                c2 = 2 * IS.shape[1] + 3 * ns
                IS2 = np.zeros((n_res, c2), np.int64)
                IE2 = np.zeros((n_res, c2), np.int64)
                IS2[:, :IS.shape[1]] = IS
                IE2[:, :IE.shape[1]] = IE
                IS, IE = IS2, IE2
            for j in range(ns):
                if j:
                    for r in (buf[P_UP, j], buf[P_DOWN, j]):
                        e = _reserve(IS, IE, ilo, ihi, last_end, busy_from, r, buf[P_TS, j], buf[P_LN, j])
                        if e != E_OK:
                            err[0], err[1], err[2], err[3] = e, r, buf[P_TS, j], buf[P_LN, j]
                            return blog[:, :nb].copy(), w_busy, np.array([probes, dispatched]), err
                e = _reserve(IS, IE, ilo, ihi, last_end, busy_from, buf[P_W, j], buf[P_START, j], buf[P_LI, j])
                if e != E_OK:
                    err[0], err[1], err[2], err[3] = e, buf[P_W, j], buf[P_START, j], buf[P_LI, j]
                    return blog[:, :nb].copy(), w_busy, np.array([probes, dispatched]), err
            dispatched += 1
            # the recorder's record mode: a row per stage; the requests from the last
            if nb + ns > blog.shape[1]:
                b2 = np.zeros((5, 2 * blog.shape[1] + ns), np.int64)
                b2[:, :nb] = blog[:, :nb]
                blog = b2
            for j in range(ns):
                if buf[P_START, j] < now or buf[P_LI, j] <= 0:
                    err[0], err[1], err[2], err[3] = E_EMPTY, buf[P_W, j], buf[P_START, j], buf[P_LI, j]
                    return blog[:, :nb].copy(), w_busy, np.array([probes, dispatched]), err
                w = buf[P_W, j]
                blog[0, nb], blog[1, nb], blog[2, nb] = w, m, bs
                blog[3, nb], blog[4, nb] = buf[P_START, j], buf[P_START, j] + buf[P_LI, j]
                w_busy[w] += buf[P_LI, j]
                nb += 1
            start, end, w = blog[3, nb - 1], blog[4, nb - 1], blog[0, nb - 1]
            for x in range(qh[m], qh[m] + bs):
                rid = q_order[x]
                r_start[rid], r_finish[rid], r_worker[rid], r_batch[rid] = start, end, w, nb - 1
                r_outcome[rid] = SERVED if d[rid] >= end else LATE
            qh[m] += bs
            wait_until[m] = -1
            last_moment = False
    for x in range(n):
        if r_outcome[x] == 0:  # never served (PENDING)
            r_outcome[x] = DROPPED
    return blog[:, :nb].copy(), w_busy, np.array([probes, dispatched]), err


def arrays(pipes: list, n_models: int, n_gpus: int) -> tuple:
    """The kernel's static arrays from the runtime's pipelines (``PipeRuntime``, in plan order): per model its
    pipelines in that order; per pipeline its batch size and stages; per stage its pool's candidates
    (vGPU, its server's downlink, uplink: resources ``n_gpus + 2·node (+1)``, :mod:`~shepherd.core.pipelines.table`)
    and its latency and inbound transfer per batch size."""
    by_model: list[list[int]] = [[] for _ in range(n_models)]
    for i, p in enumerate(pipes):
        by_model[p.model].append(i)
    mp_off = np.zeros(n_models + 1, np.int64)
    mp_off[1:] = np.cumsum([len(x) for x in by_model])
    mp_pipe = np.array([i for x in by_model for i in x], np.int64)
    p_batch = np.array([p.batch for p in pipes], np.int64)
    stages = [(p, j) for p in pipes for j in range(len(p.workers))]
    st_off = np.zeros(len(pipes) + 1, np.int64)
    st_off[1:] = np.cumsum([len(p.workers) for p in pipes])
    pool_off = np.zeros(len(stages) + 1, np.int64)
    pool_off[1:] = np.cumsum([len(p.workers[j]) for p, j in stages])
    c_w = np.array([w for p, j in stages for w in p.workers[j]], np.int64)
    c_node = np.array([nd for p, j in stages for nd in p.nodes[j]], np.int64)
    width = max([len(p.lat[j]) for p, j in stages], default=1)
    lat = np.zeros((max(len(stages), 1), width), np.int64)
    tin = np.zeros((max(len(stages), 1), width), np.int64)
    for s, (p, j) in enumerate(stages):
        if p.batch >= len(p.lat[j]):
            raise ValueError(f"pipeline of model {p.model}: batch size {p.batch} beyond its profiled "
                             f"{len(p.lat[j]) - 1}")
        lat[s, :len(p.lat[j])] = p.lat[j]
        tin[s, :len(p.transfer_in[j])] = p.transfer_in[j]
    max_stages = max((len(p.workers) for p in pipes), default=1)
    return (mp_off, mp_pipe, p_batch, st_off, pool_off, c_w, n_gpus + 2 * c_node + 1, n_gpus + 2 * c_node, lat,
            tin, max_stages)


def run_group(engine, config, runtime) -> dict:
    """The run of the one serving group (the ``engine`` mode of :mod:`.`): the kernel over the whole trace, writing the
    recorder's columns; returns the policy's counters."""
    rec = engine.rec
    tables = runtime.tables
    n_gpus = len(engine.res.w_hw)
    n_models = int(engine.model.max()) + 1 if len(engine.model) else 0
    n_models = max(n_models, max((p.model + 1 for p in tables["pipelines"]), default=0))
    n_res = n_gpus + 2 * max(tables["nodes"], 1)
    (mp_off, mp_pipe, p_batch, st_off, pool_off, c_w, c_down, c_up, lat, tin,
     max_stages) = arrays(list(tables["pipelines"]), n_models, n_gpus)
    t, d, m = (np.require(col, np.int64, ["C", "W"]) for col in (engine.arrival, engine.deadline, engine.model))
    q_order = np.argsort(m, kind="stable").astype(np.int64)  # each model's requests in trace order
    q_base = np.zeros(n_models + 1, np.int64)
    q_base[1:] = np.cumsum(np.bincount(m, minlength=n_models))
    blog, w_busy, counters, err = run_ppipe(
        t, d, m, q_order, q_base, mp_off, mp_pipe, p_batch, st_off, pool_off, c_w, c_down, c_up, lat, tin,
        n_res, n_gpus, max_stages, bool(config.wait), bool(config.uplink_score), bool(config.head_drop),
        bool(config.fill_wait), 64, rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch,
        rec.r_outcome)
    if err[0] == E_OVERLAP:  # pragma: no cover - the reference's Reservations.reserve refuses it so
        raise RuntimeError(f"resource {err[1]}: [{err[2]}, {err[2] + err[3]}) overlaps a reservation")
    if err[0] == E_EMPTY:  # pragma: no cover - the reference's Recorder.record_path refuses it so
        raise RuntimeError(f"worker {err[1]}: cannot book [{err[2]}, {err[2] + err[3]}) at the decision")
    rec.set_batches(*(np.ascontiguousarray(blog[c]) for c in range(5)), np.zeros(blog.shape[1], np.int64))
    rec.w_busy[:] = w_busy.tolist()
    return {"probes": int(counters[0]), "dispatched": int(counters[1])}


from shepherd.core.engine import outcomes  # noqa: E402  (keys this module's JIT cache)
from shepherd.core.engine.fast import jitcache  # noqa: E402

jitcache.refresh(__name__, outcomes)
