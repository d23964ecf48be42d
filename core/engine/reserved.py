"""Batches a reserving policy has scheduled exactly: booked (engine-executed) and recorded (direct).

A policy that reserves every resource ahead of time (PPipe §5.4, Appendix
A.3: probe/reserve over vGPUs and NIC links) knows at dispatch when each of
its batches will run. Two fidelities, one outcome (``tests/test_ppipe_dataplane.py``):

* :meth:`ReservedBatches.book_path` — the reference. Each batch of the path is
  an engine batch: a row of the batch table at dispatch, and a completion event
  at its end at which the engine checks that the worker was not double-booked
  (against every batch of that worker, started or booked), adds the worker's
  busy time, writes the requests' outcomes (final batch) and calls the policy's
  ``on_completion``. A booked batch does not hold the worker's
  :meth:`~shepherd.core.engine.loop.Engine.start_batch` slot (``busy()`` stays
  False): a reservation may be booked into a gap *before* batches already
  booked on the same worker (Algorithm 2 inserts into gaps), which one
  "current batch" per worker cannot express. No timer per batch is needed —
  the reserved start is known when the path is booked.
* :meth:`ReservedBatches.record_batch` / :meth:`ReservedBatches.record_path` —
  the fast fidelity: everything written at dispatch, no event.

Per-request outcomes of booked batches are buffered as (request, batch id)
and written in one vectorised step (start, finish and worker come from the
batch table) every :data:`DONE_CHUNK` requests and when the run ends; recorded
paths likewise (:data:`RECORD_CHUNK`). Nothing reads the outcome arrays
during a run.
"""

from __future__ import annotations

from heapq import heappush
from itertools import chain

import numpy as np

from shepherd.core.engine.events import COMPLETION
from shepherd.core.engine.outcomes import LATE, SERVED

RECORD_CHUNK = 1 << 11  #: paths buffered by record_path between vectorised writes
DONE_CHUNK = 1 << 13  #: booked requests completed between vectorised outcome writes


