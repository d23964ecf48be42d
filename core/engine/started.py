"""Started batches: each worker's one current batch — start, preempt, complete (mixed into the Engine).

A policy starts a batch on an idle worker (:meth:`StartedBatches.start_batch`);
the worker is busy until the batch's completion event, at which the engine
writes the requests' outcomes (``final``) and calls the policy's
``on_completion``. Shepherd Flex may preempt it (:meth:`StartedBatches.preempt`):
the batch stops at its next exit point and its requests go back to the policy.
Outcomes are written with one vectorised write per batch (scalar writes for a
batch of one).
"""

from __future__ import annotations

import numpy as np

from shepherd.core.engine.events import COMPLETION
from shepherd.core.engine.outcomes import LATE, SERVED


class StartedBatches:
    """Engine actions on a worker's current batch (see module docstring)."""

    def start_batch(self, worker: int, model: int, rids: list[int], now: int, *,
                    duration_us: int | None = None, at: int = 0, final: bool = True) -> int:
        """Run ``rids`` (all of ``model``) on an idle ``worker``; returns the end time.

        The batch starts once the group's scheduler has made the decision
        (overhead model), the worker has reached its free time (a preempted
        batch stops at its next exit point) and not before ``at`` (a reserved
        slot, a non-work-conserving ``sched_at``). Its latency is the profile's
        ℓ(|rids|) on the worker's hardware unless ``duration_us`` is given (a
        pipeline stage, an MPS share, a malleable allocation). With
        ``final=False`` the completion frees the worker but records no request
        outcome: the requests stay in flight for the policy's next stage.
        """
        if self.w_batch[worker] >= 0:
            raise RuntimeError(f"worker {worker} is busy: a policy started two batches on it")
        if self.rec_paths or self.bk_paths:  # keep batch ids in call order
            self._flush_rows()
        start = self.w_free[worker]
        if self.sched_active:
            disp = self._decide(self.w_group[worker], now, len(rids))
            if start < disp:
                start = disp
        elif start < now:
            start = now
        if start < at:
            start = at
        if duration_us is None:
            end = start + self.lat[self.w_hw[worker]][model][len(rids)]
        else:
            end = start + duration_us
        self.w_final[worker] = final
        bid = self._append_batch(worker, model, len(rids), start, end)
        self.w_batch[worker] = bid
        self.w_start[worker] = start
        self.w_end[worker] = end
        self.w_model[worker] = model
        self.w_reqs[worker] = rids
        self.events.push(end, COMPLETION, worker, bid)
        if end < self.until:
            self.until = end
        return end

    def _append_batch(self, worker: int, model: int, size: int, start: int, end: int) -> int:
        """Add a row to the batch table; returns its batch id."""
        bid = len(self.b_worker)
        self.b_worker.append(worker)
        self.b_model.append(model)
        self.b_size.append(size)
        self.b_start.append(start)
        self.b_end.append(end)
        self.b_pre.append(0)
        return bid

    def _write_outcomes(self, rids: list[int], start: int, end: int, worker: int, bid: int) -> None:
        """The outcomes of a final batch ``bid`` that ran ``rids`` on ``worker`` over ``[start, end)``."""
        if len(rids) == 1:  # scalar writes: much cheaper than fancy indexing
            r = rids[0]
            self.r_start[r] = start
            self.r_finish[r] = end
            self.r_worker[r] = worker
            self.r_batch[r] = bid
            self.r_outcome[r] = SERVED if self.deadline[r] >= end else LATE
        else:
            idx = np.array(rids, dtype=np.int64)
            self.r_start[idx] = start
            self.r_finish[idx] = end
            self.r_worker[idx] = worker
            self.r_batch[idx] = bid
            self.r_outcome[idx] = LATE - (self.deadline[idx] >= end)

    def preempt(self, worker: int, now: int, delay_us: int) -> tuple[int, list[int]]:
        """Stop ``worker``'s batch ``delay_us`` from now (its next exit point).

        Returns (stop time, the batch's request ids). The time the batch ran is
        recorded as waste; the worker is free again at the stop time.
        """
        bid = self.w_batch[worker]
        if bid < 0:
            raise RuntimeError(f"worker {worker} has no batch to preempt")
        start = self.w_start[worker]
        stop = start if start >= now else min(now + delay_us, self.w_end[worker])
        self.b_end[bid] = stop
        self.b_pre[bid] = 1
        self.w_waste[worker] += stop - start
        rids = self.w_reqs[worker]
        assert rids is not None
        self.r_preempt[np.array(rids, dtype=np.int64)] += 1
        self.w_batch[worker] = -1
        self.w_reqs[worker] = None
        self.w_free[worker] = stop
        return stop, rids

    def busy(self, worker: int) -> bool:
        return self.w_batch[worker] >= 0


    # ------------------------------------------------------------------ completion

    def _complete(self, worker: int, now: int) -> None:
        start = self.w_start[worker]
        if self.w_final[worker]:  # an intermediate stage's requests stay in flight
            self._write_outcomes(self.w_reqs[worker], start, now, worker, self.w_batch[worker])
        self.w_busy[worker] += now - start
        self.w_batch[worker] = -1
        self.w_reqs[worker] = None
        self.w_free[worker] = now
