"""The recorder: the only writer of request, batch, segment and worker rows.

Tables (all integer µs):

* requests — per request: ``r_start``, ``r_finish``, ``r_worker``, ``r_batch`` (−1 until served),
  ``r_outcome`` (:mod:`.outcomes`), ``r_preempt``;
* batches — per batch, in id order: worker (an allocation's first worker), model, size, start, end, preempted;
* segments — per piece of a multi-worker allocation (:mod:`.allocations`):
  batch, worker, start, end; a one-worker batch is its own segment;
* workers — per worker: ``busy`` (time running batches that completed, µs),
  ``waste`` (time running batches that were preempted), ``added``, ``removed``
  (lifetime; −1: to the end of the run).

Rows of batches a policy scheduled exactly on a reserved path (:meth:`~.paths.Paths.book_path`) are
*buffered* and written in one vectorised step (before any other row, so batch ids stay in call order, every
:data:`RECORD_CHUNK` paths, and when the run ends). Two modes, one set of tables (``EngineConfig.reserved``;
``tests/test_engine_golden.py``):

* ``events`` — the reference: each booked batch's completion is an event, at which its busy time is added and
  its requests buffered (``done_rids``, ``done_bids``: :meth:`.paths.Paths.drain`), their outcomes written
  from the batch table by :meth:`Recorder.flush_done`;
* ``record`` — :meth:`Recorder.record_path` writes a whole path's rows, busy times and outcomes at dispatch.

Buffers hold plain ints, never tuples (ints are not tracked by the cyclic garbage collector). Per-epoch
windows (:mod:`.windows`, Symphony §4.4) are computed from these tables; the canonical numbering's row moves
are :mod:`.numbering`'s, a summary-only run's totals :mod:`.aggregates`'.
"""

from __future__ import annotations

from array import array

import numpy as np
import polars as pl

from shepherd.core.engine.aggregates import SummaryAggregates
from shepherd.core.engine.numbering import canonical_moves, renumbered
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED

RECORD_CHUNK = 1 << 11  #: paths buffered between vectorised writes
DONE_CHUNK = 1 << 13  #: booked requests completed between vectorised outcome writes


def _col(a: array | np.ndarray) -> np.ndarray:
    if isinstance(a, np.ndarray):  # a whole column installed by :meth:`Recorder.set_batches`
        return a
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.empty(0, np.int64)


