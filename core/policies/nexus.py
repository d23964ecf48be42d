"""Nexus — periodic provisioning with fixed batch sizes and duty cycles (baseline).

As Shepherd §7 / §7.1, Nexus (SOSP '19, §6.1 "squishy bin packing") and
Symphony §2.2 / §4.2 describe it:

* **Sessions.** Nexus plans per *session* — a model with a latency SLO
  (Nexus §6.1); the request streams of one model and SLO form one session.
  (Planning every MAF function as its own session gave each of hundreds of
  tiny streams its own slot in some GPU's duty cycle, so 12 GPUs could not
  hold the plan even at 1k req/s: 43–57 % of SLOs met on real MAF 2019 rows.)
* Every epoch (default 60 s, Shepherd §7 "as recommended in [6]") each session
  is provisioned for its *peak* demand — the busiest ``peak_window_s`` window
  (Shepherd §7 "provision for the peak demand in every 60-second window … to
  ensure it can sustain the provided load") — at the largest batch b with
  2·ℓ(b) ≤ SLO (Symphony Eq. 1), by
  squishy bin packing: ``shepherd.core.policies.nexus_packing.plan_epoch`` (per-session
  batch sizes and duty cycles; the same provisioning the Nexus planner writes).
* The peak's window (the paper names none; documented choice): by default
  the SLO (the tightest of the group; every Shepherd run has one). A plan
  sustains a load only if it serves every request within its SLO, and Nexus
  §6.1's cycle rule d + ℓ(b) ≤ SLO makes each duty cycle (≤ SLO) hold what
  arrived in one cycle — so the demand that must be sustained is the
  busiest SLO-long interval. A 1 s window (the earlier default) averages
  sub-SLO bursts away: on the 20 s quick run of Fig. 7 its plans left
  MAF-stable at 0.88–0.92 utilization and dropped SLO-long bursts they were
  meant to sustain; with the SLO window 0.79–0.82 (MAF-bursty 0.63–0.66 →
  0.47–0.49), flat in the load.
* Whose peak: ``provision="previous"`` (default) uses the previous epoch's
  observed peak — what a periodic system can know. **First-epoch rule:** the
  first epoch has no previous one; it is provisioned from its own observed
  peak (a warm start, as if the load had been the same before the trace
  began — Nexus' profiling/bootstrapping phase). ``"oracle"`` uses every
  epoch's own peak.
* **Overload** (Shepherd §7.1: with a fixed number of workers Nexus "can only
  make its planning decision assuming a specific arrival rate that it can
  completely satisfy, which ends up being much lower than the applied load"):
  when the plan for the peaks needs more GPUs than the group has, Nexus admits
  a fraction s of every session and plans for the peaks *of the traffic it
  admits*, with the largest s (bisection) whose plan fits. Admission is a
  coin per request, drawn once when the run starts (request i is admitted
  while its uniform u_i < s), so the admitted traffic of a window at factor s
  is known exactly: its peaks are the busiest ``peak_window_s`` counts of the
  requests with u_i < s (:meth:`.nexus_schedule.Planner.admitted_peaks`). Documented choice:
  planning for s × the applied peak instead (as before) under-provisions the
  thinned traffic, whose relative bursts are those of its own, lower rate —
  then the utilization rose towards 1 with the load (0.93 → 0.95 from 12k to
  144k req/s, MAF-stable), the opposite of §7.1's "under 89 % … even under
  high load", because the applied traffic's 1 s peak/mean → 1 as it grows.
  Goodput stays flat as the load grows. Scaling every session keeps the mix
  (an earlier greedy fallback that provisioned only the busiest sessions at
  full peak dropped whole models, e.g. every ResNeSt269 request at 3k req/s).
* **Spare GPUs** (``spare``): Shepherd's Nexus provisions for the peaks and
  leaves the rest of the group idle (``"idle"``, default: Nexus' epoch-level
  autoscaling releases them). Symphony runs Nexus on a fixed cluster and
  measures it near Eq. 1's uncoordinated throughput on all 8 GPUs (§5
  Table 4), so with ``"spread"`` the plan is scaled *up* to the largest load
  factor s ≥ 1 that still fits the group (doubling, then bisection). Planning a
  1-s epoch for its own 1-s "peak" (its mean) on one GPU left no room for
  Poisson bursts: 5–7 % dropped at 10 % of capacity, so every p99 goodput of
  Symphony's experiments was 0.
* Admitted requests also pass a per-session token bucket at the provisioned
  rate (the planned peak of the admitted traffic) whose depth is one ``peak_window_s`` of it (at least one
  batch per allocation): a session whose demand outgrows the plan within an
  epoch has its excess dropped at admission, as Nexus' frontends do.
* Online: a frontend routes each request of a session to one of its
  allocations by smooth weighted round-robin over the allocations' shares;
  every GPU runs round-robin over its (session, batch) slots, work-conserving
  (Symphony §2.2) within its duty cycle (Nexus §6.1): a free GPU takes up to
  its slot's batch of queued requests, skipping empty slots, and each slot runs
  at most once per cycle — a GPU whose batches end early (fewer requests than
  planned) idles until the cycle ends; queued requests that can no longer
  finish are dropped lazily.
* No epoch is planned after the last one with arrivals (queued requests drain
  under the last plan instead of being dropped by an empty one).
* At an epoch boundary running batches finish; queued requests are re-routed
  under the new plan (dropped if their session lost its allocation).
* Every draw (coins, frontends, routers' phases) and every epoch's plan is
  made when the policy is built, from the group's own child seed, by
  :mod:`shepherd.core.policies.nexus_schedule` (whose docstring states the
  choices); the compiled fast path reads the same schedule.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.fastpath import ENGINE, FastPath, modelled, one_group
from shepherd.core.engine.cluster import is_nexus_plan, nexus_plan_gpus
from shepherd.core.engine.inputs import Inputs, Runtime
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.bounds import check_bound
from shepherd.core.errors import UserError
from shepherd.core.policies.base import Policy
from shepherd.core.policies.registry import register
from shepherd.core.policies.wrr import SmoothWeightedRoundRobin
from shepherd.core.rules.nexus import (admits, cycle_over, cycle_slot, cycle_wake, head_misses, reroute_order,
                                      router_start, take_token)
from shepherd.core.policies.nexus_schedule import Planner, draws, group_seed, make_schedule


#: stream ids below this are used as count indices directly (else they are densified)
DENSE_STREAM_IDS = 1 << 20
#: runs of arrivals at least this long take the vectorised admission of ``Nexus.on_arrivals``
#: (same outcomes as the per-request path, ``tests/test_policies.py``)
VECTOR_MIN_RUN = 64


@dataclass(frozen=True)
class NexusConfig:
    """Nexus options (Shepherd §7, Symphony §2.2)."""

    epoch_s: float = 60.0  #: reconfiguration period
    #: window over which a session's peak rate is measured; None: the group's tightest SLO
    peak_window_s: float | None = None
    provision: str = "previous"  #: "previous" epoch's peak, or each epoch's own ("oracle")
    #: independent frontends (Symphony §3.3): each request goes to a random one, each routes
    #: round-robin on its own state (starting at a random phase); 1 = the coordinated case
    frontends: int = 1
    #: GPUs the peak plan leaves over: "idle" (Shepherd §7: Nexus provisions for the peaks and
    #: releases the rest) or "spread" (Symphony §2.2 / §5 Table 4: a fixed cluster whose every GPU
    #: serves — the plan is scaled up to the largest load factor s ≥ 1 that still fits)
    spare: str = "idle"

    def validate(self) -> None:
        if not self.epoch_s > 0:
            raise UserError(f"nexus epoch_s must be positive, got {self.epoch_s}")
        if self.peak_window_s is not None and not 0 < self.peak_window_s <= self.epoch_s:
            raise UserError(f"nexus peak_window_s must be in (0, epoch_s], got {self.peak_window_s}")
        if self.provision not in ("previous", "oracle"):
            raise UserError(f"nexus provision must be 'previous' or 'oracle', got '{self.provision}'")
        if not (isinstance(self.frontends, int) and self.frontends >= 1):
            raise UserError(f"nexus frontends must be an integer ≥ 1, got {self.frontends}")
        check_bound("frontends", self.frontends, "nexus frontends")
        if self.spare not in ("idle", "spread"):
            raise UserError(f"nexus spare must be 'idle' or 'spread', got '{self.spare}'")


def epoch_peaks(arrival: np.ndarray, stream: np.ndarray, epoch_us: int, window_us: int) -> dict[int, dict[int, float]]:
    """Per epoch, per stream: the peak request rate (req/s) over windows of ``window_us``.

    Arrivals are sorted, so each window is a contiguous slice: one ``bincount``
    per window, no copy of the trace.
    """
    out: dict[int, dict[int, float]] = {}
    if len(arrival) == 0:
        return out
    if 0 <= int(stream.min()) and int(stream.max()) < DENSE_STREAM_IDS:
        ids, dense = None, None  # stream ids index the counts directly
    else:
        ids, dense = np.unique(stream, return_inverse=True)
    n_ids = len(ids) if ids is not None else int(stream.max()) + 1
    first_w, last_w = int(arrival[0]) // window_us, int(arrival[-1]) // window_us
    edges = np.searchsorted(arrival, np.arange(first_w, last_w + 2, dtype=np.int64) * window_us)
    peak: dict[int, np.ndarray] = {}
    for k, w in enumerate(range(first_w, last_w + 1)):
        lo, hi = edges[k], edges[k + 1]
        if lo == hi:
            continue
        part = dense[lo:hi] if dense is not None else stream[lo:hi]
        counts = np.bincount(part, minlength=n_ids)
        e = (w * window_us) // epoch_us
        if e in peak:
            np.maximum(peak[e], counts, out=peak[e])
        else:
            peak[e] = counts
    scale = 1e6 / window_us
    for e, counts in peak.items():
        nz = np.flatnonzero(counts)
        keys = ids[nz] if ids is not None else nz
        out[e] = {int(s): float(c) * scale for s, c in zip(keys, counts[nz])}
    return out


def stream_info(arrival: np.ndarray, deadline: np.ndarray, model: np.ndarray, stream: np.ndarray
                ) -> tuple[dict[int, int], dict[int, int], np.ndarray, np.ndarray]:
    """Each stream's model and SLO, taken from its first request (streams have one of each),
    and the sorted stream ids with each request's index into them (``np.unique``'s; small non-negative
    ids — every generated trace's — are counted instead of sorted: the same arrays, ~10× faster at 1 M
    requests, ``tests/test_policies.py``)."""
    if len(stream) and 0 <= int(stream.min()) and int(stream.max()) < DENSE_STREAM_IDS:
        ids = np.flatnonzero(np.bincount(stream))
        lut = np.zeros(int(stream.max()) + 1, np.int64)
        lut[ids] = np.arange(len(ids))
        inverse = lut[stream]
        first = np.full(len(lut), len(stream), np.int64)
        np.minimum.at(first, stream, np.arange(len(stream), dtype=np.int64))
        first = first[ids]
    else:
        ids, first, inverse = np.unique(stream, return_index=True, return_inverse=True)
    return ({int(s): int(model[i]) for s, i in zip(ids, first)},
            {int(s): int(deadline[i] - arrival[i]) for s, i in zip(ids, first)}, ids, inverse)


@register("nexus", NexusConfig)
class Nexus(Policy):
    """Nexus: per-epoch per-stream provisioning, fixed batches, round-robin GPUs."""

    #: per-GPU backends decide locally: a constant cost, no per-worker term; frontends route arrivals
    default_overhead = OverheadConfig(base_us=1.0, per_worker_us=0.0, arrival_us=0.5)
    fast_path = FastPath("whole", "shepherd.core.engine.fast.nexus",
                         covers="one serving group (any epoch_s, peak_window_s, provision, frontends, spare, "
                                "hardware mix), overhead model|none",
                         covered=lambda cfg, shape: modelled(shape) and one_group(shape),
                         mirrors=ENGINE + ("shepherd.core.policies.nexus_schedule", "shepherd.core.policies.wrr",
                                           "shepherd.core.policies.nexus_packing"))

    @classmethod
    def prepare(cls, inputs: Inputs, config: NexusConfig) -> Runtime:
        """As every whole-model policy, except on a plan of the Nexus planner (``plan --planner nexus``):
        that plan's groups are this policy's own per-epoch allocations, a session possibly split over
        several GPUs (Nexus §6.1), which no fixed stream → group routing can express. The policy owns the
        split: it runs on one group of the plan's peak worker count and re-plans each epoch with the
        same squishy bin packing (:func:`shepherd.core.policies.nexus_packing.plan_epoch`)."""
        plan = inputs.get("plan")
        if plan is None or inputs.cluster is not None or not is_nexus_plan(plan):
            return super().prepare(inputs, config)
        gpus, hardware = nexus_plan_gpus(plan)
        artifacts = {k: v for k, v in inputs.artifacts.items() if k != "plan"}
        own = replace(inputs, artifacts=artifacts, gpus=gpus, hardware=inputs.hardware or hardware)
        return super().prepare(own, config)

    def __init__(self, act: Actions, config: NexusConfig) -> None:
        super().__init__(act, config)
        self.epoch_us = max(1, int(round(config.epoch_s * 1e6)))
        arrival, deadline, model, stream = act.arrivals()
        stream_model, stream_slo, ids, inverse = stream_info(arrival, deadline, model, stream)
        # sessions: one per (model, SLO) (Nexus §6.1); ids 0, 1, … in order of first appearance
        keys: dict[tuple[int, int], int] = {}
        self.session_of: dict[int, int] = {}
        for s in sorted(stream_model):
            self.session_of[s] = keys.setdefault((stream_model[s], stream_slo[s]), len(keys))
        self.stream_model = {sid: m for (m, _slo), sid in keys.items()}  # session → model
        self.stream_slo = {sid: slo for (_m, slo), sid in keys.items()}  # session → SLO
        self.stream_ids = ids  #: sorted stream ids of the group …
        self.session_lut = np.array([self.session_of[int(x)] for x in ids], dtype=np.int64)  #: … their sessions
        session = self.session_lut[inverse] if len(stream) else np.asarray(stream, dtype=np.int64)
        self.planned = np.zeros(len(keys), dtype=bool)  #: per session: has an allocation this epoch
        if config.peak_window_s is None:  # the tightest SLO (Shepherd's runs have one SLO each)
            self.window_us = min([self.epoch_us, *self.stream_slo.values()])
        else:
            self.window_us = max(1, int(round(config.peak_window_s * 1e6)))
        peaks = epoch_peaks(arrival, session, self.epoch_us, self.window_us)
        self.last_epoch = max(peaks) if peaks else 0  #: no epoch after the last with arrivals: queues drain
        self.scale = 1.0  #: admitted fraction under overload (the plan's load factor)
        self.hw = act.hardware[0]  # plans and drops on the group's first worker's table
        self.lat = act.lat[self.hw]
        # the group's draws and every epoch's plan, before the run (.nexus_schedule: the fast path reads them too)
        groups = act.runtime.cluster.groups
        seed = group_seed(act.rng, groups.index(act.group_id), len(groups))
        coins, frontend, phase_rng = draws(seed, len(arrival), config.frontends)
        self.planner = Planner(arrival, session, coins, peaks, self.stream_model, self.stream_slo, act.models,
                               self.lat, len(act.workers), config, self.epoch_us, self.window_us)
        self.schedule = make_schedule(self.planner, frontend, phase_rng, config.frontends, self.last_epoch)
        # the per-request draws indexed by request id (a group's ids index the engine's arrays)
        self.coin, self.front = coins, frontend
        ids_g = act.request_ids
        if ids_g is not None:
            size = int(ids_g.max()) + 1 if len(ids_g) else 0
            self.coin, self.front = np.ones(size, np.float32), np.zeros(size, np.int64)
            self.coin[ids_g], self.front[ids_g] = coins, frontend
        self.workers = list(act.workers)
        self.local = {w: k for k, w in enumerate(act.workers)}
        n = len(act.workers)
        self.slots: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # per worker: (session, batch)
        self.queues: list[list[deque]] = [[] for _ in range(n)]  # per worker, per slot
        self.rr = [0] * n
        self.idle = set(range(n))
        self.duty = [0] * n  # per worker: its duty cycle (µs)
        self.cycle_end = [0] * n  # per worker: when its current duty cycle ends
        self.served: list[set[int]] = [set() for _ in range(n)]  # slots started in the current cycle
        self.wake = [-1] * n  # per worker: the time of its pending cycle timer
        self.targets: dict[int, list[tuple[int, int]]] = {}  # session → its (worker, slot) allocations
        self.weights: dict[int, list[float]] = {}  # session → each allocation's share of its requests
        self.bucket: dict[int, list[float]] = {}  # session → [tokens, last_t, rate_per_us, depth]
        self.plans: list[dict] = []  # per epoch configured: GPUs used, scale factor
        #: per frontend, per session: its smooth weighted round-robin over ``targets``
        self.fronts: list[dict[int, SmoothWeightedRoundRobin]] = []

    def _configure(self, now: int, epoch: int) -> None:
        plan = self.schedule.epochs[epoch]
        queued = []
        for per_w in self.queues:
            for q in per_w:
                queued.extend(q)
        n = len(self.workers)
        self.duty, self.slots, self.targets, self.weights = plan.duty, plan.slots, plan.targets, plan.weights
        self.queues = [[deque() for _ in slots] for slots in self.slots]
        self.rr = [0] * n
        self.cycle_end = [0] * n
        self.served = [set() for _ in range(n)]
        self.bucket = {s: [depth, now, rate, depth] for s, (rate, depth) in plan.rates.items()}
        self.scale = plan.scale
        self.planned[:] = False
        self.planned[list(self.bucket)] = True
        self.plans.append({"epoch": epoch, "gpus": plan.gpus, "scale": plan.scale})
        self.fronts = []
        for phase in plan.phase:  # per frontend: each router's entries start at w · n · u
            it = iter(phase.tolist())
            self.fronts.append({s: SmoothWeightedRoundRobin(ws, [router_start(w, len(ws), next(it)) for w in ws])
                                for s, ws in self.weights.items()})
        dropped = []
        order = reroute_order(np.array([x[0] for x in queued], np.int64), np.array([x[1] for x in queued], np.int64))
        for d, r, s in (queued[i] for i in order.tolist()):  # s: the session
            if s in self.targets:
                self._enqueue(s, d, r)
            else:
                dropped.append(r)
        self.act.drop(dropped, now)
        for kk in sorted(self.idle):
            self._dispatch(kk, now)

    # ------------------------------------------------------------------ online

    def on_start(self, now: int) -> None:
        self._configure(now, 0)
        if self.last_epoch >= 1:
            self.act.set_timer(self.epoch_us, 1)

    def on_timer(self, now: int, payload: Any) -> None:
        if int(payload) < 0:  # a worker's duty cycle ended
            k = -int(payload) - 1
            if self.wake[k] == now:
                self.wake[k] = -1
            if k in self.idle:
                self._dispatch(k, now)
            return
        self._configure(now, int(payload))
        if int(payload) < self.last_epoch:
            self.act.set_timer((int(payload) + 1) * self.epoch_us, int(payload) + 1)

    def _enqueue(self, s: int, d: int, r: int) -> int:
        """The smooth weighted round-robin of request ``r``'s frontend over the session's allocations; returns
        the worker."""
        k, j = self.targets[s][self.fronts[self.front[r]][s].pick()]
        self.queues[k][j].append((d, r, s))
        return k

    def on_arrival(self, now: int, rid: int, model: int, deadline: int, stream: int) -> None:
        s = self.session_of.get(stream, -1)
        if s < 0 or not admits(self.planned[s], self.coin[rid], self.scale):
            self.act.drop([rid], now)
        elif not self._admit(now, s, deadline, rid):
            self.act.drop([rid], now)

    def on_arrivals(self, ts: list[int], ds: list[int], ms: list[int], ss: list[int],
                    rs: list[int], lo: int, hi: int) -> int:
        """A run of arrivals, the same decisions as :meth:`on_arrival` per request in order.

        Under overload most arrivals fall to the admission coin (u ≥ s) or
        have no allocation, which touches no state: those tests are done for
        the run at once, and only the survivors go through the token bucket
        and the queues one by one. A dispatch may lower ``act.until``; then the
        run stops where the per-request loop would. Short runs take the
        per-request path.
        """
        act = self.act
        end = bisect_left(ts, act.until, lo, hi)
        if end - lo < VECTOR_MIN_RUN:
            return super().on_arrivals(ts, ds, ms, ss, rs, lo, hi)
        ids = self.stream_ids
        streams = np.array(ss[lo:end], dtype=np.int64)
        at = np.minimum(np.searchsorted(ids, streams), len(ids) - 1)
        known = ids[at] == streams
        session = self.session_lut[at]
        planned = known & self.planned[session]
        passed = admits(planned, self.coin[np.asarray(rs[lo:end], dtype=np.int64)], self.scale)
        until = act.until
        last = lo - 1
        refused = []
        sess = session.tolist()
        for c in np.flatnonzero(passed).tolist():
            i = lo + c
            t = ts[i]
            if t >= until:
                break
            if not self._admit(t, sess[c], ds[i], rs[i]):
                refused.append(rs[i])
            last = i
            until = act.until
        stop = bisect_left(ts, until, last + 1, end)
        n = stop - lo
        refused.extend(np.asarray(rs[lo:stop])[~passed[:n]].tolist())
        act.drop(refused, ts[lo])
        return stop

    def _admit(self, now: int, s: int, deadline: int, rid: int) -> bool:
        """Session ``s``'s token bucket (rate s · peak, depth one peak window); an admitted
        request is queued on one of the session's allocations. False: refused."""
        b = self.bucket[s]
        ok, b[0] = take_token(b[0], b[1], b[2], b[3], now)
        b[1] = now
        if not ok:
            return False
        k = self._enqueue(s, deadline, rid)
        if k in self.idle:
            self._dispatch(k, now)
        return True

    def _dispatch(self, k: int, now: int) -> None:
        """Start the next slot of worker k's duty cycle that has requests; each slot
        runs at most once per cycle, so a GPU whose batches end early idles until
        its cycle ends (Nexus §6.1: the duty cycle is the plan's period)."""
        slots, queues = self.slots[k], self.queues[k]
        t = self.act.decision_time(now)
        n = len(slots)
        served = self.served[k]
        if cycle_over(now, self.cycle_end[k]):
            self.cycle_end[k] = now + self.duty[k]
            served.clear()
        for step in range(n):
            j = cycle_slot(self.rr[k], step, n)
            if j in served:
                continue
            q = queues[j]
            stream, cap = slots[j]
            m = self.stream_model[stream]
            lat = self.lat[m]
            dead = []
            # the batch is at most ``cap``; drop heads that would miss their deadline in it
            while q and head_misses(q[0][0], t, lat, cap, len(q)):
                dead.append(q.popleft()[1])
            self.act.drop(dead, now)
            if not q:
                continue
            take = [q.popleft()[1] for _ in range(min(cap, len(q)))]
            self.act.start(self.workers[k], m, take, now)
            served.add(j)
            self.rr[k] = cycle_slot(j, 1, n)
            self.idle.discard(k)
            return
        self.idle.add(k)
        at = cycle_wake(bool(served), self.wake[k], self.cycle_end[k], now)
        if at >= 0:
            self.wake[k] = at
            self.act.set_timer(at, -k - 1)

    def on_completion(self, now: int, worker: int) -> None:
        self._dispatch(self.local[worker], now)
