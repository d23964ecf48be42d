"""PPipe's data plane, compiled (PPipe §5.4, Appendix A.3 Algorithms 1 and 2): the reference run, over arrays.

It re-enacts the rules of ``core/policies/ppipe.py`` (its docstring, ``schedule``, ``on_timer``) and of
:mod:`shepherd.core.pipelines.reservations` (``probe``, ``probe_scored``, ``reserve``) as the reference engine
runs them with ``EngineConfig(reserved="record")`` (``Recorder.record_path``): the same request and batch
columns, busy times and counters (``probes``, ``dispatched``) under the paper's rules and any mix of the six
artifact rules of :class:`~shepherd.core.policies.ppipe.PPipeDataPlaneConfig`, ``wait`` on or off, overhead
mode ``none``, one serving group (``tests/test_engine_fast_ppipe.py``; the rest runs on the reference: the policy's
``FastPath``). Rules (c), (d), (f) (:mod:`shepherd.core.pipelines.rules`) only shape the
links and transfer times that ``prepare_pipelines`` builds; (a) is :func:`_probe`'s scored scan; (b) and (e)
are branches of :func:`_decide`. Their numbers, earliestSlot and the gap insert are the rules the policy and the
tables call (:mod:`shepherd.core.rules.ppipe`), compiled here. The kernel's own:

* its clock has only arrivals and timers (``record`` mode books no event): at equal times the timers in the
  order they were set, then the arrivals in trace order;
* ``probe`` is the plain scan in pool order, which gives the answer of the reference's indexed shortcuts
  (``tests/test_ppipe_probe_index.py``);
* a resource's reservations are a sorted run (:data:`RES`); those over by ``now`` are dropped only when it
  needs room (no query starts before ``now``).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from shepherd.core.engine.fast import timers
from shepherd.core.engine.fast.common import bisect_right, compiled, record
from shepherd.core.engine.outcomes import DROPPED, LATE, PENDING, SERVED
from shepherd.core.rules import ppipe as numbers

#: the policy's and the tables' own rules (:mod:`shepherd.core.rules.ppipe`), compiled here
_earliest_slot, _insert_at, _stage_score, _admit_from, _fill_wake, _wait_until = compiled(
    numbers.earliest_slot, numbers.insert_at, numbers.stage_score, numbers.admit_from, numbers.fill_wake,
    numbers.wait_until)

NEVER = np.int64(1) << 62
#: what the kernel returns as its error: none, a reservation overlapping another, a slot of zero length
E_OK, E_OVERLAP, E_EMPTY = range(3)
#: what Algorithm 1 does with the head of a queue: send a batch, wait (a timer is set), drop the head
SEND, WAIT, DROP = range(3)


#: the trace (arrival, deadline, model) and the recorder's request columns, written in place
Requests = namedtuple("Requests", "t d model start finish worker batch outcome")
#: the plan (:func:`pipes`): per model its pipelines ``mp_pipe[mp_off[m]:mp_off[m + 1]]``; per pipeline its
#: batch size and stages ``[st_off[p], st_off[p + 1])``; per stage its pool's candidates
#: ``cand[pool_off[s]:pool_off[s + 1]]`` (:data:`CAND`) and latency and inbound transfer per batch size
Pipes = namedtuple("Pipes", "mp_off mp_pipe p_batch st_off pool_off cand lat tin")
#: a pool's candidate: its vGPU, its server's downlink and uplink
CAND = record("w down up")
#: per resource (vGPU, link) its reservations, sorted: ``IS``/``IE[r, res[r].ilo:res[r].ihi]`` (:data:`RES`)
Reservations = namedtuple("Reservations", "IS IE res")
#: per resource: its reservations' range in ``IS``/``IE``, its last end and the start of its final gap-free
#: block (one structured array: an inlined helper's named-tuple argument is reference-counted per array)
RES = record("ilo ihi last_end busy_from")
#: per DNN (:data:`DNN`), its queue ``order[dnn[m].qh:dnn[m].qe]`` (in trace order); the timers (:mod:`.timers`)
Dnns = namedtuple("Dnns", "order dnn heap")
#: per DNN: its queue, the head admitted last (rule (b)), the moment it waits for and the batch it awaits
DNN = record("qh qe admitted wait_until wait_need")
#: the policy's switches (``wait`` and the artifact rules (a), (b), (e))
Rules = namedtuple("Rules", "wait scored head_drop fill_wait")
#: the run's scalars: next arrival, timers (count, set order), batch rows, counters, the error and its slot
RUN = record("i nh seq nb probes dispatched err err_res err_start err_len")
#: a probed path, per stage: the vGPU, its start and time, the transfer in (uplink, downlink, start, time)
STAGE = record("w start li up down ts ln")
#: a batch row of the recorder (one per stage)
BATCH = record("worker model size start end")
#: scratch: two probed paths (:data:`STAGE`: the best so far and the next probe's) and the decision
Scratch = namedtuple("Scratch", "bufs dec")
#: a decision of Algorithm 1: the pipeline, the buffer of its path, the batch size, finish, head and deadline
DECISION = record("best kb bs finish head deadline")


# ---------------------------------------------------------------------- Algorithm 2: probe and reserve


@njit(cache=True, inline='always')
def _fit(rv, r, t, length):
    """``earliestSlot`` of one resource: the earliest ``s ≥ t`` at which ``r`` is free for ``length``."""
    x = rv.res[r]
    return _earliest_slot(rv.IS, rv.IE, r, x.ilo, x.ihi, x.last_end, x.busy_from, t, length)


@njit(cache=True, inline='always')
def _link_slot(rv, up, down, ts, ln):
    """The earliest start ≥ ``ts`` (``up`` free there) at which both links are free for ``ln`` (the reference's
    ``reservations._link_slot``, which takes the table's ``fit`` method as a value: numba cannot take a bound
    method, so the six lines are here again over :func:`_fit`)."""
    while True:
        s = _fit(rv, down, ts, ln)
        if s == ts:
            return ts
        ts = _fit(rv, up, s, ln)
        if ts == s:
            return ts


@njit(cache=True)  # (a call, not inlined: inlined at its seven call sites the kernel took ~85 s to compile)
def _probe(pl, rv, rules, run, p, bs, now, buf):
    """Algorithm 2 ``probe(p, bs)`` at ``now`` (counted), its path into ``buf``; (finish, wait). A first-stage vGPU
    starts at ``max(now, its last end)`` (no gap after ``now``); the scan stops at a start no candidate can beat.
    Rule (a) (``probe_scored``): all tried, a non-last stage's scored by ``max(finish, its uplink's last end)``."""
    run[0].probes += 1
    s0 = pl.st_off[p]
    last_j = pl.st_off[p + 1] - s0 - 1
    tg, up, busy = now, -1, 0
    for j in range(last_j + 1):
        s = s0 + j
        li = pl.lat[s, bs]
        ln = pl.tin[s, bs] if j else 0
        busy += li + ln
        floor = tg + ln  # no GPU of the pool starts earlier
        up_busy = j > 0 and ln > 0 and rv.res[up].last_end > tg
        tu = _fit(rv, up, tg, ln) if up_busy else tg
        best, bw, bts, bstart = NEVER, -1, 0, 0
        for c in range(pl.pool_off[s], pl.pool_off[s + 1]):
            cd = pl.cand[c]
            ts = tg
            if j > 0 and ln > 0 and (up_busy or rv.res[cd.down].last_end > tg):
                ts = _link_slot(rv, up, cd.down, tu, ln)
            if j == 0 and not rules.scored:
                start = max(now, rv.res[cd.w].last_end)
            else:
                start = _fit(rv, cd.w, ts + ln, li)
            score = _stage_score(start, li, rules.scored and j < last_j, rv.res[cd.up].last_end)
            if score < best:
                best, bw, bts, bstart = score, c, ts, start
                if start <= floor and not rules.scored:
                    break
        st, cd = buf[j], pl.cand[bw]
        st.w, st.start, st.li, st.up, st.down, st.ts, st.ln = cd.w, bstart, li, up, cd.down, bts, ln
        tg, up = bstart + li, cd.up  # the next stage's transfer leaves from here
    return tg, tg - now - busy


@njit(cache=True, inline='always')
def _room(rv, r, now, need):
    """Room for ``need`` more intervals of ``r`` (those over by ``now`` dropped if need be); False if too little."""
    lo, hi = rv.res[r].ilo, rv.res[r].ihi
    if hi + need <= rv.IS.shape[1]:
        return True
    lo = bisect_right(rv.IE[r], now, lo, hi)
    rv.IS[r, :hi - lo] = rv.IS[r, lo:hi]
    rv.IE[r, :hi - lo] = rv.IE[r, lo:hi]
    rv.res[r].ilo, rv.res[r].ihi = 0, hi - lo
    return hi - lo + need <= rv.IS.shape[1]


@njit(cache=True, inline='always')
def _make_room(rv, buf, ns, now):
    """Room in each table the path reserves (3 per stage: a resource may recur), the tables grown if need be."""
    need, fits = 3 * ns, True
    for j in range(ns):
        fits &= _room(rv, buf[j].w, now, need)
        if j:
            fits &= _room(rv, buf[j].up, now, need) and _room(rv, buf[j].down, now, need)
    if fits:
        return rv
    more = np.zeros((rv.IS.shape[0], rv.IS.shape[1] + need), np.int64)
    return Reservations(np.hstack((rv.IS, more)), np.hstack((rv.IE, more)), rv.res)


@njit(cache=True, inline='always')
def _fail(run, code, r, start, length):
    """Record the kernel's error (its code, the resource and the slot); False."""
    rs = run[0]
    rs.err, rs.err_res, rs.err_start, rs.err_len = code, r, start, length
    return False


