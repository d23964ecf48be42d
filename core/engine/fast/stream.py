"""The ``chunked`` mode of the fast wing (:mod:`.`): a kernel fed a serving group's requests a chunk at a
time, for any number of serving groups (each group's kernel alone: :func:`_run_groups`).

Between chunks the requests and batches that became final are written out, so the kernel's own memory
follows the requests in flight, not the trace (``--record summary`` keeps running totals of them instead).
A kernel module of this mode provides ``make(params, runtime, max_batch, sched, chunk, lat, w_hw)``: a
:class:`Kernel`, whose ``run(pol, sc, q, blog, w, s, st, win)`` returns the batch log (the records of
:mod:`.common`).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, NamedTuple

import numpy as np
import polars as pl

from shepherd.core.engine.fast.common import (B_COLS, B_END, B_MODEL, B_PRE, B_SIZE, B_START, B_WORKER, NONE, S_CP,
                                              S_SHED, ST_BOFF, ST_I, ST_LAST, ST_N, ST_NB, ST_OFF, Queues, Window,
                                              Workers, oldest, q_reserve, shift_running)
from shepherd.core.engine.column_room import read_only, slide
from shepherd.core.engine.fast import jitcache

#: batch-log columns allocated beyond a chunk's requests before a kernel's loop asks for more (its GROW)
LOG_ROOM = 1024
#: a :data:`.common.Window`'s column types, and what a new request's written columns start as
WINDOW_TYPES = (np.int64, np.int64, np.int64, np.int64, np.int64, np.int32, np.int64, np.int8, np.int16, np.bool_)
WINDOW_FILL = (None, None, None, -1, -1, -1, -1, 0, 0, False)


class Kernel(NamedTuple):
    """One group's kernel of this mode: its compiled run, the policy's tables, the scheduler clock's constants
    and the run's persistent state (queues, workers, clock state ``s``, loop state ``st``); ``preempts``:
    whether a running batch may still change (Flex), so its log rows are not final yet."""

    run: Callable
    pol: tuple
    sc: tuple
    q: Queues
    w: Workers
    s: np.ndarray
    st: np.ndarray
    preempts: bool


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
    _run_groups(engine, make, lat, rids, step)


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


def _run_groups(engine: Any, make: Callable, lat: np.ndarray, rids: list[np.ndarray], step: int) -> None:
    """Several serving groups, each group's kernel alone over its requests (``rids[g]``): their rows written
    group after group into the recorder's own columns (global workers and batch ids, the batch logs
    concatenated), then put in request order (:func:`_to_request_order`). Few full-size temporaries, on
    purpose: where a fresh page costs a fault, new arrays for a million requests cost more than the kernels."""
    rec, res = engine.rec, engine.res
    order = np.concatenate(rids)
    if len(order) != len(engine.arrival):  # pragma: no cover - group_order routes every request
        raise RuntimeError("serving groups that do not hold every request once")
    arrival, deadline, model = (np.asarray(c, np.int64) for c in (engine.arrival, engine.deadline, engine.model))
    shed, w_hw = np.zeros(len(order), np.bool_), np.asarray(res.w_hw, np.int64)
    cols = (rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome, rec.r_preempt, shed)
    logs: list[np.ndarray] = []
    lo = n_batches = 0
    for g, rid in enumerate(rids):
        hi = lo + len(rid)
        out = tuple(c[lo:hi] for c in cols)  # this group's rows, in group order; filled as WINDOW_FILL
        group_logs: list[np.ndarray] = []

        def on_requests(off, t, *part, out=out):
            for dst, col in zip(out, part):
                dst[off:off + len(t)] = col

        def on_batches(rows, final, group_logs=group_logs):  # the last call's rows stay as they are
            group_logs.append(rows if final else rows.copy())

        ws = np.asarray(res.group_workers[g], np.int64)
        kernel = make(engine.sched[g], lat, w_hw[ws])
        w_busy, w_waste, engine.sched[g].shed = _stream(kernel, arrival[rid], deadline[rid], model[rid], step,
                                                        on_requests, on_batches, out)
        log = group_logs[0] if len(group_logs) == 1 else np.concatenate(group_logs, axis=1) if group_logs else \
            np.empty((B_COLS, 0), np.int64)
        wmap = np.append(ws, -1)  # local worker −1 (never served): −1
        out[2][:] = wmap[out[2]]
        np.add(out[3], n_batches, out=out[3], where=out[3] >= 0)
        log[B_WORKER] = wmap[log[B_WORKER]]
        logs.append(log)
        n_batches += log.shape[1]
        for w, busy, waste in zip(ws.tolist(), w_busy.tolist(), w_waste.tolist()):
            rec.w_busy[w] += busy
            rec.w_waste[w] += waste
        lo = hi
    _to_request_order(cols[:6], order)
    engine.admission.shed_ids.frombytes(order[np.flatnonzero(shed)].tobytes())
    table = np.concatenate(logs, axis=1) if logs else np.empty((B_COLS, 0), np.int64)
    rec.set_batches(*(table[c] for c in (B_WORKER, B_MODEL, B_SIZE, B_START, B_END, B_PRE)))


def _to_request_order(cols: tuple, order: np.ndarray) -> None:
    """Columns written in group order (row ``j`` is request ``order[j]``'s) put in request order, in place,
    through one scratch buffer for all of them."""
    scratch = np.empty(len(order) * 8, np.uint8)
    for col in cols:
        held = scratch[:col.nbytes].view(col.dtype)
        held[:] = col
        col[order] = held


def _piece(col: Any, lo: int, hi: int) -> np.ndarray:
    """Requests ``[lo, hi)`` of a trace column: a numpy array, or a polars Series (an Enum: its codes) read
    a chunk at a time."""
    if isinstance(col, np.ndarray):
        return col[lo:hi]
    part = col.slice(lo, hi - lo)
    return (part.to_physical() if part.dtype == pl.Enum else part).to_numpy()


def _stream(kernel: Kernel, t_all: np.ndarray, d_all: np.ndarray, m_all: np.ndarray, step: int,
            on_requests: Any, on_batches: Any, out: tuple | None = None) -> tuple:
    """One group's kernel run over its requests fed ``step`` at a time (a window: the requests still queued
    or running, and the chunk's new ones). After each pause the final requests (neither queued nor running,
    and charged to the scheduler clock) go to ``on_requests(first_id, t, start, finish, worker, batch,
    outcome, preempt, shed)`` and the final batch-log rows (no longer running: a preemption can no longer
    change them) to ``on_batches(columns, final)`` (``final``: the last call, after which the log is not
    touched: its columns may be kept as they are); both in id order. When every request fits in one chunk and
    ``out`` holds whole request columns (start, finish, worker, batch, outcome, preemptions, shed), the
    kernel writes into those directly: no window, no copy. Returns (w_busy, w_waste, shed count)."""
    q, w, s, st = kernel.q, kernel.w, kernel.s, kernel.st
    n, n_models = len(t_all), kernel.pol.lat.shape[1]
    win = Window(*(np.empty(0, dt) for dt in WINDOW_TYPES))
    st[ST_N] = n
    # the batch log sized for a chunk's batches at one request each (it doubles past that; untouched room
    # costs no memory): no copies while it grows
    blog = np.empty((B_COLS, min(step, n) + LOG_ROOM), np.int64)
    pos, delta = 0, 0
    # ``oldest`` runs only between chunks: a run of one chunk that compiles its family calls it once at the
    # end, so a later run of many chunks loads it, not compiles it (one compile notice per family, issue 43)
    called_oldest, room = False, list(win)  # room: the window's memory, reused chunk after chunk (slide)
    while True:
        hi = min(n, pos + step)
        new_m = _piece(m_all, pos, hi).astype(np.int64, copy=False)
        running = np.zeros(n_models, np.int64)
        busy = w.bid >= 0
        np.add.at(running, w.model[busy], w.size[busy])
        shift_running(w.reqs, w.size, w.bid, delta)
        q = Queues(*q_reserve(*q, new_m, running, delta))
        st[ST_I] -= delta
        s[S_CP] -= delta
        st[ST_OFF] += delta
        fresh = (_piece(t_all, pos, hi), _piece(d_all, pos, hi), new_m)
        direct = out is not None and pos == 0 and hi == n and isinstance(t_all, np.ndarray)
        if direct:
            win = Window(*map(read_only, fresh), *out)
        else:
            cols, room = slide(win, room, delta, fresh, WINDOW_FILL, LOG_ROOM)
            win = Window(*cols)
        st[ST_LAST] = hi == n
        blog = kernel.run(kernel.pol, kernel.sc, q, blog, w, s, st, win)
        nbl = st[ST_NB] - st[ST_BOFF]
        if hi == n:
            lo, fin = len(win.t), nbl
            if not called_oldest and jitcache.compiling():  # compiled with the rest of the family (below)
                oldest(q.qh, q.qe, q.qr, w.reqs, w.size, w.bid, min(s[S_CP], st[ST_I]))
        else:
            called_oldest = True
            lo = oldest(q.qh, q.qe, q.qr, w.reqs, w.size, w.bid, min(s[S_CP], st[ST_I]))
            run_ids = w.bid[w.bid != NONE]
            fin = (int(run_ids.min()) - st[ST_BOFF]) if kernel.preempts and len(run_ids) else nbl
        if not direct:
            on_requests(int(st[ST_OFF]), *(col[:lo] for col in win[:1] + win[3:]))
        if fin:
            on_batches(blog[:, :fin], hi == n)
            blog[:, :nbl - fin] = blog[:, fin:nbl]
            st[ST_BOFF] += fin
        if hi == n:
            break
        pos, delta = hi, lo
    return w.busy, w.waste, int(s[S_SHED])
