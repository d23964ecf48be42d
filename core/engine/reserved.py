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

from heapq import heappop, heappush

import numpy as np

from shepherd.core.engine.events import COMPLETION, NEVER
from shepherd.core.engine.outcomes import LATE

RECORD_CHUNK = 1 << 11  #: paths buffered by record_path between vectorised writes
DONE_CHUNK = 1 << 13  #: booked requests completed between vectorised outcome writes


class ReservedBatches:
    """Engine actions for exactly scheduled batches (mixed into :class:`~shepherd.core.engine.loop.Engine`)."""

    def _init_reserved(self) -> None:
        # Buffers hold plain ints, never tuples: ints are not tracked by the cyclic garbage
        # collector, so buffering does not trigger collections (measured: a full collection
        # during a PPipe run costs ~50 ms).
        #: single-request paths recorded by :meth:`record_path` and not yet written:
        #: (model, request, stages) flat, and the stages' (worker, start, duration) flat
        self.rec_paths: list[int] = []
        self.rec_slots: list[int] = []
        #: paths booked by :meth:`book_path` whose batch-table rows are not yet written:
        #: (model, batch size, stages) flat, the stages' (worker, start, duration) flat, and the row count
        self.bk_paths: list[int] = []
        self.bk_slots: list[int] = []
        self.bk_rows = 0
        #: requests whose booked final batch completed, and that batch's id (not yet written)
        self.done_rids: list[int] = []
        self.done_bids: list[int] = []

    # ------------------------------------------------------------------ booked (engine-executed)

    def book_path(self, model: int, rids: list[int], slots: list[tuple[int, int, int]], now: int,
                  final: bool = True, notify: bool = False) -> int:
        """Book ``rids`` (all of ``model``) on batches ``(worker, start, duration)`` run in turn; returns the last batch id.

        Each batch runs over ``[start, start + duration)`` as reserved, and
        its completion is an event (module docstring); the last batch is
        ``final`` (its completion writes the requests' outcomes), the others
        are intermediate stages. With ``notify`` each completion also calls
        the policy's ``on_completion`` (and so bounds the current run of
        arrivals, like any event a policy sees); without it the completions
        are *quiet* events (:mod:`.events`): popped in time order among all
        events, invisible to the policy, so a run of arrivals is not cut at
        each of them. The reservation is the policy's: the group's
        scheduler-overhead clock is charged for the decision, and a booked
        start before the decision takes effect is a policy error (a reserving
        policy that models overhead reserves from ``decision_time``); in
        ``emulation`` mode the measured cost is charged only.

        A completion event's target is ``~(2·batch id + final)`` and its
        argument the slot ``(worker, start, duration)`` itself, or
        ``(worker, start, rids)`` for a final batch (no new tuple per
        intermediate stage). The batch-table rows are buffered like
        :meth:`record_path`'s and written in one vectorised step.
        """
        if self.rec_paths:  # keep batch ids in call order
            self._flush_recorded()
        if self.sched_active:
            g = self.w_group[slots[0][0]]
            disp = self._decide(g, now, len(rids))
            if disp > slots[0][1] and not self.sched[g].emulate:
                raise RuntimeError(f"batch booked at {slots[0][1]} before the scheduler decides it ({disp})")
        events = self.events
        heap, seq = (events.heap if notify else events.quiet), events.seq
        k = len(slots)
        bid = len(self.b_worker) + self.bk_rows
        flat = self.bk_slots
        first = NEVER
        last = k - 1 if final else k
        for j in range(k):
            slot = slots[j]
            w, start, dur = slot
            end = start + dur
            if start < now or dur <= 0:
                raise RuntimeError(f"worker {w}: cannot book [{start}, {end}) at {now}")
            if end < first:
                first = end
            flat += slot
            seq += 1
            if j < last:
                heappush(heap, (end, COMPLETION, seq, ~(2 * bid), slot))
            else:  # the final batch: its completion writes the requests' outcomes
                heappush(heap, (end, COMPLETION, seq, ~(2 * bid + 1), (w, start, rids)))
            bid += 1
        events.seq = seq
        self.bk_paths += (model, len(rids), k)
        self.bk_rows += k
        if len(self.bk_paths) >= 3 * RECORD_CHUNK:
            self._flush_booked()
        if not notify:  # a run of arrivals goes at most quiet_lag past a quiet event (see .events)
            first += events.quiet_lag
        if first < self.until:
            self.until = first
        return bid - 1

    def _complete_booked(self, code: int, now: int, arg: tuple) -> int:
        """A booked batch (event target ``~code``, argument ``arg``: see :meth:`book_path`) ends at
        ``now``: check, account, buffer outcomes; returns its worker. (:meth:`_drain_quiet`
        inlines this for quiet events: keep the two in step.)

        Batches of one worker complete in end order; they are disjoint iff
        each starts no earlier than the previous completion on that worker and
        no started batch is running across it (one check per completion).
        """
        w, start, rids = arg
        if start < self.w_free[w] or (self.w_batch[w] >= 0 and self.w_start[w] < now):
            self._overlap(w, code, now, start)
        self.w_free[w] = now
        self.w_busy[w] += now - start
        if code & 1:
            self.done_rids += rids
            self.done_bids += [code >> 1] * len(rids)
            if len(self.done_rids) >= DONE_CHUNK:
                self._flush_done()
        return w

    def _drain_quiet(self, limit: tuple) -> None:
        """Process the quiet events (booked completions without ``notify``) that sort before ``limit``.

        :meth:`_complete_booked` for each, inlined (PPipe's hot path; keep the two in step).
        """
        quiet = self.events.quiet
        w_free, w_busy, w_batch, w_start = self.w_free, self.w_busy, self.w_batch, self.w_start
        done_rids, done_bids = self.done_rids, self.done_bids
        t = self.now
        while quiet and quiet[0] < limit:
            t, _, _, who, (w, start, rids) = heappop(quiet)
            if start < w_free[w] or (w_batch[w] >= 0 and w_start[w] < t):
                self._overlap(w, ~who, t, start)
            w_free[w] = t
            w_busy[w] += t - start
            if who & 1 == 0:  # ~who odd: a final batch
                if len(rids) == 1:
                    done_rids.append(rids[0])
                    done_bids.append(~who >> 1)
                else:
                    done_rids += rids
                    done_bids += [~who >> 1] * len(rids)
                if len(done_rids) >= DONE_CHUNK:
                    self._flush_done()
        self.now = t

    def _overlap(self, w: int, code: int, now: int, start: int) -> None:
        raise RuntimeError(f"worker {w}: booked batch {code >> 1} [{start}, {now}) overlaps another batch")

    def _flush_booked(self) -> None:
        """Write the batch-table rows of the paths buffered by :meth:`book_path`."""
        paths, slots = self.bk_paths, self.bk_slots
        if not paths:
            return
        self.bk_paths, self.bk_slots, self.bk_rows = [], [], 0
        model, size, k = np.array(paths, dtype=np.int64).reshape(-1, 3).T
        flat = np.array(slots, dtype=np.int64).reshape(-1, 3)
        start = flat[:, 1].copy()
        self._append_rows(flat[:, 0].copy(), np.repeat(model, k), np.repeat(size, k), start, start + flat[:, 2])

    def _append_rows(self, worker: np.ndarray, model: np.ndarray, size: np.ndarray, start: np.ndarray,
                     end: np.ndarray) -> None:
        """Add rows to the batch table (int64 arrays, one per column; none preempted)."""
        self.b_worker.frombytes(worker.tobytes())
        self.b_model.frombytes(model.tobytes())
        self.b_size.frombytes(size.tobytes())
        self.b_start.frombytes(start.tobytes())
        self.b_end.frombytes(end.tobytes())
        self.b_pre.frombytes(np.zeros(len(start), np.int64).tobytes())

    def _flush_done(self) -> None:
        """Write the outcomes of completed booked batches (vectorised, from the batch table)."""
        if not self.done_rids:
            return
        if self.bk_paths:
            self._flush_booked()
        rid = np.array(self.done_rids, dtype=np.int64)
        bid = np.array(self.done_bids, dtype=np.int64)
        self.done_rids.clear()  # in place: the run loop holds these lists
        self.done_bids.clear()
        end = np.frombuffer(self.b_end, np.int64)[bid]
        self.r_start[rid] = np.frombuffer(self.b_start, np.int64)[bid]
        self.r_finish[rid] = end
        self.r_worker[rid] = np.frombuffer(self.b_worker, np.int64)[bid]
        self.r_batch[rid] = bid
        self.r_outcome[rid] = LATE - (self.deadline[rid] >= end)

    def _flush_rows(self) -> None:
        """Write every buffered batch-table row (booked or recorded; at most one kind is buffered)."""
        if self.bk_paths:
            self._flush_booked()
        if self.rec_paths:
            self._flush_recorded()

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
        if self.rec_paths or self.bk_paths:  # keep batch ids in call order
            self._flush_rows()
        bid = self._append_batch(worker, model, len(rids), start, end)
        self.w_busy[worker] += end - start
        if final:
            self._write_outcomes(rids, start, end, worker, bid)
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
        if self.bk_paths:  # keep batch ids in call order
            self._flush_booked()
        self.rec_paths += (model, rid, len(slots))
        rec = self.rec_slots
        for slot in slots:
            rec += slot
        if len(self.rec_paths) >= 3 * RECORD_CHUNK:
            self._flush_recorded()

    def _flush_recorded(self) -> None:
        """Write the paths buffered by :meth:`record_path`."""
        paths, slots = self.rec_paths, self.rec_slots
        if not paths:
            return
        self.rec_paths, self.rec_slots = [], []
        model, rid, k = np.array(paths, dtype=np.int64).reshape(-1, 3).T
        flat = np.array(slots, dtype=np.int64).reshape(-1, 3)
        worker, start = flat[:, 0].copy(), flat[:, 1].copy()
        end = start + flat[:, 2]
        base = len(self.b_worker)
        self._append_rows(worker, np.repeat(model, k), np.ones(len(worker), np.int64), start, end)
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