@njit(cache=True, inline='always')
def _reserve(rv, run, r, start, length):
    """``markReserved(r, start, length)`` (room made beforehand); False on an overlap (``run``)."""
    if length <= 0:
        return True
    end = start + length
    last = rv.res[r].last_end
    lo, hi = rv.res[r].ilo, rv.res[r].ihi
    if start >= last:
        if start == last and hi > lo:  # right after the last interval: extend it (the same busy time)
            rv.IE[r, hi - 1] = end
        else:
            rv.IS[r, hi], rv.IE[r, hi] = start, end
            rv.res[r].ihi = hi + 1
            if start > last:  # after a gap: the gap-free block restarts here
                rv.res[r].busy_from = start
        rv.res[r].last_end = end
        return True
    a = _insert_at(rv.IS[r], rv.IE[r], lo, hi, start, end)
    if a < 0:
        return _fail(run, E_OVERLAP, r, start, length)
    for i in range(hi, a, -1):
        rv.IS[r, i] = rv.IS[r, i - 1]
        rv.IE[r, i] = rv.IE[r, i - 1]
    rv.IS[r, a], rv.IE[r, a] = start, end
    rv.res[r].ihi = hi + 1
    return True


@njit(cache=True, inline='always')
def _reserve_path(rv, buf, ns, run):
    """Reserve every stage's transfer links and vGPU (``reserve``); False on an error (``run``)."""
    for j in range(ns):
        st = buf[j]
        if j and not (_reserve(rv, run, st.up, st.ts, st.ln) and _reserve(rv, run, st.down, st.ts, st.ln)):
            return False
        if not _reserve(rv, run, st.w, st.start, st.li):
            return False
    return True