class Recorder:
    """Request, batch, segment and worker tables of one run (module docstring)."""

    __slots__ = ("deadline", "arrival", "r_start", "r_finish", "r_worker", "_r_batch", "r_outcome", "r_preempt",
                 "b_worker", "b_model", "b_size", "b_start", "b_end", "b_pre",
                 "s_batch", "s_worker", "s_start", "s_end",
                 "w_busy", "w_waste", "w_added", "w_removed",
                 "paths", "slots", "rids", "rows", "record", "done_rids", "done_bids", "aggregates",
                 "_unnumbered")

    def __init__(self, arrival: np.ndarray, deadline: np.ndarray, n_workers: int, record: bool,
                 summary_only: bool = False) -> None:
        n = 0 if summary_only else len(arrival)
        #: a run that keeps only what its summary needs (:class:`SummaryAggregates`; no request or batch rows)
        self.aggregates = SummaryAggregates(len(arrival)) if summary_only else None
        self.arrival, self.deadline = arrival, deadline
        self.r_start = np.full(n, -1, np.int64)
        self.r_finish = np.full(n, -1, np.int64)
        self.r_worker = np.full(n, -1, np.int32)
        self._r_batch = np.full(n, -1, np.int64)
        self._unnumbered = False  #: the canonical numbering is due at the next read of a batch id
        self.r_outcome = np.zeros(n, np.int8)
        self.r_preempt = np.zeros(n, np.int16)
        self.b_worker, self.b_model, self.b_size = array("q"), array("q"), array("q")
        self.b_start, self.b_end, self.b_pre = array("q"), array("q"), array("q")
        self.s_batch, self.s_worker, self.s_start, self.s_end = array("q"), array("q"), array("q"), array("q")
        self.w_busy = [0] * n_workers
        self.w_waste = [0] * n_workers
        self.w_added = [0] * n_workers
        self.w_removed = [-1] * n_workers
        self.record = record  #: True: the ``record`` mode (module docstring)
        #: buffered paths: (model, requests, stages) flat; their stages' (worker, start, duration) flat;
        #: (record mode) their request ids flat; and the number of buffered batch rows
        self.paths: list[int] = []
        self.slots: list[int] = []
        self.rids: list[int] = []
        self.rows = 0
        #: (events mode) requests whose booked final batch completed, and that batch's id
        self.done_rids: list[int] = []
        self.done_bids: list[int] = []

    # ------------------------------------------------------------------ batches

    def set_batches(self, worker: np.ndarray, model: np.ndarray, size: np.ndarray, start: np.ndarray,
                    end: np.ndarray, pre: np.ndarray) -> None:
        """Install a whole batch table at once (a compiled run's, :mod:`.fast`: int64 columns, used as they
        are, without a copy); nothing is appended to it afterwards."""
        if len(self.b_worker) or self.rows:  # pragma: no cover - a fast run writes its batches once
            raise RuntimeError("set_batches on a recorder that already has batches")
        self.b_worker, self.b_model, self.b_size, self.b_start, self.b_end, self.b_pre = (
            worker, model, size, start, end, pre)

    def n_batches(self) -> int:
        """Batch ids handed out so far (buffered rows included)."""
        return len(self.b_worker) + self.rows

    def batch(self, worker: int, model: int, size: int, start: int, end: int) -> int:
        """Add a row to the batch table; returns its batch id."""
        if self.paths:  # keep batch ids in call order
            self.flush_rows()
        bid = len(self.b_worker)
        self.b_worker.append(worker)
        self.b_model.append(model)
        self.b_size.append(size)
        self.b_start.append(start)
        self.b_end.append(end)
        self.b_pre.append(0)
        return bid

    def served(self, rids: list[int], start: int, end: int, worker: int, bid: int) -> None:
        """The outcomes of ``rids``, served by batch ``bid`` on ``worker`` over ``[start, end)``."""
        if len(rids) == 1:  # scalar writes: much cheaper than fancy indexing
            r = rids[0]
            self.r_start[r] = start
            self.r_finish[r] = end
            self.r_worker[r] = worker
            self._r_batch[r] = bid
            self.r_outcome[r] = SERVED if self.deadline[r] >= end else LATE
        else:
            idx = np.array(rids, dtype=np.int64)
            self.r_start[idx] = start
            self.r_finish[idx] = end
            self.r_worker[idx] = worker
            self._r_batch[idx] = bid
            self.r_outcome[idx] = LATE - (self.deadline[idx] >= end)

    def preempted(self, bid: int, stop: int, rids: list[int]) -> None:
        """Batch ``bid`` stopped at ``stop``; its requests go back to the policy."""
        self.b_end[bid] = stop
        self.b_pre[bid] = 1
        self.r_preempt[np.array(rids, dtype=np.int64)] += 1

    def end_batch(self, bid: int, end: int) -> None:
        """A batch's end moved (a resized allocation, :mod:`.allocations`)."""
        self.b_end[bid] = end

    def segment(self, bid: int, worker: int, start: int, end: int) -> None:
        """A piece of an allocation: ``worker`` ran batch ``bid`` over ``[start, end)`` (useful work)."""
        self.s_batch.append(bid)
        self.s_worker.append(worker)
        self.s_start.append(start)
        self.s_end.append(end)
        self.w_busy[worker] += end - start

    def dropped(self, rids: list[int]) -> None:
        if rids:
            self.r_outcome[np.array(rids, dtype=np.int64)] = DROPPED

    # ------------------------------------------------------------------ workers

    def add_worker(self, now: int) -> None:
        self.w_busy.append(0)
        self.w_waste.append(0)
        self.w_added.append(now)
        self.w_removed.append(-1)

    # ------------------------------------------------------------------ reserved paths (module docstring)

    def book_rows(self, model: int, size: int, slots: list[tuple[int, int, int]]) -> int:
        """Buffer the rows of a path booked in ``events`` mode; returns its first batch id."""
        bid = len(self.b_worker) + self.rows
        self.paths += (model, size, len(slots))
        flat = self.slots
        for slot in slots:
            flat += slot
        self.rows += len(slots)
        if len(self.paths) >= 3 * RECORD_CHUNK:
            self.flush_rows()
        return bid

    def record_path(self, model: int, rids: list[int], slots: list[tuple[int, int, int]], now: int) -> int:
        """``record`` mode: ``rids`` ran the path of batches ``(worker, start, duration)``, the last final,
        booked at ``now``; returns the last batch id. Written with the next flush."""
        flat = self.slots
        for slot in slots:
            if slot[1] < now or slot[2] <= 0:
                raise RuntimeError(f"worker {slot[0]}: cannot book [{slot[1]}, {slot[1] + slot[2]}) at {now}")
            flat += slot
        k = len(slots)
        paths = self.paths
        paths += (model, len(rids), k)
        self.rids += rids
        rows = self.rows = self.rows + k
        last = len(self.b_worker) + rows - 1
        if len(paths) >= 3 * RECORD_CHUNK:
            self.flush_rows()
        return last

    def flush_rows(self) -> None:
        """Write every buffered path's batch rows (and, in ``record`` mode, busy times and outcomes)."""
        paths, slots, rids = self.paths, self.slots, self.rids
        if not paths:
            return
        self.paths, self.slots, self.rids, self.rows = [], [], [], 0
        model, size, k = np.array(paths, dtype=np.int64).reshape(-1, 3).T
        flat = np.array(slots, dtype=np.int64).reshape(-1, 3)
        worker, start = flat[:, 0].copy(), flat[:, 1].copy()
        end = start + flat[:, 2]
        base = len(self.b_worker)
        self.b_worker.frombytes(worker.tobytes())
        self.b_model.frombytes(np.repeat(model, k).tobytes())
        self.b_size.frombytes(np.repeat(size, k).tobytes())
        self.b_start.frombytes(start.tobytes())
        self.b_end.frombytes(end.tobytes())
        self.b_pre.frombytes(np.zeros(len(start), np.int64).tobytes())
        if not self.record:
            return
        busy = np.zeros(len(self.w_busy), np.int64)
        np.add.at(busy, worker, flat[:, 2])
        for w in np.flatnonzero(busy).tolist():
            self.w_busy[w] += int(busy[w])
        last = np.repeat(np.cumsum(k) - 1, size)  # each request's final stage
        rid = np.array(rids, dtype=np.int64)
        self.r_start[rid] = start[last]
        self.r_finish[rid] = end[last]
        self.r_worker[rid] = worker[last]
        self._r_batch[rid] = base + last
        self.r_outcome[rid] = LATE - (self.deadline[rid] >= end[last])

    def flush_done(self) -> None:
        """Write the outcomes of completed booked batches (vectorised, from the batch table)."""
        if not self.done_rids:
            return
        if self.paths:
            self.flush_rows()
        rid = np.array(self.done_rids, dtype=np.int64)
        bid = np.array(self.done_bids, dtype=np.int64)
        self.done_rids.clear()  # in place: the run loop may hold these lists
        self.done_bids.clear()
        end = _col(self.b_end)[bid]
        self.r_start[rid] = _col(self.b_start)[bid]
        self.r_finish[rid] = end
        self.r_worker[rid] = _col(self.b_worker)[bid]
        self._r_batch[rid] = bid
        self.r_outcome[rid] = LATE - (self.deadline[rid] >= end)

    def flush(self) -> None:
        """Write everything buffered."""
        self.flush_rows()
        self.flush_done()

    @property
    def r_batch(self) -> np.ndarray:
        """Each request's batch id (−1: none), canonical once the run has ended (:meth:`canonical_batch_ids`)."""
        if self._unnumbered:
            self._number()
        return self._r_batch

    def canonical_batch_ids(self) -> None:
        """Number the batches by one canonical key at the end of a run (issue 30 item 1): (start, worker, the
        worker's own sequence). A batch id is a join key only; this one is the same whichever engine made
        the batches, in whatever order — the reference loop, a compiled kernel, serving groups run apart and
        concatenated. Reorders the batch table (a stable sort: one worker's batches at one start stay in the
        order it started them); the requests' and the segments' batch ids follow.

        Done at the first read of an id (:attr:`r_batch`, :meth:`batch_columns`, :meth:`segments`), not here:
        a run read only for its summary (counts, latencies, batch sizes: no id) never sorts its batches. The
        ids read are the same either way; nothing is appended to the tables after the run's end."""
        self.flush()
        self._unnumbered = True

    def _number(self) -> None:
        """The canonical numbering itself (:meth:`canonical_batch_ids`)."""
        self._unnumbered = False
        b = self.batch_columns()
        start, worker = b["start"], b["worker"]
        if len(start) < 2:
            return
        rows = canonical_moves(start, worker)
        if rows is None:
            return  # already in canonical order (a one-group run, mostly): nothing to renumber
        moved, src = rows
        # the rows that move (a few hundred in a million on a one-group run: decisions out of start order),
        # moved in place; then the requests' references to them (batch −1, "none", is none of them)
        cols = [b[k] for k in ("worker", "model", "size", "start", "end", "preempted")]
        cols = [c if c.flags.writeable else c.copy() for c in cols]
        for c in cols:
            c[moved] = c[src]
        self.b_worker, self.b_model, self.b_size, self.b_start, self.b_end, self.b_pre = cols
        self._r_batch[:] = renumbered(self._r_batch, src, moved, len(start))
        if len(self.s_batch):
            self.s_batch = array("q", renumbered(_col(self.s_batch).copy(), src, moved, len(start)).tobytes())

    # ------------------------------------------------------------------ derived tables

    def batch_columns(self, numbered: bool = True) -> dict[str, np.ndarray]:
        """The batch table's columns, in batch-id order; ``numbered=False``: in whatever order they are now
        (before the end-of-run numbering: what a statistic over all batches needs, no id)."""
        if numbered and self._unnumbered:
            self._number()
        self.flush_rows()
        return {"worker": _col(self.b_worker), "model": _col(self.b_model), "size": _col(self.b_size),
                "start": _col(self.b_start), "end": _col(self.b_end), "preempted": _col(self.b_pre)}

    def segments(self) -> pl.DataFrame:
        """Every (batch, worker, start, end) piece of work: one per one-worker batch, several per allocation."""
        b = self.batch_columns()
        alloc = np.unique(_col(self.s_batch))
        single = np.setdiff1d(np.arange(len(b["worker"]), dtype=np.int64), alloc)
        return pl.DataFrame({
            "batch_id": np.concatenate([single, _col(self.s_batch)]),
            "worker": np.concatenate([b["worker"][single], _col(self.s_worker)]).astype(np.int32),
            "start_us": np.concatenate([b["start"][single], _col(self.s_start)]),
            "end_us": np.concatenate([b["end"][single], _col(self.s_end)]),
        }).sort("batch_id", "start_us", "worker")

    def windows(self, epoch_us: int, end_us: int | None = None) -> pl.DataFrame:
        """Per-epoch signals from these tables (:func:`.windows.windows`)."""
        from shepherd.core.engine.windows import windows

        return windows(self, epoch_us, end_us)
