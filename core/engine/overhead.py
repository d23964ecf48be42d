"""Scheduler-overhead model: what a scheduling decision costs in simulated time.

Shepherd §7.1 (Fig. 10) shows a centralised online scheduler (Clockwork)
saturating at ~50 k requests/s around 200 workers because every decision takes
CPU time that grows with the number of workers; Symphony §5.4 emulates backends
and measures the scheduler's own cost the same way. Here each serving group has
one scheduler, modelled as a single server: a decision (a batch dispatch)
issued at ``t`` leaves the scheduler at ``max(t, free) + cost`` and the batch
cannot start before then; ``free`` advances, so decisions queue behind each
other when they come faster than ``1/cost``. Only dispatch decisions cost
time; enqueueing an arrival is free (a fast path mirrors exactly this).

Modes:

* ``model`` (default, deterministic): ``cost = base_us + per_worker_us ·
  G^worker_exponent + per_request_us · |batch|`` with ``G`` the group's worker
  count, rounded to integer µs.
* ``emulation``: the measured CPU time (``time.perf_counter_ns``) of the
  policy's handler up to the dispatch — real, hence **not deterministic**.
* ``none``: decisions are free.

Defaults are per policy (see each policy's ``default_overhead``); Clockwork's
super-linear term is what makes it saturate (Shepherd §2.2 "grow
super-linearly … with the number of GPUs"), not a cap.
"""

from __future__ import annotations

from dataclasses import dataclass

from shepherd.core.errors import UserError

MODES = ("model", "emulation", "none")


@dataclass(frozen=True)
class OverheadConfig:
    """Cost of one scheduling decision (see module docstring)."""

    mode: str = "model"
    base_us: float = 1.0
    per_worker_us: float = 0.1
    worker_exponent: float = 1.0
    per_request_us: float = 0.0

    def validate(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"unknown overhead mode '{self.mode}' (known: {', '.join(MODES)})")
        for name in ("base_us", "per_worker_us", "worker_exponent", "per_request_us"):
            if getattr(self, name) < 0:
                raise UserError(f"overhead {name} must be ≥ 0, got {getattr(self, name)}")

    def decision_us(self, workers: int) -> int:
        """The size-independent part of a modelled decision, integer µs."""
        if self.mode != "model":
            return 0
        return int(round(self.base_us + self.per_worker_us * workers ** self.worker_exponent))
