"""What every compiled fast path shares — deadline queues, the scheduler clock, the batch log, the completion
order and the chunked loops' steps: numba functions over arrays, one definition each, each naming the part of
the reference engine it mirrors.

* **deadline queues** (:mod:`shepherd.core.policies.queues`): per model a deadline-sorted run of
  ``(deadline, request)`` in one shared pair of arrays; model ``m`` owns the slots ``[base[m], base[m + 1])``
  (a request is queued at most once at a time), its live part is ``[qh[m], qe[m])``.
* **the scheduler as a single server** (:mod:`shepherd.core.engine.overhead`, :mod:`shepherd.core.engine.
  admission`), state ``s = [free, fall, cp, n_shed]`` in ns: ``free`` — the reference's ``free_ns``, arrivals
  charged lazily as it charges them (its one approximation, kept so that the outcomes are its own); ``fall``
  — ``free`` with every admitted arrival so far charged (what admission control compares with its bound);
  ``cp`` — the first arrival not charged into ``free``.
* **the batch log** (:mod:`shepherd.core.engine.recorder`): column-major, one column per batch (worker,
  model, size, start, end, preempted); the run's end numbers the batches canonically.
* **the completion order** (:mod:`shepherd.core.engine.clock`): the earliest end, then the lowest batch id.
"""

from __future__ import annotations

import bisect
from collections import namedtuple

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload, register_jitable

from shepherd.core.rules import latency as latency_rules
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

NONE = -1
INF = np.int64(1) << 62

#: batch-log columns
B_WORKER, B_MODEL, B_SIZE, B_START, B_END, B_PRE = range(6)
B_COLS = 6

#: scheduler-state slots
S_FREE, S_FALL, S_CP, S_SHED = range(4)

#: a kernel's resumable loop state (``st``): next request (local), Flex's preemption threshold, idle workers,
#: batches made; the window's first request and batch-log row (global ids), the group's request count,
#: whether the window holds its last request
ST_I, ST_THRESH, ST_NIDLE, ST_NB, ST_OFF, ST_BOFF, ST_N, ST_LAST = range(8)
ST_LEN = 8

#: what a kernel's allocation-free loop returns: the window is used up, the batch log needs room, the run is done
PAUSE, GROW, DONE = range(3)

# ---------------------------------------------------------------------- named records (numba typed tuples)

#: the group's scheduler-clock constants (:class:`shepherd.core.engine.overhead.SchedulerClock`), ns; the feed
#: chunk's size (``EngineConfig.chunk``)
Sched = namedtuple("Sched", "decision_ns per_request_ns arrival_ns active admit max_lag_ns chunk")
#: the deadline queues (see above): region starts, live heads and ends, deadlines, request ids
Queues = namedtuple("Queues", "base qh qe qd qr")
#: per worker: when it is free, its running batch's start, end, id (``NONE``: idle), model, size and requests
#: (a row of ``maxb``; Flex only), busy and wasted time, whether it is idle (waiting for work)
Workers = namedtuple("Workers", "free start end bid model size reqs busy waste idle")
#: the window of requests loaded (local ids): arrival, deadline, model; the recorder's columns written in place
Window = namedtuple("Window", "t d model start finish worker batch outcome preempt shed")
#: a loop's scratch space: the non-empty queues and the idle workers as bit sets, the running workers in
#: completion order (:func:`run_order`), a preempted batch's requests
Scratch = namedtuple("Scratch", "nz idle_bits order victims")
#: one serving group's run as a kernel's loop sees it: the policy's tables (``pol``: latency table
#: ``lat[hw, model, b]``, ``w_hw``, ``maxb`` and the policy's own), ``Sched``, ``Queues``, ``Workers``,
#: ``Window``, ``Scratch``, the clock state ``s``, the loop state ``st``, the batch log
Run = namedtuple("Run", "pol sc q w win scr s st blog")