# ---------------------------------------------------------------------- Algorithm 1: schedule


@njit(cache=True, inline='always')
def _largest_meeting(pl, rv, sc, rules, run, now, top, lowest, buf):
    """The largest batch size ``top``…``lowest`` whose path (into ``buf``) meets the deadline, its finish; 0 if none."""
    dc = sc.dec[0]
    finish = dc.finish
    for b in range(top, lowest - 1, -1):
        finish, _ = _probe(pl, rv, rules, run, dc.best, b, now, buf)
        if finish <= dc.deadline:
            return b, finish
    return 0, finish


@njit(cache=True, inline='always')
def _wait(dn, run, m, until, need):
    """DNN ``m`` waits until ``until`` for a batch of ``need`` (a timer then; the set order counts up)."""
    dn.dnn[m].wait_until, dn.dnn[m].wait_need = until, need
    rs = run[0]
    rs.seq += 1
    timers.push(dn.heap, rs.nh, until, rs.seq, m)
    rs.nh += 1
    return WAIT


@njit(cache=True, inline='always')
def _decide(req, pl, rv, dn, sc, rules, run, m, now, last_moment):
    """Algorithm 1 (the policy's ``schedule``, in its order) for the head of DNN ``m``'s queue: SEND (``sc.dec``
    holds the pipeline, the buffer with its path and the batch size), WAIT (a timer is set) or DROP (the head)."""
    # step 1: the least waiting time at the planned batch size (strictly less: ties to the first in plan order)
    p0, p1 = pl.mp_off[m], pl.mp_off[m + 1]
    best, kb = pl.mp_pipe[p0], 0
    finish, best_wait = _probe(pl, rv, rules, run, best, pl.p_batch[best], now, sc.bufs[0])
    for x in range(p0 + 1, p1):
        p = pl.mp_pipe[x]
        f, wt = _probe(pl, rv, rules, run, p, pl.p_batch[p], now, sc.bufs[1 - kb])
        if wt < best_wait:
            best_wait, best, finish, kb = wt, p, f, 1 - kb
    dc, q = sc.dec[0], dn.dnn[m]
    planned = pl.p_batch[best]
    dc.best, dc.kb, dc.finish, dc.bs = best, kb, finish, planned
    dc.head = dn.order[q.qh]
    dc.deadline = req.d[dc.head]
    if rules.head_drop and dc.head != q.admitted:  # rule (b): admitted only if round(0.95·bs) … bs meets it
        if dc.finish > dc.deadline:
            lowest = _admit_from(planned)
            if _largest_meeting(pl, rv, sc, rules, run, now, planned - 1, lowest, sc.bufs[1 - kb])[0] == 0:
                return DROP
        q.admitted = dc.head
    if dc.finish > dc.deadline:  # step 2: the largest batch size that meets the head's deadline
        dc.bs, dc.finish = _largest_meeting(pl, rv, sc, rules, run, now, planned - 1, 1, sc.bufs[kb])
    if dc.bs == 0:
        return DROP
    queued = q.qe - q.qh
    if queued >= dc.bs:
        return SEND
    if rules.fill_wait and rules.wait:  # rule (e): wait until a batch of queued + 1 would miss with no queueing
        small, wait_small = _probe(pl, rv, rules, run, best, queued + 1, now, sc.bufs[1 - kb])
        if small > dc.deadline:
            return DROP
        return _wait(dn, run, m, _fill_wake(dc.deadline, small, now, wait_small), 0)  # every arrival re-decides
    wake = _wait_until(rules.wait, dc.deadline, dc.finish, now, last_moment)
    if wake >= 0:  # wait till the last moment
        return _wait(dn, run, m, wake, dc.bs)
    dc.bs = queued  # the last moment (or no waiting): send what is queued
    dc.finish, _ = _probe(pl, rv, rules, run, best, queued, now, sc.bufs[kb])
    return DROP if dc.finish > dc.deadline else SEND  # (a smaller batch is never slower)


