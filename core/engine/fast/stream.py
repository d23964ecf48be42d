"""The ``chunked`` mode of the fast wing (:mod:`.`): a kernel fed a serving group's requests a chunk at a
time, for any number of serving groups.

Between chunks the requests and batches that became final are written out, so the kernel's own memory
follows the requests in flight, not the trace (``--record summary`` keeps running totals of them instead).
With several serving groups each group's kernel runs alone and the runs are merged: where every group's
requests fit one chunk, one batch log shared by the groups' kernels (:func:`_run_shared`), else the merge of
the groups' own logs (:func:`shepherd.core.engine.groups.merge`); the compiled clock replay
(:mod:`.replay`) numbers the batches as the single loop would.

A kernel module of this mode provides ``make(params, runtime, max_batch, sched, chunk, lat, w_hw)``: the
tuple (compiled run, its static arguments, its persistent state as a list, where the queues sit in that
list, whether the state has Flex's running-batch rows).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np
import polars as pl

from shepherd.core.engine import groups
from shepherd.core.engine.fast import unit_merge
from shepherd.core.engine.fast.common import (B_COLS, B_END, B_MODEL, B_PRE, B_PUSHED, B_SIZE, B_START, B_UA, B_UK,
                                              B_WORKER, NONE, S_CP, S_SHED, ST_BOFF, ST_I, ST_LAST, ST_N, ST_NB,
                                              ST_OFF, ST_UNITS, oldest, q_reserve, shift_running)
from shepherd.core.engine.fast.replay import gather_shared, packing, replay_ids, split

#: batch-log columns allocated beyond a chunk's requests before a kernel's loop asks for more (its GROW)
LOG_ROOM = 1024
#: the log shared by several groups' kernels (:func:`_run_shared`): columns per request allocated up front
#: (address space only until written; more batches than requests — preemptions — grow it)
SHARED_PER_REQUEST = 1


def run(engine: Any, module: str, params: Any, runtime: Any, max_batch: int) -> None:
    """Run the kernel of ``module`` on every serving group and write the tables into ``engine``'s recorder (or,
    with ``EngineConfig.record == "summary"``, only the summary's running aggregates)."""
    kernels = importlib.import_module(module)

    def make(sched: Any, lat: np.ndarray, w_hw: np.ndarray) -> tuple:
        return kernels.make(params, runtime, max_batch, sched, engine.config.chunk, lat, w_hw)

    lat = np.ascontiguousarray(np.array(runtime.lat, dtype=np.int64))
    step = engine.config.stream_chunk
    if len(engine.feeds) == 1 and engine.group_ids[0] is None:
        _one_group(engine, make, lat, step)
        return
    rids = [np.arange(len(engine.arrival), dtype=np.int64) if r is None else r for r in engine.group_ids]
    if engine.group_of is not None and max(len(r) for r in rids) <= step:
        _run_shared(engine, make, lat, rids, step, max_batch)
    else:
        _run_merged(engine, make, lat, rids, step)


def _one_group(engine: Any, make: Callable, lat: np.ndarray, step: int) -> None:
    """One serving group: the recorder's own columns, written as rows become final (or the running
    aggregates of ``--record summary``)."""
    rec, res = engine.rec, engine.res
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

    kernel = make(engine.sched[0], lat, np.array(res.w_hw, np.int64))
    shed = np.zeros(0 if agg is not None else len(engine.arrival), np.bool_)
    direct = None if agg is not None else (rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome,
                                           rec.r_preempt, shed)
    w_busy, w_waste, n_shed = _stream(kernel, engine.arrival, engine.deadline, engine.model, step, on_requests,
                                      on_batches, direct)
    if direct is not None and shed.any():  # written in place (one chunk): on_requests was not called
        shed_ids.frombytes(np.flatnonzero(shed).astype(np.int64).tobytes())
    rec.w_busy[:] = w_busy.tolist()
    rec.w_waste[:] = w_waste.tolist()
    engine.sched[0].shed = n_shed


def _run_merged(engine: Any, make: Callable, lat: np.ndarray, rids: list[np.ndarray], step: int) -> None:
    """Several serving groups, some fed in several chunks: each group's kernel with its own batch log, the
    runs merged by :func:`shepherd.core.engine.groups.merge` (the clock replay's batch ids)."""
    rec, res = engine.rec, engine.res
    n_groups = len(rids)
    runs, ids, arrivals = [], [], []
    total = sum(len(r) for r in rids)
    # every group's request columns in one array each, group after group (the merge reads them so)
    flat = (np.full(total, -1, np.int64), np.full(total, -1, np.int64), np.full(total, -1, np.int32),
            np.full(total, -1, np.int64), np.zeros(total, np.int8), np.zeros(total, np.int16),
            np.zeros(total, np.bool_))
    # every group's arrival, deadline and model columns too, in one pass over the trace's (.replay.split)
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
        kernel = make(engine.sched[g], lat, np.array([res.w_hw[w] for w in res.group_workers[g]], np.int64))
        w_busy, w_waste, n_shed = _stream(kernel, t, d_all[o:o + k], m_all[o:o + k], step, on_requests, on_batches,
                                          out, units=True)
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


def _piece(col: Any, lo: int, hi: int) -> np.ndarray:
    """Requests ``[lo, hi)`` of a trace column: a numpy array, or a polars Series (an Enum: its codes) read
    a chunk at a time."""
    if isinstance(col, np.ndarray):
        return col[lo:hi]
    part = col.slice(lo, hi - lo)
    return (part.to_physical() if part.dtype == pl.Enum else part).to_numpy()


def _stream(kernel: tuple, t_all: np.ndarray, d_all: np.ndarray, m_all: np.ndarray, step: int,
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
    run, static, state, q0, flex = kernel
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
    if log is not None and n > step:  # pragma: no cover - run shares a log only between one-chunk runs
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


def _run_shared(engine: Any, make: Callable, lat: np.ndarray, rids: list[np.ndarray], step: int,
                max_batch: int) -> None:
    """Several serving groups, each fed its requests in one chunk: the groups' kernels run one after the
    other and write their batches into one shared log, each numbering its batches from where the previous
    group's end (so a request's batch and a completion's unit key are the batch's column in that log); the
    clock replay numbers them globally and :func:`.replay.gather_shared` writes the recorder's tables.
    Same tables as the merge of separate logs (:func:`shepherd.core.engine.groups.merge`), with less
    memory touched — on this work a fresh page costs more than the writes to it (issue 18: the merge of a
    1M-request run on 400 workers was more than half page faults): no per-group log to concatenate, no
    per-row group or place columns, and the columns that only the kernels or the replay read (arrival,
    deadline, model; the log's unit rows) in memory already touched that the tables then take over."""
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
        kernel = make(engine.sched[g], lat, np.array([res.w_hw[w] for w in res.group_workers[g]], np.int64))
        state = kernel[2]
        state[-1][ST_NB] = boff[g]  # this group's batches after the previous groups'
        w_busy, w_waste, n_shed = _stream(kernel, t_all[o:o + k], d_all[o:o + k], m_all[o:o + k], step, ignore,
                                          lambda rows, final: None, out, units=True, log=log)
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


