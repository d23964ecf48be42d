"""Nexus's random draws and epoch plans, made before the run (issue 30: both engines read the same arrays).

Nothing Nexus decides in advance depends on the run: the admission coins and the frontends are drawn per
request, and every epoch's plan reads the trace's peaks and the coins (Shepherd §7, Nexus §6.1 — the
policy's docstring gives the rules). :func:`make_schedule` makes all of them once per serving group, before
the first event, into a :class:`NexusSchedule`; the reference policy (``core/policies/nexus.py``) and the
compiled kernel (``core/engine/fast/nexus.py``) both read it, so neither draws nor plans on its own.

**Seeds.** Each serving group draws from its own child of the run's seed (``SeedSequence.spawn``, one child
per group in the cluster's group order; each child spawns one stream per kind of draw: coins, frontends,
router phases), so a group's draws do not depend on how many numbers another group drew, nor on the order
the engine builds the groups in: the groups are independent by construction. The root is the run's
generator's state when the policy is built (after a router's draws); Nexus never advances that generator,
so every group — on either engine, in one loop or apart — sees the same root.

**Documented choices** (the papers name none):

* a request's frontend (Symphony §3.3: each request goes to a random one) is drawn once, when it arrives;
  a request re-routed at an epoch boundary is re-routed by the frontend it arrived at;
* with K > 1 frontends, each frontend's router of every session starts each epoch at a random phase
  (entry i's current value ``wᵢ · n · u``, u uniform), so the frontends do not pick in lock step; the one
  frontend of the coordinated case (K = 1) starts at zero (``SmoothWeightedRoundRobin``'s default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.policies.nexus_packing import plan_epoch

#: ``spare="spread"``: the largest load factor tried when scaling a plan up to the cluster
MAX_SPREAD = 1024.0
#: bisection steps of the admitted fraction s (overload) and of the spread factor
BISECT_STEPS = 14


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's plan laid out on the group's workers (:meth:`Planner.layout`)."""

    scale: float  #: the admitted fraction s (< 1 under overload; > 1 spread)
    gpus: int  #: GPUs the plan uses
    duty: list[int]  #: per worker: its duty cycle, µs
    slots: list[list[tuple[int, int]]]  #: per worker: its (session, batch) slots
    targets: dict[int, list[tuple[int, int]]]  #: session → its (worker, slot) allocations, in plan order
    weights: dict[int, list[float]]  #: session → each allocation's share of its requests
    rates: dict[int, tuple[float, float]]  #: session → its token bucket's (rate per µs, depth)
    #: per frontend, per allocation (sessions in ``targets`` order, then their allocations): the router's
    #: starting phase u ∈ [0, 1) (zeros with one frontend)
    phase: np.ndarray


@dataclass(frozen=True)
class NexusSchedule:
    """Everything a serving group's Nexus draws or plans before its run (module docstring)."""

    session: np.ndarray  #: per request of the group (in its order): its session
    coin: np.ndarray  #: per request: its admission coin u (float32; admitted while u < s)
    frontend: np.ndarray  #: per request: the frontend it arrives at (int64, 0 … K − 1)
    epochs: list[EpochPlan]  #: epoch 0 … the last with arrivals


def group_seed(rng: np.random.Generator, group_pos: int, n_groups: int) -> np.random.SeedSequence:
    """Group ``group_pos``'s child of the run's seed (module docstring): the root is made from every integer of
    ``rng``'s state, which is read, not advanced."""
    def words(x: Any) -> list[int]:
        if isinstance(x, dict):
            return [w for v in x.values() for w in words(v)]
        return [int(x)] if isinstance(x, (int, np.integer)) else []

    return np.random.SeedSequence(words(rng.bit_generator.state)).spawn(n_groups)[group_pos]


def draws(seed: np.random.SeedSequence, n: int, frontends: int
          ) -> tuple[np.ndarray, np.ndarray, np.random.Generator | None]:
    """A group's per-request draws from ``seed``'s three streams (module docstring): each request's admission
    coin and frontend, and the generator of the routers' phases (None with one frontend)."""
    coin_seed, fe_seed, phase_seed = seed.spawn(3)
    coin = np.random.default_rng(coin_seed).random(n, dtype=np.float32)
    if frontends == 1:
        return coin, np.zeros(n, np.int64), None
    return (coin, np.random.default_rng(fe_seed).integers(0, frontends, n, dtype=np.int64),
            np.random.default_rng(phase_seed))