# ---------------------------------------------------------------------- the loop, recording each path


@njit(cache=True, inline='always')
def _record_path(req, dn, blog, w_busy, buf, ns, m, bs, now, run):
    """The recorder's record mode: a batch row per stage (each stage's time to its vGPU's busy time), the
    queue's first ``bs`` requests from the last stage; returns the log (grown when full)."""
    nb = run[0].nb
    if nb + ns > len(blog):
        blog = np.concatenate((blog[:nb], np.zeros(len(blog) + ns, BATCH)))
    for j in range(ns):
        st, row = buf[j], blog[nb]
        if st.start < now or st.li <= 0:
            _fail(run, E_EMPTY, st.w, st.start, st.li)
            return blog
        row.worker, row.model, row.size, row.start, row.end = st.w, m, bs, st.start, st.start + st.li
        w_busy[st.w] += st.li
        nb += 1
    run[0].nb = nb
    last = blog[nb - 1]
    for x in range(dn.dnn[m].qh, dn.dnn[m].qh + bs):
        r = dn.order[x]
        req.start[r], req.finish[r], req.worker[r], req.batch[r] = last.start, last.end, last.worker, nb - 1
        req.outcome[r] = SERVED if req.d[r] >= last.end else LATE
    return blog


@njit(cache=True, inline='always')
def _schedule(req, pl, rv, dn, sc, rules, run, blog, w_busy, m, now, last_moment):
    """Algorithm 1 for DNN ``m`` at ``now`` until its queue is empty or it waits; returns (reservations, log)."""
    if pl.mp_off[m] == pl.mp_off[m + 1]:  # no pipeline: what it queues stays pending, dropped at the end
        return rv, blog
    q, dc = dn.dnn[m], sc.dec[0]
    while q.qe > q.qh:
        what = _decide(req, pl, rv, dn, sc, rules, run, m, now, last_moment)
        if what == WAIT:
            break
        if what == DROP:
            req.outcome[dc.head] = DROPPED
            q.qh += 1
            continue
        buf = sc.bufs[dc.kb]
        ns = pl.st_off[dc.best + 1] - pl.st_off[dc.best]
        rv = _make_room(rv, buf, ns, now)
        if not _reserve_path(rv, buf, ns, run):
            break
        run[0].dispatched += 1
        blog = _record_path(req, dn, blog, w_busy, buf, ns, m, dc.bs, now, run)
        if run[0].err != E_OK:
            break
        q.qh += dc.bs
        q.wait_until = -1
        last_moment = False
    return rv, blog


