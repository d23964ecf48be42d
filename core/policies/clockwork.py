"""Clockwork — online, global, tightest-deadline-first, non-preemptive.

As Shepherd describes it (§2.2 "online global policies", §7 baseline, §7.1
"prioritizes requests based on how close their deadline is, it greedily
schedules many small batches of requests with tight deadlines") and Symphony
§2.2 (a centralised controller assigns inference tasks to free backends):

* one deadline-sorted queue per model (shared :mod:`.queues`);
* whenever a worker is idle, take the most urgent request across all queues
  that can still finish in time alone (``deadline ≥ now + ℓ(1)``; the others
  are dropped, as Clockwork rejects requests it cannot serve in time), and
  build the batch *for that request*: the largest b ≤ max batch such that
  ``now + ℓ(b) ≤`` its deadline, filled with the b earliest-deadline requests
  of its model (all of which have deadlines at least as late);
* ties between models: the lower model index. Never preempts.
* urgency is the deadline (``urgency="slack"`` ranks by ``deadline − ℓ(1)``
  instead — an alternative reading of "tightest deadline" kept as an option).

Its default scheduler-overhead model grows super-linearly with the number of
workers of its (single, global) scheduler — Shepherd §2.2/§7.1, Fig. 10: the
controller saturates around 200 workers. The constants are the model's
defaults, to be calibrated by the Fig. 10 reproduction.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.errors import UserError
from shepherd.core.policies.base import Policy
from shepherd.core.policies.queues import DeadlineQueues
from shepherd.core.policies.registry import register

INF = 1 << 62


@dataclass(frozen=True)
class ClockworkConfig:
    """Clockwork options."""

    #: "deadline" (default): most urgent = earliest deadline; "slack": earliest
    #: latest-start time ``deadline − ℓ(1)`` (starves short models behind long
    #: ones: 0.15 k req/s on Fig. 11(a), far below the paper's 3.7× gap).
    urgency: str = "deadline"

    def validate(self) -> None:
        if self.urgency not in ("slack", "deadline"):
            raise UserError(f"clockwork urgency must be 'slack' or 'deadline', got '{self.urgency}'")


@register("clockwork", ClockworkConfig)
class Clockwork(Policy):
    """Clockwork: tightest deadline first, batch sized for the most urgent request."""

    default_overhead = OverheadConfig(base_us=2.0, per_worker_us=0.1, worker_exponent=1.5,
                                      arrival_us=0.5, arrival_per_worker_us=0.05)

    def __init__(self, act: Actions, config: ClockworkConfig) -> None:
        super().__init__(act, config)
        self.q = DeadlineQueues(len(act.models))
        self.maxb = act.max_batch
        self.workers = list(act.workers)
        self.local = {w: k for k, w in enumerate(self.workers)}
        self.hw_of = act.hardware
        self.lat = act.lat
        hws = sorted(set(self.hw_of))
        self.lat1 = [min(act.lat[h][m][1] for h in hws) for m in range(len(act.models))]
        self.idle = list(range(len(self.workers)))
        self.models = range(len(act.models))
        self.slack = config.urgency == "slack"

    def pick(self, now: int, hw: int) -> tuple[int, int]:
        """(model, b) of the batch built for the most urgent feasible request; b = 0 if none."""
        q = self.q
        best_m, best_d, best_key = -1, INF, INF
        for m in self.models:
            if q.h[m] >= len(q.d[m]):
                continue
            dead = q.expire(m, now + self.lat[hw][m][1])
            if dead:
                self.act.drop(dead, now)
            d = q.head_deadline(m)
            if d is None:
                continue
            key = d - self.lat[hw][m][1] if self.slack else d
            if key < best_key:
                best_m, best_d, best_key = m, d, key
        if best_m < 0:
            return -1, 0
        lat = self.lat[hw][best_m]
        b = bisect_right(lat, best_d - now, 1, self.maxb + 1) - 1
        return best_m, min(b, q.length(best_m))

    def _run(self, k: int, now: int) -> bool:
        m, b = self.pick(self.act.decision_time(now), self.hw_of[k])
        if b == 0:
            return False
        self.act.start(self.workers[k], m, self.q.take(m, self.q.h[m], b), now)
        return True

    def on_arrivals(self, ts: list[int], ds: list[int], ms: list[int], ss: list[int],
                    rs: list[int], lo: int, hi: int) -> int:
        act = self.act
        until = act.until
        q = self.q
        qd_all, qr_all = q.d, q.r
        idle = self.idle
        for i in range(lo, hi):
            t = ts[i]
            if t >= until:
                return i
            m = ms[i]
            d = ds[i]
            qd = qd_all[m]
            # DeadlineQueues.push inlined for its O(1) append case: calling it per
            # arrival costs Flex ~10 % of its speed (benchmarks/engine_speed.py A/B).
            if not qd or d >= qd[-1]:
                qd.append(d)
                qr_all[m].append(rs[i])
            else:
                q.push(m, d, rs[i])
            if idle:
                while idle and self._run(idle[0], t):
                    idle.pop(0)
                until = act.until
        return hi

    def on_completion(self, now: int, worker: int) -> None:
        k = self.local[worker]
        if not self._run(k, now):
            self.idle.append(k)
            self.idle.sort()
