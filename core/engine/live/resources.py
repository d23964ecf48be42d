"""Live resources: the reference engine's :class:`~shepherd.core.engine.resources.Resources`, whose
started batches go to real worker processes instead of onto the clock.

Everything a policy calls is the reference code (start, book, preempt,
running, busy): only the last step differs. :meth:`LiveResources._occupy`
records the batch with its *predicted* end (the profile's latency, what the
policy reads back through ``running``) and sends it to the worker, not before
its start time; the worker's report replaces the prediction with the measured
start and end (:meth:`LiveResources.finish`). A preemption also raises the
worker's cancel value (its next layer boundary stops the batch). Every
decision is logged (:attr:`LiveResources.decisions`) so that a live run can be
replayed in the simulator (:mod:`.replay`).
"""

from __future__ import annotations

from typing import Any

from shepherd.core.engine.resources import Resources
from shepherd.core.errors import UserError

START, BOOK, PREEMPT = 0, 1, 2
ACTIONS = ("start", "book", "preempt")


class LiveResources(Resources):
    """Resources whose batches run on worker processes (module docstring)."""

    __slots__ = ("link", "decisions", "planned", "reported", "cpu_us")

    def __init__(self, link: Any, *args: Any) -> None:
        super().__init__(*args)
        #: the engine's side of the workers: ``send(worker, batch_id, model, size, start_us)``,
        #: ``cancel(worker, batch_id)``, ``now()`` (wall clock, µs since the run's origin)
        self.link = link
        #: (decided_us, action, worker, model, request ids) per decision, in decision order
        self.decisions: list[tuple[int, int, int, int, tuple[int, ...]]] = []
        #: per batch id: (planned start, planned end) µs — what the policy expected when it dispatched
        self.planned: list[tuple[int, int]] = []
        self.reported: list[int] = []  #: batch ids whose measured start and end were written
        self.cpu_us: list[int] = []  #: the worker's CPU time over each reported batch (aligned with ``reported``)

    def start(self, worker: int, model: int, rids: list[int], now: int, **kw: Any) -> int:
        self.decisions.append((self.link.now(), START, worker, model, tuple(rids)))
        return super().start(worker, model, rids, now, **kw)

    def book(self, worker: int, model: int, rids: list[int], now: int, **kw: Any) -> None:
        if self.w_batch[worker] < 0 and not self.w_next[worker]:
            super().book(worker, model, rids, now, **kw)  # an idle worker: logged as its start
            return
        self.decisions.append((self.link.now(), BOOK, worker, model, tuple(rids)))
        super().book(worker, model, rids, now, **kw)

    def preempt(self, worker: int, now: int, delay_us: int) -> tuple[int, list[int]]:
        bid = self.w_batch[worker]
        self.decisions.append((self.link.now(), PREEMPT, worker, self.w_model[worker], ()))
        out = super().preempt(worker, now, delay_us)
        self.link.cancel(worker, bid)
        return out

    def _occupy(self, worker: int, model: int, rids: list[int], start: int, duration_us: int | None,
                final: bool) -> int:
        if duration_us is not None:
            raise UserError("the live engine runs whole models only (no pipeline stage or MPS share durations)")
        end = start + self.lat[self.w_hw[worker]][model][len(rids)]
        self.w_final[worker] = final
        bid = self.rec.batch(worker, model, len(rids), start, end)
        self.planned.append((start, end))
        self.w_batch[worker] = bid
        self.w_start[worker] = start
        self.w_end[worker] = end
        self.w_model[worker] = model
        self.w_reqs[worker] = rids
        self.link.send(worker, bid, model, len(rids), start)
        return end

    def finish(self, worker: int, bid: int, start_us: int, end_us: int, cpu_us: int = -1) -> bool:
        """A worker reported batch ``bid`` done: write the measured times and complete it (the reference
        completion: outcomes, busy time, the next booked batch). False for a preempted batch's report."""
        if self.w_batch[worker] != bid:
            return False
        self.reported.append(bid)
        self.cpu_us.append(cpu_us)
        self.rec.b_start[bid] = start_us
        self.rec.b_end[bid] = end_us
        self.w_start[worker] = start_us
        self.complete(worker, end_us)
        return True

    def add_worker(self, group: int, hardware: int, node: int, name: str, now: int) -> int:
        raise UserError("the live engine has a fixed set of worker processes (no autoscaling)")