@njit(cache=True, inline='always')
def _next_event(req, dn, rules, run):
    """The next event: a timer at or before the next arrival (timers first at equal times), else the arrival.
    (DNN, time, whether it is the last moment of its wait); DNN −1: nothing to decide, −2: the run is over."""
    rs = run[0]
    i, n = rs.i, len(req.t)
    if rs.nh > 0 and (i >= n or dn.heap[0, 0] <= req.t[i]):
        now, m = dn.heap[0, 0], dn.heap[2, 0]
        timers.pop(dn.heap, rs.nh)
        rs.nh -= 1
        if dn.dnn[m].wait_until != now:
            return -1, now, False  # stale: the DNN no longer waits for this moment
        dn.dnn[m].wait_until = -1
        return m, now, not rules.fill_wait
    if i >= n:
        return -2, 0, False
    now, m = req.t[i], req.model[i]
    q = dn.dnn[m]
    q.qe += 1
    rs.i = i + 1
    if now < q.wait_until and q.qe - q.qh < q.wait_need:
        return -1, now, False  # it joins the queue of a DNN waiting for a larger batch (the policy's shortcut)
    return m, now, False


@njit(cache=True)
def run_ppipe(req, pl, dn, rules, run, n_res, n_gpus, max_stages):
    """The run: the request columns and ``run`` (:data:`RUN`) filled; returns (batch log (:data:`BATCH`), w_busy)."""
    room = 64  # reservations per resource at first (they grow: _make_room)
    rv = Reservations(np.zeros((n_res, room), np.int64), np.zeros((n_res, room), np.int64), np.zeros(n_res, RES))
    w_busy = np.zeros(n_gpus, np.int64)
    sc = Scratch(np.zeros((2, max_stages), STAGE), np.zeros(1, DECISION))
    blog = np.zeros(max(len(req.t), 16), BATCH)
    while run[0].err == E_OK:
        m, now, last_moment = _next_event(req, dn, rules, run)
        if m == -2:
            break
        if m >= 0:
            rv, blog = _schedule(req, pl, rv, dn, sc, rules, run, blog, w_busy, m, now, last_moment)
    req.outcome[req.outcome == PENDING] = DROPPED  # never dispatched
    return blog[:run[0].nb].copy(), w_busy