class Planner:
    """Squishy bin packing of one group's epochs (the policy's docstring: peaks, admitted peaks, overload
    bisection, ``spare``) over its sessions' traffic and coins."""

    def __init__(self, arrival: np.ndarray, session: np.ndarray, coin: np.ndarray, peaks: dict[int, dict[int, float]],
                 session_model: dict[int, int], session_slo: dict[int, int], models: list[str], lat: list,
                 n_workers: int, config: Any, epoch_us: int, window_us: int) -> None:
        self.arrival, self.session, self.coin, self.peaks = arrival, session, coin, peaks
        self.session_model, self.session_slo, self.models, self.lat = session_model, session_slo, models, lat
        self.tables = {models[m]: np.asarray(lat[m], dtype=np.int64) for m in range(len(models))}
        self.n_workers, self.config, self.epoch_us, self.window_us = n_workers, config, epoch_us, window_us
        self._by_coin: dict[int, tuple] = {}  # epoch → its requests' (sorted coins, keys, windows)

    def source(self, epoch: int) -> int:
        """The epoch whose traffic plans ``epoch``: the previous one (its own for the first, or always with
        ``provision="oracle"``)."""
        return epoch if (self.config.provision == "oracle" or epoch == 0) else epoch - 1

    def admitted_peaks(self, epoch: int, scale: float) -> dict[int, float]:
        """Per session: the peak rate (req/s over ``peak_window_s`` windows) of epoch ``epoch``'s requests
        admitted at factor ``scale`` < 1 (those whose coin is below it)."""
        n_sess = len(self.session_model)
        if epoch not in self._by_coin:
            lo, hi = np.searchsorted(self.arrival, [epoch * self.epoch_us, (epoch + 1) * self.epoch_us])
            window = self.arrival[lo:hi] // self.window_us
            window -= window[0] if hi > lo else 0
            order = np.argsort(self.coin[lo:hi], kind="stable")
            keys = (window * n_sess + self.session[lo:hi])[order]
            self._by_coin[epoch] = (self.coin[lo:hi][order], keys, int(window[-1]) + 1 if hi > lo else 0)
        coins, keys, windows = self._by_coin[epoch]
        if windows == 0:
            return {}
        k = int(np.searchsorted(coins, np.float32(scale)))
        counts = np.bincount(keys[:k], minlength=windows * n_sess).reshape(windows, n_sess).max(axis=0)
        return {int(s): float(counts[s]) * 1e6 / self.window_us for s in np.flatnonzero(counts)}

    def _usable(self, s: int) -> bool:
        return s in self.session_model and self.lat[self.session_model[s]][1] <= self.session_slo[s]

    def _alloc(self, src: int, scale: float) -> tuple[list[dict], dict[int, float]]:
        """The plan for epoch ``src``'s traffic at load factor ``scale``, and the per-session rates planned."""
        if scale >= 1.0:  # more than the applied traffic (``spread``): its peaks scaled up
            want = {s: r * scale for s, r in self.peaks.get(src, {}).items()}
        else:
            want = self.admitted_peaks(src, scale)
        rows = [(s, self.models[self.session_model[s]], self.session_slo[s], r) for s, r in sorted(want.items())
                if r > 0 and self._usable(s)]
        if not rows:
            return [], want
        frame = pl.DataFrame(rows, schema={"stream": pl.Int64, "model": pl.String, "slo_us": pl.Int64,
                                           "peak_rps": pl.Float64}, orient="row")
        return plan_epoch(frame, self.tables), want

    def plan(self, epoch: int) -> tuple[list[dict], float, dict[int, float]]:
        """The epoch's allocations, its admitted fraction s and the per-session rates planned."""
        src = self.source(epoch)
        if not any(r > 0 and self._usable(s) for s, r in self.peaks.get(src, {}).items()):
            return [], 1.0, {}
        n = self.n_workers
        plan, want = self._alloc(src, 1.0)
        fits = sum(a["gpus"] for a in plan) <= n
        if fits and self.config.spare == "idle":
            return plan, 1.0, want
        lo, hi, best = (1.0, 2.0, (plan, want)) if fits else (0.0, 1.0, ([], {}))
        while fits and hi <= MAX_SPREAD:
            cand = self._alloc(src, hi)
            if sum(a["gpus"] for a in cand[0]) > n:
                break
            lo, hi, best = hi, 2 * hi, cand
        for _ in range(BISECT_STEPS):
            mid = (lo + hi) / 2
            cand = self._alloc(src, mid)
            if sum(a["gpus"] for a in cand[0]) <= n:
                lo, best = mid, cand
            else:
                hi = mid
        return best[0], lo, best[1]

    def layout(self, epoch: int, phase_rng: np.random.Generator | None, frontends: int) -> EpochPlan:
        """Epoch ``epoch``'s plan laid out on the group's workers (sessions keep the plan's order) and its
        routers' phases drawn from ``phase_rng`` (None: one frontend, zeros)."""
        plan, scale, planned = self.plan(epoch)
        duty = [0] * self.n_workers
        slots: list[list[tuple[int, int]]] = [[] for _ in range(self.n_workers)]
        targets: dict[int, list[tuple[int, int]]] = {}
        weights: dict[int, list[float]] = {}
        k = 0
        for a in plan:
            for _ in range(a["gpus"]):
                duty[k] = int(a["duty_us"])
                for session, _model, batch, share in a["streams"]:
                    slots[k].append((session, int(batch)))
                    targets.setdefault(session, []).append((k, len(slots[k]) - 1))
                    weights.setdefault(session, []).append(share / a["gpus"])
                k += 1
        rates = {}
        for session, tg in targets.items():
            rate = planned[session] / 1e6
            rates[session] = (rate, float(max(1, sum(slots[w][j][1] for w, j in tg), rate * self.window_us)))
        n_entries = sum(len(tg) for tg in targets.values())
        phase = (phase_rng.random((frontends, n_entries)) if phase_rng is not None
                 else np.zeros((1, n_entries), np.float64))
        return EpochPlan(scale, k, duty, slots, targets, weights, rates, phase)


def make_schedule(planner: Planner, frontend: np.ndarray, phase_rng: np.random.Generator | None, frontends: int,
                  last_epoch: int) -> NexusSchedule:
    """The group's schedule: its draws (:func:`draws`; the planner holds the coins) and epochs 0 …
    ``last_epoch`` planned and laid out in order."""
    epochs = [planner.layout(e, phase_rng, frontends) for e in range(last_epoch + 1)]
    return NexusSchedule(planner.session, planner.coin, frontend, epochs)
