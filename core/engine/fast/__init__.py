"""Compiled fast paths (issue 18; DESIGN.md "Two fidelities, one interface"): the reference engine's outcomes,
exactly, from a numba loop over arrays — for the policies and configurations listed here.

``EngineConfig.path`` picks the engine: ``"auto"`` (the default) runs a fast path where the policy has one
for the run's configuration and the reference engine otherwise; ``"fast"`` insists (a policy or
configuration without one is a one-line error naming those that have one); ``"reference"`` never uses one.
:func:`run_fast` writes the run's tables into the reference engine's recorder, so every table, summary and
artifact is built by the same code either way.

Serving groups (Herd groups, sub-clusters) never interact: each group's requests run through the kernel
alone, and with several groups the runs are merged — the kernels log, per batch, the unit that made it,
and the compiled clock replay numbers the batches as the single loop would (:func:`_run_shared` where every
group's requests fit one feed chunk: one batch log shared by the groups' kernels; else
:func:`shepherd.core.engine.groups.merge` of the groups' own logs). Shared kernel parts: :mod:`.common`; the kernels: :mod:`.clockwork`, :mod:`.flex`,
:mod:`.symphony` and :mod:`.nexus` (one serving group: their timers are not in the clock replay; Nexus plans
its epochs in Python with the policy's own planner, once per epoch, before its kernel runs), and :mod:`.ppipe`
(PPipe's data plane with its reserved paths recorded at dispatch, ``EngineConfig(reserved="record")``: the
probe/reserve tables as arrays; one serving group, no scheduler overhead).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import polars as pl

from shepherd.core.errors import UserError

#: policies with a fast path, and the configurations it covers (the error names them)
FAST = {
    "clockwork": "urgency=deadline, admission=none, schedule_ahead_ms=0, slo_buffer_ms=0, one hardware type per "
                 "serving group, overhead model|none",
    "flex": "overhead model|none",
    "flex-np": "overhead model|none",
    "symphony": "d_ctrl_us=0, d_data_us=0, autoscale_epoch_s=0, rule text|frontrun (any prune, rank, "
                "rate_window_ms), one serving group, overhead model|none",
    "symphony-wc": "d_ctrl_us=0, d_data_us=0, autoscale_epoch_s=0, rule text|frontrun (any prune, rank, "
                   "rate_window_ms), one serving group, overhead model|none",
    "nexus": "one serving group (any epoch_s, peak_window_s, provision, frontends, spare, hardware mix), overhead "
             "model|none",
    "ppipe": "engine reserved=record (any wait and rule switches: uplink_score, head_drop, slot_receive, "
             "stage_servers, fill_wait, transfer_round), one serving group, overhead none",
}


#: batch-log columns allocated beyond a chunk's requests before a kernel's loop asks for more (its GROW)
LOG_ROOM = 1024
#: the log shared by several groups' kernels (:func:`_run_shared`): columns per request allocated up front
#: (address space only until written; more batches than requests — preemptions — grow it)
SHARED_PER_REQUEST = 1

#: the kernels fed a chunk at a time (:func:`_stream`; ``--record summary`` keeps running totals for them)
STREAMED = ("clockwork", "flex", "flex-np")
SYMPHONY = ("symphony", "symphony-wc")
#: the kernels fed the whole trace at once, one serving group (their timers are not in the clock replay)
WHOLE = (*SYMPHONY, "nexus")


def names() -> list[str]:
    return sorted(FAST)


def why_not(policy: str, config: Any, overhead: Any, w_hw: list[int], group_workers: list[list[int]],
            engine: Any = None) -> str | None:
    """Why ``policy`` has no fast path for this configuration (one line), or None if it has one; ``w_hw`` is
    each worker's hardware index, ``group_workers`` each serving group's workers, ``engine`` the run's
    ``EngineConfig`` (None: the defaults)."""
    if policy not in FAST:
        return f"policy '{policy}' has no fast path (--engine fast: {', '.join(names())}); use --engine reference"
    ok = overhead.mode in ("model", "none")
    if policy == "ppipe":
        ok = overhead.mode == "none" and len(group_workers) == 1 and getattr(engine, "reserved", "events") == "record"
    if policy == "clockwork":
        cfg = dataclasses.asdict(config)
        one_hw = all(len({w_hw[w] for w in ws}) <= 1 for ws in group_workers)
        ok = (ok and cfg.get("urgency") == "deadline" and cfg.get("admission") == "none" and one_hw
              and cfg.get("schedule_ahead_ms") == 0 and cfg.get("slo_buffer_ms") == 0)
    if policy in SYMPHONY:
        ok = (ok and config.d_ctrl_us == 0 and config.d_data_us == 0 and config.autoscale_epoch_s == 0
              and len(group_workers) == 1 and config.rule in ("text", "frontrun"))
    if policy == "nexus":
        ok = ok and len(group_workers) == 1
    if not ok:
        return f"the fast path of '{policy}' covers {FAST[policy]}; use --engine reference"
    return None


def _kernel(policy: str, config: Any, runtime: Any, max_batch: int, sched: Any, chunk: int, lat: np.ndarray,
            w_hw: np.ndarray) -> tuple:
    """(kernel, its static arguments, its persistent state as a list, where the queues sit in that list)."""
    common = (sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
              sched.max_lag_ns, chunk)
    if policy == "clockwork":
        from shepherd.core.engine.fast.clockwork import init_clockwork, run_clockwork

        state = list(init_clockwork(lat, w_hw, lat.shape[1]))
        return run_clockwork, (lat, w_hw, max_batch, *common), state, 0
    from shepherd.core.engine.fast.flex import init_flex, run_flex
    from shepherd.core.policies.flex import DEFAULT_EXIT_POINTS

    exits = np.array([config.exit_points or e or DEFAULT_EXIT_POINTS
                      for e in (runtime.exit_points or [0] * lat.shape[1])], np.int64)
    state = list(init_flex(lat, w_hw, max_batch, bool(config.preemption), lat.shape[1]))
    return run_flex, (lat, w_hw, max_batch, float(config.lam), bool(config.preemption), exits, *common), state, 1


def _piece(col: Any, lo: int, hi: int) -> np.ndarray:
    """Requests ``[lo, hi)`` of a trace column: a numpy array, or a polars Series (an Enum: its codes) read
    a chunk at a time."""
    if isinstance(col, np.ndarray):
        return col[lo:hi]
    part = col.slice(lo, hi - lo)
    return (part.to_physical() if part.dtype == pl.Enum else part).to_numpy()


def _stream(kernel: tuple, t_all: np.ndarray, d_all: np.ndarray, m_all: np.ndarray, step: int, flex: bool,
            on_requests: Any, on_batches: Any, out: tuple | None = None, units: bool = False,
            log: np.ndarray | None = None) -> tuple:
    """One group's kernel run over its requests fed ``step`` at a time (a window: the requests still queued
    or running, and the chunk's new ones). After each pause the final requests (neither queued nor running,
    and charged to the scheduler clock) go to ``on_requests(first_id, t, start, finish, worker, batch,
    outcome, preempt, shed)`` and the final batch-log rows (no longer running: a preemption can no longer
    change them) to ``on_batches(columns, final)`` (``final``: the last call, after which the log is not
    touched: its columns may be kept as they are); both in id order. When every request fits in one chunk and
    ``out`` holds whole request columns (start, finish, worker, batch, outcome, preemptions, shed), the
    kernel writes into those directly: no window, no copy. ``units``: the log keeps each batch's unit and
    pushed end (the clock replay of several groups needs them). ``log``: a batch log to write into (whose
    first ``st[ST_NB]`` columns, other groups' batches, stay: the kernel numbers its batches from there; one
    chunk only, ``on_batches`` then gets every column). Returns (w_busy, w_waste, shed count)."""
    from shepherd.core.engine.fast.common import (B_COLS, B_PRE, NONE, S_CP, S_SHED, ST_BOFF, ST_I, ST_LAST, ST_N,
                                                  ST_NB, ST_OFF, ST_UNITS, oldest, q_reserve, shift_running)

    run, static, state, q0 = kernel
    base = q0  # the queues: state[q0:q0 + 5]; then the batch log; the state vector last, after s
    st, s = state[-1], state[-2]
    w_bid = state[q0 + 9] if flex else state[q0 + 8]
    n, n_models = len(t_all), static[0].shape[1]
    n_workers = len(static[1])
    if flex:
        w_model, w_size, w_reqs = state[q0 + 10], state[q0 + 11], state[q0 + 12]
    else:
        w_model, w_size, w_reqs = (np.zeros(n_workers, np.int64), np.zeros(n_workers, np.int64),
                                   np.zeros((n_workers, 1), np.int64))
    win = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
           np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int8),
           np.empty(0, np.int16), np.empty(0, np.bool_))
    fills = (None, None, None, -1, -1, -1, -1, 0, 0, False)
    st[ST_N] = n
    st[ST_UNITS] = units
    kept = B_COLS if units else B_PRE + 1  # the log rows written (the others' pages are never touched)
    # the batch log sized for a chunk's batches at one request each (it doubles past that; untouched room
    # costs no memory): no copies while it grows
    if log is not None and n > step:  # pragma: no cover - run_fast shares a log only between one-chunk runs
        raise ValueError("a shared batch log needs the group's requests in one chunk")
    state[base + 5] = np.empty((B_COLS, min(step, n) + LOG_ROOM), np.int64) if log is None else log
    pos, delta = 0, 0
    while True:
        hi = min(n, pos + step)
        new_m = _piece(m_all, pos, hi).astype(np.int64, copy=False)
        running = np.zeros(n_models, np.int64)
        if flex:
            busy = w_bid >= 0
            np.add.at(running, w_model[busy], w_size[busy])
            shift_running(w_reqs, w_size, w_bid, delta)
        state[base:base + 5] = q_reserve(*state[base:base + 5], new_m, running, delta)
        st[ST_I] -= delta
        s[S_CP] -= delta
        st[ST_OFF] += delta
        fresh = (_piece(t_all, pos, hi), _piece(d_all, pos, hi), new_m)
        direct = out is not None and pos == 0 and hi == n and isinstance(t_all, np.ndarray)
        if direct:
            win = (*fresh, *out)
        else:
            win = tuple(np.concatenate((col[delta:], fresh[j] if j < 3 else np.full(hi - pos, fills[j], col.dtype)))
                        for j, col in enumerate(win))
        st[ST_LAST] = hi == n
        blog = run(*static, *state, *win)
        state[base + 5] = blog
        nbl = st[ST_NB] - st[ST_BOFF]
        if hi == n:
            lo, fin = len(win[0]), nbl
        else:
            lo = oldest(state[base + 1], state[base + 2], state[base + 4], w_reqs, w_size, w_bid,
                        min(s[S_CP], st[ST_I]))
            run_ids = w_bid[w_bid != NONE]
            fin = (int(run_ids.min()) - st[ST_BOFF]) if flex and len(run_ids) else nbl
        if not direct:
            on_requests(int(st[ST_OFF]), *(col[:lo] for col in win[:1] + win[3:]))
        if fin:
            on_batches(blog[:, :fin], hi == n)
            blog[:kept, :nbl - fin] = blog[:kept, fin:nbl]
            st[ST_BOFF] += fin
        if hi == n:
            break
        pos, delta = hi, lo
    return state[q0 + 13 if flex else q0 + 10], state[q0 + 14] if flex else np.zeros(n_workers, np.int64), int(
        s[S_SHED])


def _run_whole(engine: Any, policy: str, config: Any, runtime: Any, max_batch: int, lat: np.ndarray,
               make_policy: Callable[[int], Any] | None) -> list[dict]:
    """A kernel over the whole trace of the one serving group (Symphony's, Nexus's), writing the recorder's
    columns in place; the policy's counters. ``make_policy(g)`` builds group ``g``'s policy object as the
    reference would (Nexus plans with it)."""
    from shepherd.core.engine.fast.common import B_END, B_MODEL, B_PRE, B_SIZE, B_START, B_WORKER

    rec, sched = engine.rec, engine.sched[0]
    common = (sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
              sched.max_lag_ns, engine.config.chunk)
    shed = np.zeros(len(engine.arrival), np.bool_)
    out = (rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome, rec.r_preempt, shed)
    w_hw = np.array(engine.res.w_hw, np.int64)
    # one compiled signature: a trace read from a file hands read-only columns, which numba types apart (a
    # second ~40 s compile); a copy of those
    t, d = (np.require(col, np.int64, ["C", "W"]) for col in (engine.arrival, engine.deadline))
    if policy == "nexus":
        from shepherd.core.engine.fast import nexus

        if make_policy is None:
            raise ValueError("the Nexus fast path plans with the policy object: run_fast needs make_policy")
        blog, w_busy, w_waste, n_shed, stats = nexus.run_group(lambda: make_policy(0), config, common, lat, w_hw,
                                                               t, d, out)
    else:
        from shepherd.core.engine.fast.symphony import run_group

        blog, w_busy, w_waste, n_shed, stats = run_group(policy, config, runtime, max_batch, common, lat, w_hw, t, d,
                                                         np.require(engine.model, np.int64, ["C", "W"]), out)
    for name, c in (("b_worker", B_WORKER), ("b_model", B_MODEL), ("b_size", B_SIZE), ("b_start", B_START),
                    ("b_end", B_END), ("b_pre", B_PRE)):
        getattr(rec, name).frombytes(np.ascontiguousarray(blog[c]).tobytes())
    rec.w_busy[:] = w_busy.tolist()
    rec.w_waste[:] = w_waste.tolist()
    sched.shed = int(n_shed)
    engine.admission.shed_ids.frombytes(np.flatnonzero(shed).astype(np.int64).tobytes())
    return [stats]


def _run_shared(engine: Any, policy: str, config: Any, runtime: Any, max_batch: int, lat: np.ndarray,
                rids: list[np.ndarray], step: int, flex: bool) -> None:
    """Several serving groups, each fed its requests in one chunk: the groups' kernels run one after the
    other and write their batches into one shared log, each numbering its batches from where the previous
    group's end (so a request's batch and a completion's unit key are the batch's column in that log); the
    clock replay numbers them globally and :func:`.replay.gather_shared` writes the recorder's tables.
    Same tables as the merge of separate logs (:func:`shepherd.core.engine.groups.merge`), with less
    memory touched — on this work a fresh page costs more than the writes to it (issue 18: the merge of a
    1M-request run on 400 workers was more than half page faults): no per-group log to concatenate, no
    per-row group or place columns, and the columns that only the kernels or the replay read (arrival,
    deadline, model; the log's unit rows) in memory already touched that the tables then take over."""
    from shepherd.core.engine.fast.common import B_COLS, B_PRE, B_PUSHED, B_UA, B_UK, ST_NB
    from shepherd.core.engine.fast import unit_merge
    from shepherd.core.engine.fast.replay import gather_shared, packing, replay_ids, split

    rec, res = engine.rec, engine.res
    n_groups = len(rids)
    roff = np.concatenate([[0], np.cumsum([len(r) for r in rids])]).astype(np.int64)
    total = int(roff[-1])
    # every group's request columns in one array each, group after group, in request order
    flat = (np.full(total, -1, np.int64), np.full(total, -1, np.int64), np.full(total, -1, np.int32),
            np.full(total, -1, np.int64), np.zeros(total, np.int8), np.zeros(total, np.int16),
            np.zeros(total, np.bool_))
    # the kernels' arrival, deadline and model columns, group after group, in the recorder's start, finish
    # and batch columns: memory already touched (a fresh page costs more than the writes to it) that nothing
    # reads before gather_shared writes the requests' rows there, after the replay
    if total != len(rec.r_start):  # pragma: no cover - every request is in a group (Engine routes them all)
        raise ValueError("a request in no serving group")
    t_all, d_all, m_all = rec.r_start, rec.r_finish, rec.r_batch
    split(engine.group_of, roff, np.asarray(engine.arrival, np.int64), np.asarray(engine.deadline, np.int64),
          engine.model, t_all, d_all, m_all, np.empty(0, np.int64))
    # room for a batch per request and one event's worth (untouched room costs no memory; a kernel grows it
    # — a copy of every group's columns so far — if preemptions make more batches than that)
    most = max(len(ws) for ws in res.group_workers)
    log = np.empty((B_COLS, SHARED_PER_REQUEST * total + LOG_ROOM + most * (max_batch + 1) + 1), np.int64)
    boff = np.zeros(n_groups + 1, np.int64)

    def ignore(*_a):  # pragma: no cover - one chunk per group: the columns are written in place
        raise AssertionError("a one-chunk group run streamed its rows")

    for g in range(n_groups):
        o, k = int(roff[g]), int(roff[g + 1] - roff[g])
        out = tuple(col[o:o + k] for col in flat)
        kernel = _kernel(policy, config, runtime, max_batch, engine.sched[g], engine.config.chunk, lat,
                         np.array([res.w_hw[w] for w in res.group_workers[g]], np.int64))
        state = kernel[2]
        state[-1][ST_NB] = boff[g]  # this group's batches after the previous groups'
        w_busy, w_waste, n_shed = _stream(kernel, t_all[o:o + k], d_all[o:o + k], m_all[o:o + k], step, flex,
                                          ignore, lambda rows, final: None, out, units=True, log=log)
        log = state[kernel[3] + 5]  # grown, perhaps
        boff[g + 1] = state[-1][ST_NB]
        engine.sched[g].shed = n_shed
        ws = res.group_workers[g]
        for w, busy, waste in zip(ws, w_busy.tolist(), w_waste.tolist()):
            rec.w_busy[w] += busy
            rec.w_waste[w] += waste
        engine.admission.shed_ids.extend(rids[g][np.flatnonzero(out[6])].tolist())
    nb = int(boff[-1])
    if nb >= 1 << 32:  # pragma: no cover - gather_shared packs a log column in 32 bits
        raise ValueError("more than 2^32 batches")
    # the trace's own arrival column where it is sorted (a cursor over it replaces the replay's arrival heap)
    # (each request's group in the router's own integer type: a 1M-request int64 copy cost ≈ 3 ms of page faults)
    arr, grp = np.asarray(engine.arrival, np.int64), np.ascontiguousarray(engine.group_of)
    walk = len(arr) < 2 or bool((arr[1:] >= arr[:-1]).all())
    # the merge of the groups' units where it decides every tie (unit_merge: the ids in the log's unit-kind
    # row), else the walk or a heap replay (the ids over the pushed ends, which only the replay reads)
    kb = np.zeros(n_groups, np.int64)
    shift, seq_bits, fits = packing(log[B_PUSHED, :nb], t_all, n_groups)
    merged = (unit_merge.merge_ids(log[B_UA, :nb], log[B_UK, :nb], log[B_PUSHED, :nb], boff, kb, t_all, roff, arr,
                                   grp, shift, seq_bits) if walk and fits and unit_merge.ENABLED else None)
    if merged is None:
        gid = replay_ids(log[B_UA, :nb], log[B_UK, :nb], log[B_PUSHED, :nb], log[B_PRE, :nb], boff, t_all, roff, kb,
                         log[B_PUSHED, :nb], arr if walk else None, grp if walk else None)
        src = np.empty(0, np.int64)
    else:
        gid, src = merged
    woff = np.concatenate([[0], np.cumsum([len(ws) for ws in res.group_workers])]).astype(np.int64)
    wflat = np.concatenate([np.asarray(ws, np.int64) for ws in res.group_workers])
    # the batch table's columns in memory already touched as well: the log's unit rows, read by the replay
    # only (the last holds the ids, which gather_shared reads before it writes the batches), and (where
    # there are no more batches than requests) the request rows' start, finish and batch, read before too
    cols = [log[B_UA, :nb], log[B_UK, :nb], log[B_PUSHED, :nb]]
    if nb <= total:
        cols += [flat[c][:nb] for c in (0, 1, 3)]
    else:  # pragma: no cover - more batches than requests (preemptions re-batch requests): not met in the tests
        cols += list(np.empty((3, nb), np.int64))
    gather_shared(gid, src, boff, woff, wflat, log, *cols, engine.group_of, roff, *flat[:6], rec.r_start, rec.r_finish,
                  rec.r_worker, rec.r_batch, rec.r_outcome, rec.r_preempt)
    rec.set_batches(*cols)


def run_fast(engine: Any, policy: str, config: Any, runtime: Any, max_batch: int,
             make_policy: Callable[[int], Any] | None = None) -> list[dict] | None:
    """Run the policy's fast path on every serving group and write the tables into ``engine``'s recorder
    (or, with ``EngineConfig.record == "summary"``, only the summary's running aggregates); returns the
    policy's counters per group where its kernel keeps them (Symphony's; Nexus's, none), else None.
    ``make_policy(g)``: group ``g``'s policy object as the reference engine would build it, with the run's
    generator in the state the reference's constructor finds it (Nexus plans its epochs with it)."""
    from shepherd.core.engine import groups
    from shepherd.core.engine.fast.common import B_END, B_MODEL, B_PRE, B_SIZE, B_START, B_WORKER

    if policy == "ppipe":  # one serving group (why_not), the whole trace at once
        if not len(engine.arrival):
            return [{"probes": 0, "dispatched": 0}]
        from shepherd.core.engine.fast.ppipe import run_group as run_ppipe

        return [run_ppipe(engine, config, runtime)]
    if not len(engine.arrival):  # nothing to run: Symphony's counters are zero, as the reference reports them
        if policy in SYMPHONY:
            from shepherd.core.engine.fast.symphony import COUNTERS

            return [dict.fromkeys(COUNTERS, 0) for _ in engine.feeds]
        return None

    lat = np.ascontiguousarray(np.array(runtime.lat, dtype=np.int64))
    rec, res = engine.rec, engine.res
    step = engine.config.stream_chunk
    flex = policy != "clockwork"
    n_groups = len(engine.feeds)
    if policy in WHOLE:  # one serving group (why_not), the whole trace at once
        return _run_whole(engine, policy, config, runtime, max_batch, lat, make_policy)
    if n_groups == 1 and engine.group_ids[0] is None:  # the recorder's own columns, written as rows become final
        agg = rec.aggregates
        shed_ids = engine.admission.shed_ids

        def on_requests(off, t, start, finish, worker, batch, outcome, preempt, shed):
            if agg is not None:
                agg.requests(t, start, finish, outcome, preempt)
            else:
                hi = off + len(t)
                rec.r_start[off:hi], rec.r_finish[off:hi], rec.r_worker[off:hi] = start, finish, worker
                rec.r_batch[off:hi], rec.r_outcome[off:hi], rec.r_preempt[off:hi] = batch, outcome, preempt
            shed_ids.frombytes((np.flatnonzero(shed) + off).astype(np.int64).tobytes())

        def on_batches(rows, final):
            if agg is not None:
                agg.batches(rows[B_SIZE], rows[B_END], rows[B_PRE])
                return
            if final and not len(rec.b_worker):  # the whole table at once: its rows are the columns
                rec.set_batches(*(rows[c] for c in (B_WORKER, B_MODEL, B_SIZE, B_START, B_END, B_PRE)))
                return
            for name, c in (("b_worker", B_WORKER), ("b_model", B_MODEL), ("b_size", B_SIZE),
                            ("b_start", B_START), ("b_end", B_END), ("b_pre", B_PRE)):
                getattr(rec, name).frombytes(memoryview(rows[c]).cast("B"))

        kernel = _kernel(policy, config, runtime, max_batch, engine.sched[0], engine.config.chunk, lat,
                         np.array(res.w_hw, np.int64))
        shed = np.zeros(0 if agg is not None else len(engine.arrival), np.bool_)
        direct = None if agg is not None else (rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome,
                                               rec.r_preempt, shed)
        w_busy, w_waste, n_shed = _stream(kernel, engine.arrival, engine.deadline, engine.model, step, flex,
                                          on_requests, on_batches, direct)
        if direct is not None and shed.any():  # written in place (one chunk): on_requests was not called
            shed_ids.frombytes(np.flatnonzero(shed).astype(np.int64).tobytes())
        rec.w_busy[:] = w_busy.tolist()
        rec.w_waste[:] = w_waste.tolist()
        engine.sched[0].shed = n_shed
        return
    rids = [np.arange(len(engine.arrival), dtype=np.int64) if r is None else r for r in engine.group_ids]
    if engine.group_of is not None and max(len(r) for r in rids) <= step:
        _run_shared(engine, policy, config, runtime, max_batch, lat, rids, step, flex)
        return None
    runs, ids, arrivals = [], [], []
    total = sum(len(r) for r in rids)
    # every group's request columns in one array each, group after group (the merge reads them so)
    flat = (np.full(total, -1, np.int64), np.full(total, -1, np.int64), np.full(total, -1, np.int32),
            np.full(total, -1, np.int64), np.zeros(total, np.int8), np.zeros(total, np.int16),
            np.zeros(total, np.bool_))
    # every group's arrival, deadline and model columns too, in one pass over the trace's (.replay.split)
    from shepherd.core.engine.fast.replay import split

    roff = np.concatenate([[0], np.cumsum([len(r) for r in rids])]).astype(np.int64)
    t_all, d_all, m_all = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, np.int64)
    inv = np.empty(len(engine.arrival), np.int64)  # every request is in a group: split writes every place
    if engine.group_of is not None:
        split(engine.group_of, roff, np.asarray(engine.arrival, np.int64), np.asarray(engine.deadline, np.int64),
              engine.model, t_all, d_all, m_all, inv)
    else:  # pragma: no cover - several groups are always routed (Engine)
        inv[:] = -1
        for g, rid in enumerate(rids):
            sl = slice(roff[g], roff[g + 1])
            t_all[sl], d_all[sl], m_all[sl], inv[rid] = (engine.arrival[rid], engine.deadline[rid], engine.model[rid],
                                                         np.arange(roff[g], roff[g + 1]))
    for g in range(n_groups):
        rid = rids[g]
        o, k = int(roff[g]), len(rid)
        out = tuple(col[o:o + k] for col in flat)
        logs: list[np.ndarray] = []

        def on_requests(off, t, *cols, out=out):
            for dst, col in zip(out, cols):
                dst[off:off + len(t)] = col

        def on_batches(rows, final, logs=logs):  # the last call's rows stay as they are (the log is done)
            logs.append(rows if final else rows.copy())

        t = t_all[o:o + k]
        kernel = _kernel(policy, config, runtime, max_batch, engine.sched[g], engine.config.chunk, lat,
                         np.array([res.w_hw[w] for w in res.group_workers[g]], np.int64))
        w_busy, w_waste, n_shed = _stream(kernel, t, d_all[o:o + k], m_all[o:o + k], step, flex,
                                          on_requests, on_batches, out, units=True)
        engine.sched[g].shed = n_shed
        cols = (logs[0] if len(logs) == 1 else np.concatenate(logs, axis=1)) if logs else np.empty((9, 0), np.int64)
        runs.append(groups.GroupRun(
            *out[:6], {"worker": cols[0], "model": cols[1], "size": cols[2], "start": cols[3], "end": cols[4],
                       "preempted": cols[5]},
            w_busy.tolist(), w_waste.tolist(), np.flatnonzero(out[6]).astype(np.int64),
            cols[6], cols[7], cols[8], {}, log=cols))
        ids.append(rid)
        arrivals.append(t)
    groups.merge(engine, runs, ids, [list(ws) for ws in res.group_workers], arrivals, flat[:6], t_all, inv)
    return None