def pipes(runtime_pipes: list, n_models: int, n_gpus: int) -> Pipes:
    """The kernel's plan (:data:`Pipes`) from the runtime's pipelines (``PipeRuntime``, in plan order); a
    candidate's links are resources ``n_gpus + 2·node (+1)`` (:mod:`~shepherd.core.pipelines.table`)."""
    models = np.array([p.model for p in runtime_pipes], np.int64)  # (a stable sort keeps the plan order)
    stages = [(p, j) for p in runtime_pipes for j in range(len(p.workers))]
    cand = np.array([(w, n_gpus + 2 * nd + 1, n_gpus + 2 * nd) for p, j in stages
                     for w, nd in zip(p.workers[j], p.nodes[j])], CAND)
    width = max([len(p.lat[j]) for p, j in stages], default=1)
    lat, tin = np.zeros((2, max(len(stages), 1), width), np.int64)
    for s, (p, j) in enumerate(stages):
        if p.batch >= len(p.lat[j]):
            raise ValueError(f"pipeline of model {p.model}: batch size {p.batch} beyond its profiled "
                             f"{len(p.lat[j]) - 1}")
        lat[s, :len(p.lat[j])] = p.lat[j]
        tin[s, :len(p.transfer_in[j])] = p.transfer_in[j]
    return Pipes(_offsets(np.bincount(models, minlength=n_models)), np.argsort(models, kind="stable"),
                 np.array([p.batch for p in runtime_pipes], np.int64),
                 _offsets([len(p.workers) for p in runtime_pipes]), _offsets([len(p.workers[j]) for p, j in stages]),
                 cand, lat, tin)


def _offsets(counts: list[int]) -> np.ndarray:
    """``[0, c0, c0 + c1, …]``: where each of consecutive runs of these lengths starts, and the end."""
    off = np.zeros(len(counts) + 1, np.int64)
    off[1:] = np.cumsum(counts)
    return off


def run_group(engine, config, runtime) -> dict:
    """The one serving group's run (``engine`` mode of :mod:`.`) into the recorder; returns the policy's counters."""
    rec = engine.rec
    tables = runtime.tables
    n_gpus = len(engine.res.w_hw)
    t, d, m = (np.require(col, np.int64, ["C", "W"]) for col in (engine.arrival, engine.deadline, engine.model))
    n_models = max([int(m.max(initial=-1)) + 1] + [p.model + 1 for p in tables["pipelines"]])
    pl = pipes(list(tables["pipelines"]), n_models, n_gpus)
    dnn = np.zeros(n_models, DNN)
    dnn["qh"] = dnn["qe"] = _offsets(np.bincount(m, minlength=n_models))[:-1]
    dnn["admitted"] = dnn["wait_until"] = -1
    dn = Dnns(np.argsort(m, kind="stable").astype(np.int64),  # each model's requests in trace order
              dnn, np.zeros((3, 2 * len(t) + 16), np.int64))
    req = Requests(t, d, m, rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome)
    rules = Rules(bool(config.wait), bool(config.uplink_score), bool(config.head_drop), bool(config.fill_wait))
    run = np.zeros(1, RUN)
    max_stages = int(np.diff(pl.st_off).max(initial=1))
    blog, w_busy = run_ppipe(req, pl, dn, rules, run, n_gpus + 2 * max(tables["nodes"], 1), n_gpus, max_stages)
    rs = run[0]
    if rs["err"] != E_OK:  # pragma: no cover - the reference's Reservations.reserve, Recorder.record_path refuse it
        slot = f"[{rs['err_start']}, {rs['err_start'] + rs['err_len']})"
        raise RuntimeError(f"resource {rs['err_res']}: {slot} overlaps a reservation" if rs["err"] == E_OVERLAP
                           else f"worker {rs['err_res']}: cannot book {slot} at the decision")
    rec.set_batches(*(np.ascontiguousarray(blog[f]) for f in BATCH.names), np.zeros(len(blog), np.int64))
    rec.w_busy[:] = w_busy.tolist()
    return {"probes": int(rs["probes"]), "dispatched": int(rs["dispatched"])}


from shepherd.core.engine.fast import jitcache  # noqa: E402  (what it imports keys its JIT cache)

jitcache.refresh(__name__)
