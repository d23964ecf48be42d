"""Scheduler-overhead model: what a scheduling decision costs in simulated time.

Shepherd §7.1 (Fig. 10) shows a centralised online scheduler (Clockwork)
saturating at ~50 k requests/s around 200 workers because every decision takes
CPU time that grows with the number of workers; Symphony §5.4 emulates backends
and measures the scheduler's own cost the same way. Here each serving group has
one scheduler, modelled as a single server: a decision (a batch dispatch)
issued at ``t`` leaves the scheduler at ``max(t, free) + cost`` and the batch
cannot start before then; ``free`` advances, so decisions queue behind each
other when they come faster than ``1/cost``.

The scheduler also spends time on every arrival it handles (Flex, Alg. 1
lines 9–13, loops over the group's G GPUs per arrival: O(G), Theorem 5.3), so
arrivals occupy the same server: ``free ← max(free, a) + arrival cost`` for each
arrival ``a``. Policies decide at the scheduler's own clock
(:meth:`SchedulerClock.ready_us`): a lagging scheduler sees deadlines it can no
longer meet and drops those requests. When arrivals come faster than the
scheduler can handle them it sheds the excess (admission control, below) — the
saturation of a centralised scheduler (Shepherd Fig. 10, Fig. 11(b) with an
unbounded group) comes out of this model, not from a cap.

Modes:

* ``model`` (default, deterministic): a decision costs ``base_us +
  per_worker_us · G^worker_exponent + per_request_us · |batch|`` and an
  arrival ``arrival_us + arrival_per_worker_us · G`` (``G`` = the group's
  workers); kept in integer nanoseconds.
* ``emulation``: the measured CPU time (``time.perf_counter_ns``) of the
  policy's handlers (up to each dispatch, and for each run of arrivals) —
  real, hence **not deterministic**.
* ``none``: the scheduler is free.

Admission control (:mod:`.admission`): a real frontend sheds the load its
scheduler cannot keep up with instead of queueing it until every request has
expired. An arriving request is *shed* when the scheduler's backlog at its
arrival, ``free − a`` (everything handled before it charged), exceeds
``max_lag_us``: it costs the scheduler nothing, is marked dropped and never
reaches the policy. Overloaded, the scheduler then stays busy with a bounded
backlog and goodput plateaus near its capacity — Shepherd §7.1, Fig. 10:
Clockwork's goodput "saturates at 50k request/second around N = 200 since its
centralized scheduler becomes the bottleneck" (saturates, not collapses), and
Fig. 11(b): one unbounded Flex group "observ[es] the same scalability limit".
Default bound: 50 ms — one number per group (so the no-shed test is O(1) per
run of arrivals), a fifth of the SLO of Shepherd §7's workloads (250 ms), so
an admitted request keeps ≥ 200 ms for queueing and execution, and ~10³× a
modelled per-arrival cost, so ordinary jitter never sheds. The bound matters
only for an overloaded scheduler, and there it trades batching against SLO
headroom: a scheduler that lags its clock ties its workers up for longer, so
requests queue and batches grow (measured, Fig. 10 MAF-stable synthetic, 5 s,
seed 0, Clockwork N = 200: 3.4k req/s with 10 ms — every decision a batch of
one — 38k with 50 ms, 3.8k with 125 ms; Flex with one 400-worker group: 17k,
37k, 41k). ``max_lag_us = inf`` switches admission control off (the backlog
then grows without bound and goodput collapses); ``0`` sheds every arrival
that finds the scheduler busy.

Arrivals are charged lazily (vectorised over the run of arrivals before each
decision), which is exact for the single-server recursion in which jobs are
served in time order and, at equal times, decisions before arrivals (a
decision at ``t`` is charged after the arrivals before ``t`` only). One approximation: at the end of a feed chunk (every
:data:`~.loop.CHUNK` arrivals) all of the chunk's arrivals are charged, so a
later decision at exactly the chunk's last arrival time is served after those
arrivals rather than before them. Defaults are per
policy (each policy's ``default_overhead``: Flex O(G) per arrival and per
decision; Clockwork super-linear per decision, Shepherd §2.2 "grow
super-linearly … with the number of GPUs"; Nexus constant). They are
placeholders of the right shape, to be calibrated by the Fig. 10 reproduction.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass

import numpy as np

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
    arrival_us: float = 0.0
    arrival_per_worker_us: float = 0.0
    #: admission control: shed an arrival that finds the scheduler more than this far behind
    #: (µs; default 50 ms, see module docstring); ``inf`` switches it off
    max_lag_us: float = 50_000.0

    def validate(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"unknown overhead mode '{self.mode}' (known: {', '.join(MODES)})")
        for name in ("base_us", "per_worker_us", "worker_exponent", "per_request_us", "arrival_us",
                     "arrival_per_worker_us", "max_lag_us"):
            value = getattr(self, name)
            if not value >= 0:  # also rejects NaN
                raise UserError(f"overhead {name} must be ≥ 0, got {value}")

    def decision_ns(self, workers: int) -> int:
        """The size-independent part of a modelled decision, integer ns."""
        if self.mode != "model":
            return 0
        return int(round(1000 * (self.base_us + self.per_worker_us * workers ** self.worker_exponent)))

    def arrival_ns(self, workers: int) -> int:
        """The modelled cost of handling one arrival, integer ns."""
        if self.mode != "model":
            return 0
        return int(round(1000 * (self.arrival_us + self.arrival_per_worker_us * workers)))


class SchedulerClock:
    """One serving group's scheduler as a single server (nanosecond clock)."""

    __slots__ = ("free_ns", "busy_ns", "decision_ns", "per_request_ns", "arrival_ns", "emulate", "t0", "active",
                 "admit", "max_lag_ns", "shed")

    def __init__(self, config: OverheadConfig, workers: int) -> None:
        self.free_ns = 0
        self.busy_ns = 0
        self.decision_ns = config.decision_ns(workers)
        self.per_request_ns = int(round(1000 * config.per_request_us)) if config.mode == "model" else 0
        self.arrival_ns = config.arrival_ns(workers)
        self.emulate = config.mode == "emulation"
        self.t0 = 0
        #: False when every decision and arrival is free: a decision then takes effect at
        #: ``now`` and leaves the clock at ``now`` (the engine skips the clock's work)
        self.active = bool(self.emulate or self.decision_ns or self.per_request_ns or self.arrival_ns)
        #: admission control (:mod:`.admission`): on when the scheduler costs anything and the bound is finite
        self.admit = self.active and math.isfinite(config.max_lag_us)
        self.max_lag_ns = int(round(1000 * config.max_lag_us)) if self.admit else 0
        self.shed = 0  #: arrivals shed so far

    def charge_arrivals(self, times_us: np.ndarray) -> None:
        """Handle a run of arrivals (sorted µs): ``free ← max(free, a) + c`` for each, vectorised
        as ``max(free + n·c, max_k(a_k + (n−k)·c))``."""
        n = len(times_us)
        c = self.arrival_ns
        if n == 0 or c == 0:
            return
        tail = int((times_us.astype(np.int64) * 1000 + (n - np.arange(n, dtype=np.int64)) * c).max())
        self.free_ns = max(self.free_ns + n * c, tail)
        self.busy_ns += n * c

    def charge_measured(self, now_us: int) -> None:
        """Emulation: charge the CPU time measured since ``t0``."""
        cost = _time.perf_counter_ns() - self.t0
        self.free_ns = max(self.free_ns, now_us * 1000) + cost
        self.busy_ns += cost
        self.t0 = _time.perf_counter_ns()

    def ready_us(self, now_us: int) -> int:
        """When a decision made now would take effect (the scheduler's own clock), µs."""
        return -(-(max(self.free_ns, now_us * 1000) + self.decision_ns) // 1000)

    def decide(self, now_us: int, size: int) -> int:
        """Make a decision about a batch of ``size`` at ``now``; returns when it is issued, µs."""
        if self.emulate:
            cost = _time.perf_counter_ns() - self.t0
            self.t0 = _time.perf_counter_ns()
        else:
            cost = self.decision_ns + self.per_request_ns * size
        self.free_ns = max(self.free_ns, now_us * 1000) + cost
        self.busy_ns += cost
        return -(-self.free_ns // 1000)