class ReservedBatches:
    """Engine actions for exactly scheduled batches (mixed into :class:`~shepherd.core.engine.loop.Engine`)."""

    def _init_reserved(self) -> None:
        #: single-request paths recorded by :meth:`record_path` and not yet written:
        #: (model, request, stages) flat, and the stages' (worker, start, duration)
        self.rec_paths: list[int] = []
        self.rec_slots: list[tuple[int, int, int]] = []
        #: requests whose booked final batch completed, and that batch's id (not yet written)
        self.done_rids: list[int] = []
        self.done_bids: list[int] = []

    # ------------------------------------------------------------------ booked (engine-executed)

    def book_path(self, model: int, rids: list[int], slots: list[tuple[int, int, int]], now: int,
                  final: bool = True) -> int:
        """Book ``rids`` (all of ``model``) on batches ``(worker, start, duration)`` run in turn; returns the last batch id.

        Each batch runs over ``[start, start + duration)`` as reserved, and
        its completion is an event (module docstring); the last batch is
        ``final`` (its completion writes the requests' outcomes), the others
        are intermediate stages. The reservation is the policy's: the group's
        scheduler-overhead clock is charged for the decision, and a booked
        start before the decision takes effect is a policy error (a reserving
        policy that models overhead reserves from ``decision_time``); in
        ``emulation`` mode the measured cost is charged only.
        """
        if self.rec_paths:  # keep batch ids in call order
            self._flush_recorded()
        n = len(rids)
        if self.sched_active:
            g = self.w_group[slots[0][0]]
            sched = self.sched[g]
            if sched.arrival_ns:
                self._charge_until(g, now)
            disp = sched.decide(now, n)
            if disp > slots[0][1] and not sched.emulate:
                raise RuntimeError(f"batch booked at {slots[0][1]} before the scheduler decides it ({disp})")
        events = self.events
        heap, seq, until = events.heap, events.seq, self.until
        bw, bm, bs, b0, b1, bp = self.b_worker, self.b_model, self.b_size, self.b_start, self.b_end, self.b_pre
        last = len(slots) - 1
        bid = len(bw)
        for j, (w, start, dur) in enumerate(slots):
            if start < now or dur <= 0:
                raise RuntimeError(f"worker {w}: cannot book [{start}, {start + dur}) at {now}")
            end = start + dur
            bw.append(w)
            bm.append(model)
            bs.append(n)
            b0.append(start)
            b1.append(end)
            bp.append(0)
            seq += 1
            heappush(heap, (end, COMPLETION, seq, ~bid, rids if final and j == last else None))
            if end < until:
                until = end
            bid += 1
        events.seq, self.until = seq, until
        return bid - 1

    def _complete_booked(self, bid: int, now: int, rids: list[int] | None) -> int:
        """Booked batch ``bid`` ends at ``now``: check, account, buffer outcomes; returns its worker.

        Batches of one worker complete in end order; they are disjoint iff
        each starts no earlier than the previous completion on that worker and
        no started batch is running across it (one check per completion).
        """
        w = self.b_worker[bid]
        start = self.b_start[bid]
        if start < self.w_free[w] or (self.w_batch[w] >= 0 and self.w_start[w] < now):
            raise RuntimeError(f"worker {w}: booked batch {bid} [{start}, {now}) overlaps another batch")
        self.w_free[w] = now
        self.w_busy[w] += now - start
        if rids is not None:
            if len(rids) == 1:
                self.done_rids.append(rids[0])
                self.done_bids.append(bid)
            else:
                self.done_rids += rids
                self.done_bids += [bid] * len(rids)
            if len(self.done_rids) >= DONE_CHUNK:
                self._flush_done()
        return w

    def _flush_done(self) -> None:
        """Write the outcomes of completed booked batches (vectorised, from the batch table)."""
        if not self.done_rids:
            return
        rid = np.array(self.done_rids, dtype=np.int64)
        bid = np.array(self.done_bids, dtype=np.int64)
        self.done_rids, self.done_bids = [], []
        end = np.frombuffer(self.b_end, np.int64)[bid]
        self.r_start[rid] = np.frombuffer(self.b_start, np.int64)[bid]
        self.r_finish[rid] = end
        self.r_worker[rid] = np.frombuffer(self.b_worker, np.int64)[bid]
        self.r_batch[rid] = bid
        self.r_outcome[rid] = LATE - (self.deadline[rid] >= end)

    # ------------------------------------------------------------------ recorded (direct)

    def record_batch(self, worker: int, model: int, rids: list[int], start: int, end: int,
                     final: bool = True) -> int:
        """Record a batch a policy has already scheduled exactly, without simulating it.

        The batch's run is known at dispatch: it is written to the batch
        table, the worker's busy time and — if ``final`` — its requests'
        outcomes, with no completion event and no ``busy`` state. The policy
        guarantees that recorded batches never overlap on a worker. Returns
        the batch id.
        """
        if self.rec_paths:  # keep batch ids in call order
            self._flush_recorded()
        bid = self._append_batch(worker, model, len(rids), start, end)
        self.w_busy[worker] += end - start
        if final and len(rids) == 1:  # scalar writes: much cheaper than fancy indexing
            r = rids[0]
            self.r_start[r] = start
            self.r_finish[r] = end
            self.r_worker[r] = worker
            self.r_batch[r] = bid
            self.r_outcome[r] = SERVED if self.deadline[r] >= end else LATE
        elif final:
            idx = np.array(rids, dtype=np.int64)
            self.r_start[idx] = start
            self.r_finish[idx] = end
            self.r_worker[idx] = worker
            self.r_batch[idx] = bid
            self.r_outcome[idx] = LATE - (self.deadline[idx] >= end)
        return bid

    def record_path(self, model: int, rid: int, slots: list[tuple[int, int, int]]) -> None:
        """:meth:`record_batch` of one request's whole path: batches ``(worker, start, duration)``, the last final.

        Buffered: the paths are written to the batch table, busy times and
        outcomes in one vectorised step (:meth:`_flush_recorded`) before any
        other batch is started, booked or recorded, every :data:`RECORD_CHUNK`
        paths (small: the buffered tuples are freed while still in cache), and
        when the run ends — the same tables, in the same order, as one
        :meth:`record_batch` per stage.
        """
        self.rec_paths += (model, rid, len(slots))
        self.rec_slots += slots
        if len(self.rec_paths) >= 3 * RECORD_CHUNK:
            self._flush_recorded()

    def _flush_recorded(self) -> None:
        """Write the paths buffered by :meth:`record_path`."""
        paths, slots = self.rec_paths, self.rec_slots
        if not paths:
            return
        self.rec_paths, self.rec_slots = [], []
        model, rid, k = np.array(paths, dtype=np.int64).reshape(-1, 3).T
        flat = np.fromiter(chain.from_iterable(slots), np.int64, 3 * len(slots)).reshape(-1, 3)
        worker, start = flat[:, 0].copy(), flat[:, 1].copy()
        end = start + flat[:, 2]
        base = len(self.b_worker)
        self.b_worker.frombytes(worker.tobytes())
        self.b_model.frombytes(np.repeat(model, k).tobytes())
        self.b_size.frombytes(np.ones(len(worker), np.int64).tobytes())
        self.b_start.frombytes(start.tobytes())
        self.b_end.frombytes(end.tobytes())
        self.b_pre.frombytes(np.zeros(len(worker), np.int64).tobytes())
        busy = np.zeros(len(self.w_busy), np.int64)
        np.add.at(busy, worker, flat[:, 2])
        for w in np.flatnonzero(busy).tolist():
            self.w_busy[w] += int(busy[w])
        last = np.cumsum(k) - 1  # each path's final stage
        self.r_start[rid] = start[last]
        self.r_finish[rid] = end[last]
        self.r_worker[rid] = worker[last]
        self.r_batch[rid] = base + last
        self.r_outcome[rid] = LATE - (self.deadline[rid] >= end[last])
