"""Flex — Shepherd's online scheduler (Shepherd §5.2, Algorithm 1), and Flex-NP.

* Per-model queues sorted by deadline (Alg. 1 line 3; :mod:`.queues`).
* BATCHGEN (lines 5, 8, 13): the largest feasible batch across all queues —
  for each model the largest b ≤ max batch (128, §5.2) such that b queued
  requests all meet ``now + ℓ(b) ≤ deadline``; the batch takes the
  earliest-deadline requests among those. Ties between models: the batch
  whose first deadline is earliest, then the lower model index. Requests that
  cannot finish even alone (``deadline < now + ℓ(1)``) are dropped lazily.
* Completion (lines 4–6): the freed GPU runs BATCHGEN's batch, or idles.
* Arrival (lines 9–19): enqueue; every idle GPU runs its BATCHGEN batch; for a
  busy GPU, preempt when ``|B_g| ≥ λ·|B_c|`` (λ = 3.03, Theorem 5.2). Preempted
  requests that can still meet their deadline re-enter as new arrivals (line
  19) and the check repeats, so preemptions may cascade.

Choices where the paper is silent (documented here):

* The GPU considered for preemption is the one running the smallest batch
  (lowest id on ties): the paper loops over GPUs in order and preempts the
  first that qualifies; with one size comparison per GPU, the smallest running
  batch is the one that qualifies first whenever any does. Incremental state
  makes the per-arrival test O(1): it only compares the arrived model's queue
  length with ``⌈λ·min running⌉``; a full scan over all queues happens on the
  first arrival after the set of running batches changed.
* Preemption delay (§6, Fig. 12: < ~5 % of batch time): a model with E exit
  points has them evenly spaced at ℓ·k/(E+1); a preempted batch stops at the
  next exit point after the request (delay ≤ ℓ/(E+1), mean ℓ/(2(E+1)), i.e.
  0.3–1.2 % for Table 4). After the last exit point the batch cannot be
  stopped and is left to finish. ``exit_points`` overrides Table 4 (and is the
  fallback for profiles without that column).
* ``exit_overhead`` stretches every Flex batch by that fraction (the execution
  delay exit points add, Fig. 12); default 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.fastpath import ENGINE, FastPath, modelled
from shepherd.core.engine.inputs import Inputs, Runtime
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.errors import UserError
from shepherd.core.policies.base import Policy
from shepherd.core.policies.queues import DeadlineQueues
from shepherd.core.policies.registry import register
from shepherd.core.rules.flex import (better_batch, check_at, exit_delay, expiry_floor, preempt_need, reenters,
                                     smallest)
from shepherd.core.rules.latency import monotone

INF = 1 << 62


@dataclass(frozen=True)
class FlexConfig:
    """Flex options (Shepherd §5.2)."""

    lam: float = 3.03  #: preemption threshold λ (Theorem 5.2)
    preemption: bool = True  #: False gives Shepherd-NP (§7.2)
    exit_points: int = 0  #: override Table 4's exit points (0: use the profile; 50 if absent)
    exit_overhead: float = 0.0  #: fractional execution delay of exit points (Fig. 12)

    def validate(self) -> None:
        """λ ∈ (1, ∞) (Shepherd App. B: "1 < λ < ∞"). Each preemption replaces a running batch of size s
        by one of at least ⌈λ·s⌉ (``need``, computed as ``ceil(λ·s − 1e-9)``) > s, so the running sizes'
        sum grows with every preemption of a cascade and, bounded by G · max batch, the cascade ends. With
        λ = 1 (or within 1e-9 of it) ``need`` is s: a batch of the victims' size preempts the new one, whose
        victims preempt it again, forever."""
        if not (self.lam - 1.0 > 1e-9 and math.isfinite(self.lam)):
            raise UserError(f"λ must be a finite number > 1 (Shepherd App. B: 1 < λ < ∞), got {self.lam}")
        if self.exit_points < 0:
            raise UserError(f"exit_points must be ≥ 0, got {self.exit_points}")
        if self.exit_overhead < 0:
            raise UserError(f"exit_overhead must be ≥ 0, got {self.exit_overhead}")


@dataclass(frozen=True)
class FlexNPConfig(FlexConfig):
    """Flex without preemption (Shepherd-NP, §7.2)."""

    preemption: bool = False


DEFAULT_EXIT_POINTS = 50


def _fast_params(cls: type, cfg: FlexConfig, runtime: Runtime) -> tuple:
    """What Flex's kernel reads (``core/engine/fast/flex.py``): λ, preemption, each model's exit points."""
    n_models = len(runtime.lat[0]) if len(runtime.lat) else 0
    exits = [cfg.exit_points or e or DEFAULT_EXIT_POINTS for e in (runtime.exit_points or [0] * n_models)]
    return float(cfg.lam), bool(cfg.preemption), exits


@register("flex", FlexConfig)
class Flex(Policy):
    """Shepherd Flex: largest feasible batch first, preemption at λ× (Algorithm 1)."""

    #: Alg. 1 handles an arrival in O(G) (Theorem 5.3): 0.2 µs + 0.05 µs per GPU of the group
    default_overhead = OverheadConfig(base_us=1.0, per_worker_us=0.1, worker_exponent=1.0,
                                      arrival_us=0.2, arrival_per_worker_us=0.05)
    fast_path = FastPath("chunked", "shepherd.core.engine.fast.flex", covers="overhead model|none",
                         covered=lambda cfg, shape: modelled(shape), params=_fast_params,
                         mirrors=ENGINE + ("shepherd.core.policies.queues",),
                         configs=({}, {"lam": 1.2, "exit_points": 4}, {"lam": 8.0, "exit_points": 1,
                                                                         "exit_overhead": 0.05}))

    @classmethod
    def prepare(cls, inputs: Inputs, config: FlexConfig) -> Runtime:
        """Whole-model tables; with ``exit_overhead`` every batch latency is stretched (Fig. 12) — the
        tables the engine charges, so Flex's decisions and the batches' run times agree."""
        runtime = super().prepare(inputs, config)
        if config.exit_overhead:
            runtime.lat = [[[int(round(x * (1 + config.exit_overhead))) for x in per_m] for per_m in per_hw]
                           for per_hw in runtime.lat]
        return runtime

    def __init__(self, act: Actions, config: FlexConfig) -> None:
        super().__init__(act, config)
        self.q = DeadlineQueues(len(act.models))
        self.maxb = act.max_batch
        self.lam = config.lam
        self.preemption = config.preemption
        self.workers = list(act.workers)
        self.group = act.group
        self.local = {w: k for k, w in enumerate(self.workers)}
        self.run_size = [0] * len(self.workers)  # 0 = idle
        self.idle = list(range(len(self.workers)))  # local ids, kept sorted
        self.lat_by_hw = act.lat
        self.hw_of = act.hardware
        hws = sorted(set(self.hw_of))
        #: per model the least time any batch takes over the group's hardware: the expiry cutoff (ℓ(1) on a
        #: monotone table; a measured CPU table may dip, ℓ(2) < ℓ(1): :mod:`shepherd.core.rules.latency`)
        self.lat1 = expiry_floor(self.lat_by_hw, hws, self.maxb)
        #: per hardware and model: ℓ non-decreasing up to the largest batch (BATCHGEN may bisect)
        self.mono = [[monotone(t, self.maxb) for t in per_hw] for per_hw in self.lat_by_hw]
        self.exits = [config.exit_points or e or DEFAULT_EXIT_POINTS for e in act.exit_points]
        self.models = range(len(act.models))
        self.thresh = INF if not self.preemption else 0

    # ------------------------------------------------------------------ BATCHGEN

    def batchgen(self, now: int, hw: int) -> tuple[int, int, int]:
        """(model, b, i0) of the largest feasible batch across all queues; b = 0 if none."""
        q = self.q
        lat, mono = self.lat_by_hw[hw], self.mono[hw]
        best_m, best_b, best_i, best_d = -1, 0, 0, INF
        qd_all, heads = q.d, q.h
        for m in self.models:
            if heads[m] >= len(qd_all[m]):
                continue
            dead = q.expire(m, now + self.lat1[m])
            if dead:
                self.act.drop(dead, now)
            b, i0 = q.largest_feasible(m, now, lat[m], self.maxb, mono[m])
            if better_batch(b, qd_all[m], i0, best_b, best_d):
                best_m, best_b, best_i, best_d = m, b, i0, qd_all[m][i0]
        return best_m, best_b, best_i

    def _run(self, k: int, now: int) -> bool:
        """Start BATCHGEN's batch on local worker k; False if nothing is feasible."""
        w = self.workers[k]
        m, b, i0 = self.batchgen(self.act.decision_time(now), self.hw_of[k])
        if b == 0:
            return False
        self.act.start(w, m, self.q.take(m, i0, b), now)
        self.run_size[k] = b
        return True

    # ------------------------------------------------------------------ events

    def on_arrivals(self, ts: list[int], ds: list[int], ms: list[int], ss: list[int],
                    rs: list[int], lo: int, hi: int) -> int:
        act = self.act
        until = act.until
        q = self.q
        qd_all, qr_all, heads = q.d, q.r, q.h
        idle = self.idle
        for i in range(lo, hi):
            t = ts[i]
            if t >= until:
                return i
            m = ms[i]
            d = ds[i]
            qd = qd_all[m]
            # DeadlineQueues.push inlined for its O(1) append case (issue 42 asked to share it):
            # calling q.push per arrival measured ×0.87 median / ×0.83 min for reference Flex,
            # ×0.95 / ×0.96 Clockwork (benchmarks/ab_speed.py flex-ref,clockwork-ref, 2 M, 7 rounds).
            if not qd or d >= qd[-1]:
                qd.append(d)
                qr_all[m].append(rs[i])
            else:
                q.push(m, d, rs[i])
            if idle:
                self._fill_idle(t)
                until = act.until
            elif len(qd) - heads[m] >= self.thresh:
                self._check_preempt(t, m)
                until = act.until
        return hi

    def _fill_idle(self, now: int) -> None:
        idle = self.idle
        while idle:
            if not self._run(idle[0], now):
                break
            idle.pop(0)
        if self.preemption:
            self.thresh = 0  # running set changed: next arrival rescans all queues

    def on_completion(self, now: int, worker: int) -> None:
        k = self.local[worker]
        self.run_size[k] = 0
        if not self._run(k, now):
            self.idle.append(k)
            self.idle.sort()
        if self.preemption:
            self.thresh = 0

    # ------------------------------------------------------------------ preemption

    def _check_preempt(self, now: int, m_arrived: int) -> None:
        full = self.thresh == 0
        rs = self.run_size
        act = self.act
        while True:
            k = smallest(rs)
            small = rs[k]
            if small == 0:  # an idle worker: nothing was feasible for it
                self.thresh = 0
                return
            need = preempt_need(self.lam, small)
            if need > self.maxb:
                self.thresh = INF
                return
            start, end, model = act.running(self.workers[k])
            delay = exit_delay(start, end, self.exits[model], now)
            if delay < 0:  # past its last exit point: it finishes shortly
                self.thresh = need
                return
            t_eff = check_at(now, delay, act.decision_time(now))
            hw = self.hw_of[k]
            if full:
                m, b, i0 = self.batchgen(t_eff, hw)
            else:
                m = m_arrived
                b, i0 = self.q.largest_feasible(m, t_eff, self.lat_by_hw[hw][m], self.maxb, self.mono[hw][m])
            if b < need:
                self.thresh = need
                return
            w = self.workers[k]
            stop, victims = act.preempt(w, now, delay)
            act.start(w, m, self.q.take(m, i0, b), now)
            rs[k] = b
            dropped = []
            lat1, vmodel, vdeadline = self.lat1, act.model_of, act.deadlines
            for r in victims:
                mr = int(vmodel[r])
                d = int(vdeadline[r])
                if reenters(d, stop, lat1[mr]):
                    self.q.push(mr, d, r)  # line 19: treated as a new arrival
                else:
                    dropped.append(r)
            act.drop(dropped, now)
            full = True  # re-entered requests and a new running set: rescan all queues


@register("flex-np", FlexNPConfig)
class FlexNP(Flex):
    """Shepherd-NP: Flex without preemption (§7.2)."""