def record(fields, **types):
    """A structured record of these fields (names separated by spaces, as a namedtuple's), int64 unless
    ``types`` names another: a kernel's per-index state (an inlined helper's named-tuple argument is
    reference-counted per array; a structured array is one array)."""
    return np.dtype([(f, types.get(f, np.int64)) for f in fields.split()])


def workers(n_workers, maxb):
    """Idle workers (:data:`Workers`), a running batch's requests kept up to ``maxb`` each."""
    z = [np.zeros(n_workers, np.int64) for _ in range(7)]
    return Workers(z[0], z[1], z[2], np.full(n_workers, NONE, np.int64), z[3], z[4],
                   np.empty((n_workers, maxb), np.int64), z[5], z[6], np.ones(n_workers, np.bool_))


@njit(cache=True)
def scratch(n_models, n_workers, maxb):
    """A loop's scratch space (:data:`Scratch`)."""
    return Scratch(np.empty((n_models + 63) >> 6, np.int64), np.empty((n_workers + 63) >> 6, np.int64),
                   np.empty(n_workers, np.int64), np.empty(maxb, np.int64))


@njit(cache=True, inline='always')
def bisect_right(a, x, lo, hi):
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline='always')
def bisect_left(a, x, lo, hi):
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@overload(bisect.bisect_right)
def _std_bisect_right(a, x, lo, hi):
    """The standard library's ``bisect_right(a, x, lo, hi)`` in compiled code: a rule of
    :mod:`shepherd.core.rules` calls it at C speed on the reference engine, and compiles to this."""
    return lambda a, x, lo, hi: bisect_right(a, x, lo, hi)


@overload(bisect.bisect_left)
def _std_bisect_left(a, x, lo, hi):
    """The standard library's ``bisect_left(a, x, lo, hi)`` in compiled code (as :func:`_std_bisect_right`)."""
    return lambda a, x, lo, hi: bisect_left(a, x, lo, hi)


#: the table search every policy uses (:mod:`shepherd.core.rules.latency`): a kernel or a rule that calls it
#: compiles the very function
register_jitable(latency_rules.largest_within)


def compiled(*rules):
    """The policy's own rules (:mod:`shepherd.core.rules`), each compiled as it is and inlined where a kernel
    calls it (``njit(inline="always")(rule)``), in the order given."""
    return tuple(njit(cache=True, inline='always')(rule) for rule in rules)


