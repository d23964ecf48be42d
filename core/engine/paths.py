"""Reserved paths: batches a reserving policy has scheduled exactly at dispatch (PPipe §5.4, Appendix A.3).

A policy that reserves every resource ahead of time (probe/reserve over
vGPUs and NIC links) knows at dispatch when each batch of a request's path
will run: :meth:`Paths.book_path` takes the path as ``(worker, start,
duration)`` slots, run in turn, the last one final. What the engine does with
it is the recorder's mode (``EngineConfig.reserved``, :mod:`.recorder`):

* ``events`` (the reference) — each batch of the path is a row of the batch
  table at dispatch and a completion event at its end, at which
  :meth:`Paths.complete` checks that the worker was not double-booked
  (against every batch of that worker, started or booked), adds its busy
  time and — final batch — buffers its requests' outcomes. With ``notify``
  each completion also calls the policy's ``on_completion`` (and so bounds
  the run of arrivals, like any event a policy sees); without it the
  completions are *quiet* events (:mod:`.clock`) drained by
  :meth:`Paths.drain` in time order, invisible to the policy. A booked batch
  does not hold the worker's one-batch slot (``busy()`` stays False): a
  reservation may sit in a gap *before* batches already booked on the same
  worker (Algorithm 2 inserts into gaps).
* ``record`` (the fast fidelity) — the recorder writes the path at dispatch,
  no event, the same tables (``tests/test_engine_golden.py``).

The reservation is the policy's: the group's scheduler-overhead clock is
charged for the decision, and a booked start before the decision takes
effect is a policy error.
"""

from __future__ import annotations

from heapq import heappop, heappush

from shepherd.core.engine.clock import BOOKED, COMPLETION, NEVER, Clock
from shepherd.core.engine.recorder import DONE_CHUNK, Recorder
from shepherd.core.engine.resources import Resources


class Paths:
    """Booking reserved paths, and their completions in ``events`` mode (module docstring)."""

    __slots__ = ("res", "rec", "clock", "record", "sched_active", "decide_emulated", "record_path")

    def __init__(self, res: Resources, rec: Recorder, clock: Clock, record: bool,
                 decide_emulated) -> None:
        self.res, self.rec, self.clock, self.record = res, rec, clock, record
        self.sched_active = res.sched_active
        self.record_path = rec.record_path
        #: ``decide_emulated(group)``: whether that group's overhead is measured (no start check then)
        self.decide_emulated = decide_emulated

    def book_path(self, model: int, rids: list[int], slots: list[tuple[int, int, int]], now: int,
                  final: bool = True, notify: bool = False) -> int:
        """Book ``rids`` (all of ``model``) on batches ``(worker, start, duration)`` run in turn;
        returns the last batch id. ``final``: the last batch writes the requests' outcomes.

        A completion event's target is :data:`~.clock.BOOKED` and its argument
        ``(worker, start, rids, batch id)``, ``rids`` None for an intermediate stage.
        """
        if self.sched_active:
            res = self.res
            g = res.w_group[slots[0][0]]
            disp = res.decide(g, now, len(rids))
            if disp > slots[0][1] and not self.decide_emulated(g):
                raise RuntimeError(f"batch booked at {slots[0][1]} before the scheduler decides it ({disp})")
        if self.record and final:
            return self.record_path(model, rids, slots, now)
        clock = self.clock
        heap, seq = (clock.heap if notify else clock.quiet), clock.seq
        bid = self.rec.book_rows(model, len(rids), slots)
        k = len(slots)
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
            seq += 1
            # the final batch's completion writes the requests' outcomes
            heappush(heap, (end, COMPLETION, seq, BOOKED, (w, start, rids if j == last else None, bid)))
            bid += 1
        clock.seq = seq
        if not notify:  # a run of arrivals goes at most quiet_lag past a quiet event (see .clock)
            first += clock.quiet_lag
        if first < clock.until:
            clock.until = first
        return bid - 1

    def complete(self, entry: tuple) -> int:
        """A booked batch with ``notify`` (a main-heap event ``entry``, just popped) completes; returns
        its worker. It goes through :meth:`drain`, the one implementation of a booked completion."""
        heappush(self.clock.quiet, entry)
        self.drain((entry[0], entry[1], entry[2] + 1))
        return entry[4][0]

    def drain(self, limit: tuple) -> None:
        """Complete the booked batches on the quiet heap that sort before ``limit``: check, account.

        Batches of one worker complete in end order; they are disjoint iff
        each starts no earlier than the previous completion on that worker and
        no started batch is running across it (one check per completion).
        A final batch's requests are buffered for the recorder (``done``).
        """
        quiet = self.clock.quiet
        res, rec = self.res, self.rec
        w_free, w_batch, w_start, w_busy = res.w_free, res.w_batch, res.w_start, rec.w_busy
        done_rids, done_bids = rec.done_rids, rec.done_bids
        t = self.clock.now
        while quiet and quiet[0] < limit:
            t, _, _, _, (w, start, rids, bid) = heappop(quiet)
            if start < w_free[w] or (w_batch[w] >= 0 and w_start[w] < t):
                raise RuntimeError(f"worker {w}: booked batch {bid} [{start}, {t}) overlaps another batch")
            w_free[w] = t
            w_busy[w] += t - start
            if rids is not None:  # a final batch
                if len(rids) == 1:
                    done_rids.append(rids[0])
                    done_bids.append(bid)
                else:
                    done_rids += rids
                    done_bids += [bid] * len(rids)
                if len(done_rids) >= DONE_CHUNK:
                    rec.flush_done()
        self.clock.now = t