@njit(cache=True, inline='always')
def ceil_us(ns):
    return -((-ns) // 1000)


@intrinsic
def cttz(typingctx, x):
    """The number of trailing zero bits of the int64 ``x`` ≠ 0 (LLVM's ``cttz``: one instruction)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.int64)
        return builder.cttz(v, ir.Constant(ir.IntType(1), 1))

    return types.int64(x), codegen


# ---------------------------------------------------------------------- deadline queues


@njit(cache=True)
def queues(model, n_models):
    """Empty queues with room for all of these requests at once (a kernel fed the whole trace: Symphony's; no
    room for none: :func:`q_reserve` makes it a chunk at a time): (base, qh, qe, qd, qr)."""
    counts = np.zeros(n_models + 1, np.int64)
    for i in range(len(model)):
        counts[model[i] + 1] += 1
    base = np.cumsum(counts)
    n = len(model)
    return base, base[:-1].copy(), base[:-1].copy(), np.empty(n, np.int64), np.empty(n, np.int64)


@njit(cache=True)
def q_reserve(base, qh, qe, qd, qr, new_model, running, delta):
    """The queues rebuilt with room for every request that may be queued until the next chunk — the ones
    queued now, the running ones (a preemption re-queues them) and the chunk's new ones, per model,
    twice over so that :func:`q_push`'s moves stay rare — and their request ids lowered by ``delta`` (the
    window's first ``delta`` requests were flushed)."""
    n_models = len(qh)
    need = running.copy()
    for i in range(len(new_model)):
        need[new_model[i]] += 1
    nbase = np.zeros(n_models + 1, np.int64)
    for m in range(n_models):
        need[m] += qe[m] - qh[m]
        nbase[m + 1] = nbase[m] + 2 * need[m] + 16
    nqd = np.empty(nbase[n_models], np.int64)
    nqr = np.empty(nbase[n_models], np.int64)
    nqh = nbase[:-1].copy()
    nqe = nbase[:-1].copy()
    for m in range(n_models):
        p = nbase[m]
        for j in range(qh[m], qe[m]):
            nqd[p] = qd[j]
            nqr[p] = qr[j] - delta
            p += 1
        nqe[m] = p
    return nbase, nqh, nqe, nqd, nqr


@njit(cache=True)
def oldest(qh, qe, qr, w_reqs, w_size, w_bid, bound):
    """The lowest request id still queued or in a running batch (``w_reqs``; Flex only) and ``bound``."""
    lo = bound
    for m in range(len(qh)):
        for j in range(qh[m], qe[m]):
            if qr[j] < lo:
                lo = qr[j]
    for w in range(len(w_size)):
        if w_bid[w] >= 0:
            for x in range(w_size[w]):
                if w_reqs[w, x] < lo:
                    lo = w_reqs[w, x]
    return lo


@njit(cache=True)
def shift_running(w_reqs, w_size, w_bid, delta):
    """The running batches' request ids lowered by ``delta`` (see :func:`q_reserve`)."""
    for w in range(len(w_size)):
        if w_bid[w] >= 0:
            for x in range(w_size[w]):
                w_reqs[w, x] -= delta


@njit(cache=True, inline='always')
def nz_fill(nz, qh, qe):
    """``nz`` (``(len(qh) + 63) >> 6`` words) set to the non-empty queues as a bit set, 64 models a word: a
    kernel's scan over the queues visits only these, lowest model first (:func:`cttz`), not every model."""
    nz[:] = 0
    for m in range(len(qh)):
        if qh[m] < qe[m]:
            nz[m >> 6] |= np.int64(1) << (m & 63)


@njit(cache=True, inline='always')
def nz_set(nz, m):
    """Add ``m`` to a bit set."""
    nz[m >> 6] |= np.int64(1) << (m & 63)


@njit(cache=True, inline='always')
def nz_clear(nz, m):
    """Remove ``m`` from a bit set."""
    nz[m >> 6] &= ~(np.int64(1) << (m & 63))


#: slots of a model's region a queue's live part walks through before :func:`q_push` moves it back to the
#: region's start (when no longer than the part already consumed)
Q_WALK = 128


@njit(cache=True, inline='always')
def q_push(base, qh, qe, qd, qr, m, dl, r):
    """Queue request ``r`` of model ``m`` with deadline ``dl`` after the equal deadlines (``DeadlineQueues.push``).

    The live part moves back to the region's start at the region's end (a request is queued once, so
    there is room then), and already after ``Q_WALK`` slots when what was consumed before it is at least as
    long (a move copies no more requests than were consumed since the last one): a short queue stays within its
    region's first ``Q_WALK`` slots — a few cache lines — instead of walking through all of them, a cache
    miss per line and a page fault per page. Where the live part sits changes nothing else: every reader
    takes ``qh``/``qe`` afresh, and no slot is held across a push."""
    h, e = qh[m], qe[m]
    lo = base[m]
    if e == base[m + 1] or (e - lo >= Q_WALK and h - lo >= e - h):
        for j in range(e - h):
            qd[lo + j] = qd[h + j]
            qr[lo + j] = qr[h + j]
        e = lo + e - h
        h = lo
        qh[m] = h
    if e == h or dl >= qd[e - 1]:
        qd[e] = dl
        qr[e] = r
    else:
        p = bisect_right(qd, dl, h, e)
        for j in range(e, p, -1):
            qd[j] = qd[j - 1]
            qr[j] = qr[j - 1]
        qd[p] = dl
        qr[p] = r
    qe[m] = e + 1


@njit(cache=True, inline='always')
def q_expire(qh, qe, qd, qr, m, cutoff, r_outcome, dropped):
    """Drop model ``m``'s requests with deadline < ``cutoff`` (``DeadlineQueues.expire``); returns how many."""
    h, e = qh[m], qe[m]
    if h >= e or qd[h] >= cutoff:
        return 0
    j = bisect_left(qd, cutoff, h, e)
    for x in range(h, j):
        r_outcome[qr[x]] = dropped
    qh[m] = j
    return j - h


@njit(cache=True, inline='always')
def q_take(qh, qe, qd, qr, m, i0, b):
    """Remove the ``b`` queued requests from slot ``i0`` (``DeadlineQueues.take``), closing the gap from the
    shorter side; the taken ids are ``qr[i0:i0 + b]`` *before* the call — the caller reads them first."""
    h, e = qh[m], qe[m]
    if i0 == h:
        qh[m] = h + b
    elif i0 - h <= e - i0 - b:  # shift the prefix right
        for j in range(i0 - 1, h - 1, -1):
            qd[j + b] = qd[j]
            qr[j + b] = qr[j]
        qh[m] = h + b
    else:  # shift the suffix left
        for j in range(i0 + b, e):
            qd[j - b] = qd[j]
            qr[j - b] = qr[j]
        qe[m] = e - b


# ---------------------------------------------------------------------- the scheduler clock


@njit(cache=True, inline='always')
def charge_before(s, t, shed, i, now, arrival_ns):
    """Charge ``free`` with the admitted arrivals before ``now`` (``Admission.charge_until``)."""
    cp = s[S_CP]
    free = s[S_FREE]
    while cp < i and t[cp] < now:
        if not shed[cp]:
            a = t[cp] * 1000
            free = (free if free > a else a) + arrival_ns
        cp += 1
    s[S_CP] = cp
    s[S_FREE] = free


@njit(cache=True, inline='always')
def ready_us(s, t, shed, i, now, active, decision_ns, arrival_ns):
    """When a decision made at ``now`` takes effect (``Actions.decision_time``)."""
    if not active:
        return now
    if arrival_ns:
        charge_before(s, t, shed, i, now, arrival_ns)
    free = s[S_FREE]
    a = now * 1000
    return ceil_us((free if free > a else a) + decision_ns)


@njit(cache=True, inline='always')
def decide(s, t, shed, i, now, cost, arrival_ns):
    """The scheduler makes a decision costing ``cost`` ns at ``now`` (``SchedulerClock.decide``); returns
    when it is issued, µs. ``fall`` becomes ``free`` plus the admitted arrivals at ``now`` not charged yet."""
    if arrival_ns:
        charge_before(s, t, shed, i, now, arrival_ns)
    free = s[S_FREE]
    a = now * 1000
    free = (free if free > a else a) + cost
    s[S_FREE] = free
    fall = free
    if arrival_ns:
        for j in range(s[S_CP], i):
            if not shed[j]:
                aj = t[j] * 1000
                fall = (fall if fall > aj else aj) + arrival_ns
    s[S_FALL] = fall
    return ceil_us(free)


@njit(cache=True, inline='always')
def arrive(s, now, admit_on, arrival_ns, max_lag_ns):
    """An arrival at ``now``: False (shed, ``.admission``) when admission control is on and the backlog it
    finds, with every admitted arrival and decision before it charged, exceeds the bound; else it is
    charged into ``fall``."""
    fall = s[S_FALL]
    a = now * 1000
    if admit_on and fall - a > max_lag_ns:
        s[S_SHED] += 1
        return False
    if arrival_ns:
        s[S_FALL] = (fall if fall > a else a) + arrival_ns
    return True


@njit(cache=True, inline='always')
def chunk_done(s, i, arrival_ns):
    """Every arrival of a handled feed chunk is charged (``Engine._arrivals``)."""
    if arrival_ns:
        s[S_FREE] = s[S_FALL]
    s[S_CP] = i


# ---------------------------------------------------------------------- batches and completions


@njit(cache=True, inline='always')
def log_row(blog, nb, worker, model, size, start, end):
    """Write batch ``nb`` (a column of the column-major log, which has room for it)."""
    blog[B_WORKER, nb] = worker
    blog[B_MODEL, nb] = model
    blog[B_SIZE, nb] = size
    blog[B_START, nb] = start
    blog[B_END, nb] = end
    blog[B_PRE, nb] = 0


@njit(cache=True)
def grow_log(blog, used, room):
    """The log with room for ``room`` more batches after its first ``used`` (at least doubled)."""
    cap = 2 * blog.shape[1]
    if cap < used + room:
        cap = used + room
    grown = np.empty((B_COLS, cap), np.int64)
    grown[:, :used] = blog[:, :used]
    return grown


@njit(cache=True, inline='always')
def log_batch(blog, nb, worker, model, size, start, end):
    """Append a batch (column ``nb`` of the column-major log; it doubles when full); returns the log."""
    if nb == blog.shape[1]:
        blog = grow_log(blog, nb, 1)
    log_row(blog, nb, worker, model, size, start, end)
    return blog


@njit(cache=True, inline='always')
def next_completion(w_bid, w_end):
    """The worker whose batch completes next: earliest end, then lowest batch id; −1 if none runs."""
    k = -1
    for w in range(len(w_bid)):
        if w_bid[w] >= 0 and (k < 0 or w_end[w] < w_end[k] or (w_end[w] == w_end[k] and w_bid[w] < w_bid[k])):
            k = w
    return k


@njit(cache=True, inline='always')
def run_order(order, w_bid, w_end):
    """``order`` set to the running workers in the clock's completion order, last first, and their number
    ``n``: ``order[n − 1]`` completes next (earliest end, then lowest batch id). Kept by :func:`run_insert`
    and popping the last, it replaces a scan of every worker per event."""
    n = 0
    for w in range(len(w_bid)):
        if w_bid[w] >= 0:
            j = n
            while j > 0 and (w_end[order[j - 1]] < w_end[w]
                             or (w_end[order[j - 1]] == w_end[w] and w_bid[order[j - 1]] < w_bid[w])):
                order[j] = order[j - 1]
                j -= 1
            order[j] = w
            n += 1
    return n


@njit(cache=True, inline='always')
def run_insert(order, n, w_end, w, end):
    """Worker ``w``'s new batch, ending at ``end``, into the completion order (:func:`run_order`); it has the
    highest batch id, so it completes after every batch ending at or before ``end``. Returns the new count."""
    j = n
    while j > 0 and w_end[order[j - 1]] <= end:
        order[j] = order[j - 1]
        j -= 1
    order[j] = w
    return n + 1


@njit(cache=True, inline='always')
def run_remove(order, n, w):
    """Worker ``w``'s batch out of the completion order (a preemption); returns the new count."""
    j = 0
    while order[j] != w:
        j += 1
    for x in range(j, n - 1):
        order[x] = order[x + 1]
    return n - 1


@njit(cache=True, inline='always')
def bit_fill(bits, flags):
    """``bits`` set to the bool array ``flags`` as a bit set (see :func:`nz_fill`)."""
    bits[:] = 0
    for x in range(len(flags)):
        if flags[x]:
            bits[x >> 6] |= np.int64(1) << (x & 63)


@njit(cache=True, inline='always')
def bit_lowest(bits):
    """The lowest member of a non-empty bit set."""
    wi = 0
    while bits[wi] == 0:
        wi += 1
    return (wi << 6) + cttz(bits[wi])


@njit(cache=True)
def finish(r_outcome, dropped):
    """Requests never served end as dropped (``Engine.run``)."""
    for r in range(len(r_outcome)):
        if r_outcome[r] == 0:
            r_outcome[r] = dropped


# ---------------------------------------------------------------------- the loop's shared steps


@njit(cache=True, inline='always')
def first_chunk_end(i, off, chunk):
    """For a loop that handles its requests one at a time from ``i`` (local; ``off`` the window's first global
    id): the first ``j > i`` after which a feed chunk closes by its size, i.e. with
    ``(j + off) % chunk == 0`` — what :func:`chunk_end` keeps, one division per loop entry instead of one
    per request."""
    return ((i + off) // chunk + 1) * chunk - off


@njit(cache=True, inline='always')
def chunk_end(s, i, cend, off, chunk, n_total, arrival_ns):
    """After request ``i − 1`` was handled: close the feed chunk it ended, if it ended one (``chunk_done``),
    where ``i`` has grown by one since the last call (:func:`first_chunk_end` at the loop's entry):
    ``(i + off) % chunk == 0`` exactly when ``i == cend``, the next multiple. Returns the next ``cend``."""
    if i == cend:
        chunk_done(s, i, arrival_ns)
        return cend + chunk
    if i + off == n_total:
        chunk_done(s, i, arrival_ns)
    return cend


@njit(cache=True, inline='always')
def shed_request(s, shed, r_outcome, i, cend, off, chunk, n_total, arrival_ns, dropped):
    """Request ``i`` shed by admission control (``Admission``): marked and dropped, and the feed chunk it ends
    closed (:func:`chunk_end`); returns the next request and ``cend``."""
    shed[i] = True
    r_outcome[i] = dropped
    i += 1
    return i, chunk_end(s, i, cend, off, chunk, n_total, arrival_ns)


@njit(cache=True, inline='always')
def serve_rows(qr, i0, b, start, end, worker, bid, win):
    """The request rows of a batch of the ``b`` queued requests from slot ``i0`` (``Recorder``): ``win`` any
    record with a :data:`Window`'s ``d``, ``start``, ``finish``, ``worker``, ``batch`` and ``outcome``."""
    for x in range(i0, i0 + b):
        r = qr[x]
        win.start[r] = start
        win.finish[r] = end
        win.worker[r] = worker
        win.batch[r] = bid
        win.outcome[r] = SERVED if win.d[r] >= end else LATE


@njit(cache=True, inline='always')
def start_batch(g, wk, m, i0, b, now, i, nb):
    """Run the ``b`` requests queued from slot ``i0`` of model ``m``'s queue on worker ``wk`` as batch ``nb``
    (``Resources.start``): it starts when the worker is free and the decision, charged for ``b`` requests, is
    issued (:func:`decide`); its request rows and log row are written. Returns its end."""
    w, q, sc = g.w, g.q, g.sc
    start = w.free[wk]
    if sc.active:
        disp = decide(g.s, g.win.t, g.win.shed, i, now, sc.decision_ns + sc.per_request_ns * b, sc.arrival_ns)
        if start < disp:
            start = disp
    elif start < now:
        start = now
    end = start + g.pol.lat[g.pol.w_hw[wk], m, b]
    serve_rows(q.qr, i0, b, start, end, wk, nb, g.win)
    q_take(q.qh, q.qe, q.qd, q.qr, m, i0, b)
    if q.qh[m] == q.qe[m]:
        nz_clear(g.scr.nz, m)
    log_row(g.blog, nb - g.st[ST_BOFF], wk, m, b, start, end)
    w.bid[wk], w.start[wk], w.end[wk] = nb, start, end
    return end


@njit(cache=True, inline='always')
def resume(g):
    """A chunked kernel's loop entered over the :data:`Run` ``g``: the scratch sets filled from the records (the
    non-empty queues, the running workers in completion order, the idle workers); returns (next request, idle
    workers, next batch id, running workers, the next feed-chunk end :func:`first_chunk_end`)."""
    st, scr, w = g.st, g.scr, g.w
    nz_fill(scr.nz, g.q.qh, g.q.qe)
    bit_fill(scr.idle_bits, w.idle)
    i = st[ST_I]
    return i, st[ST_NIDLE], st[ST_NB], run_order(scr.order, w.bid, w.end), first_chunk_end(i, st[ST_OFF], g.sc.chunk)


@njit(cache=True, inline='always')
def must_pause(i, n, last, used, room):
    """Why a chunked kernel's loop stops before its next event: PAUSE when the window is used up and more
    requests are to come (``last`` False), GROW when the batch log (``used`` columns) has no room left for
    what one event may write; else −1."""
    if i >= n and not last:
        return PAUSE
    return GROW if used > room else -1


#: a chunked kernel's next event (:func:`next_event`)
COMPLETION, ARRIVAL, SHED, END = range(4)


@njit(cache=True, inline='always')
def next_event(g, i, n_run, cend):
    """The clock's next event for a chunked kernel's loop (a completion at ``t`` before the arrivals at ``t``):
    the batch of the worker that completes first (:func:`run_order`'s last) if it ends by request ``i``'s
    arrival (:func:`complete`), else request ``i``'s arrival (:func:`arrival`), else END. Returns (the event,
    its time, the freed worker or −1, the next request, running workers, ``cend``)."""
    if n_run and (i >= len(g.win.t) or g.w.end[g.scr.order[n_run - 1]] <= g.win.t[i]):
        k = g.scr.order[n_run - 1]
        return COMPLETION, complete(g.w, k), k, i, n_run - 1, cend
    if i >= len(g.win.t):
        return END, 0, -1, i, n_run, cend
    now, i, cend, queued = arrival(g, i, cend)
    return ARRIVAL if queued else SHED, now, -1, i, n_run, cend


@njit(cache=True, inline='always')
def complete(w, k):
    """Worker ``k``'s batch completes (``Resources.complete``): its busy time, and it holds no batch; returns the
    completion time."""
    now = w.end[k]
    w.busy[k] += now - w.start[k]
    w.bid[k] = NONE
    w.free[k] = now
    w.size[k] = 0
    return now


@njit(cache=True, inline='always')
def arrival(g, i, cend):
    """Request ``i`` of the window arrives (``Engine._arrivals``): into its model's queue, or shed by admission
    control. Returns (its arrival time, the next request, the next ``cend``, whether it was queued); a shed
    request's feed chunk is closed here, a queued one's by the caller after its decisions."""
    sc, win, s, st = g.sc, g.win, g.s, g.st
    now = win.t[i]
    if not arrive(s, now, sc.admit, sc.arrival_ns, sc.max_lag_ns):
        i, cend = shed_request(s, win.shed, win.outcome, i, cend, st[ST_OFF], sc.chunk, st[ST_N], sc.arrival_ns,
                               DROPPED)
        return now, i, cend, False
    m = win.model[i]
    q_push(g.q.base, g.q.qh, g.q.qe, g.q.qd, g.q.qr, m, win.d[i], i)
    nz_set(g.scr.nz, m)
    return now, i + 1, cend, True


@njit(cache=True, inline='always')
def ready_at(g, i, now):
    """:func:`ready_us` for a chunked kernel's :data:`Run`: when a decision made at ``now`` takes effect."""
    return ready_us(g.s, g.win.t, g.win.shed, i, now, g.sc.active, g.sc.decision_ns, g.sc.arrival_ns)


@njit(cache=True, inline='always')
def decider(g, worker, arriving, n_idle):
    """The worker an event's next decision is for: on an arrival the lowest idle one (−1 when none is), else
    the freed ``worker``."""
    if not arriving:
        return worker
    return bit_lowest(g.scr.idle_bits) if n_idle else -1


@njit(cache=True, inline='always')
def set_idle(g, worker, idle):
    """Worker ``worker`` waits for work (``idle``) or no longer; returns the change of the idle count."""
    g.w.idle[worker] = idle
    if idle:
        nz_set(g.scr.idle_bits, worker)
        return 1
    nz_clear(g.scr.idle_bits, worker)
    return -1


@njit(cache=True, inline='always')
def save_loop(st, i, n_idle, nb):
    """The loop's resumable state (``st``) at a pause or the end."""
    st[ST_I] = i
    st[ST_NIDLE] = n_idle
    st[ST_NB] = nb

from shepherd.core.engine.fast import jitcache  # noqa: E402  (what it imports keys its JIT cache)

jitcache.refresh(__name__)
