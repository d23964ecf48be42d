"""Symphony — centralized, (non-)work-conserving batch scheduler (Symphony §4.2–4.3, Appendix C).

One scheduler serves every GPU of its (sub-)cluster:

* **One candidate batch per model** (§4.3 "Scheduler state"): the model's
  queued requests in deadline order. Given the earliest time ``g`` a GPU is
  available, the candidate is *pruned* Clipper-style (§4.3 "how do we prune
  the candidate"): heads that cannot finish even alone are dropped, and the
  candidate is the largest earliest-deadline prefix of b requests such that
  ``max(g, now + delay(b)) + ℓ(b) ≤ dl`` (``dl`` = its first deadline; the
  others are later, so all of them finish in time); the rest wait for a later
  candidate. ``delay(b) = d_ctrl + d_data·b`` (Appendix C; options, default 0).
* ``sched_at = dl − ℓ(|reqs|+1) − delay(|reqs|+1)``: the latest time the
  candidate can still grow by one request (§4.3).
* **Schedulable** (§4.3): non-work-conserving (``symphony``) when the
  candidate holds ≥ β·λ requests or ``now ≥ sched_at`` (or it can no longer
  grow: max batch, or more requests queued than fit); work-conserving
  (``symphony-wc``) as soon as it is formed.
* **Which candidate a GPU takes**: the schedulable one with the earliest
  ``sched_at`` (ties: lower model index); ``rank="all"`` (a deviation, below):
  the earliest ``sched_at`` of all candidates once one is schedulable. A GPU that frees takes one at once;
  an idle GPU takes a candidate the moment it becomes schedulable (a
  per-model timer at ``sched_at``; a timer whose candidate changed is
  cancelled, Appendix C ``inform_candidate``). With non-zero delays a busy
  GPU is granted its next batch ahead, at ``free_at − delay`` (Appendix C
  ``set_gpu_timer``), and the batch is booked (``act.book``) to start when the
  GPU frees; with zero delays granting at the completion is the same.
* **λ, the model's arrival rate**, is estimated online as the number of the
  model's arrivals in the last ``rate_window_ms`` (default 1000 ms) divided by
  that window (by the time since the first arrival while shorter). β is the
  profile's fixed cost ``2ℓ(1) − ℓ(2)`` on the group's first hardware.

**Which rule is the default** (``rule``): §4.3's text (≥ β·λ requests or
``sched_at``) and Appendix C as printed (its second ``exec_at`` assignment
makes every candidate wait for ``sched_at``) differ, and each reproduces a
different figure. Below saturation the β·λ test passes as soon as a model
has ≈ β·λ requests (λ = its own rate), so the text rule runs small batches
on otherwise idle GPUs: Fig. 10's setup (5 ResNet50, 12 GPUs, 100 ms) at
0.25/0.5/0.75 of the peak ran mean batches 2.0/3.2/7.0 at utilization
0.54/0.82/0.95, where the sched_at rule ran 16.8/23.6/28.5 at 0.26/0.48/0.74
— only the latter tracks (p − o)/p as Fig. 10 (right) shows. But the
sched_at rule makes weak-batching models wait for nothing (BERT, Fig. 4(c):
0.70–0.92 of work-conserving goodput vs 1.00 with the text rule). The text
rule is the default because it is the algorithm §4.3 states and the one
Fig. 4 (the rule's own microbenchmark) evaluates; Fig. 10 and the
autoscaling signal (§4.4) are reported with both rules. Table 4 is the
same under either (ResNet50 5241 / 5241 r/s, InceptionResNetV2 930 / 940).
The authors' released scheduler defaults to the sched_at rule (their ``kFrontrun``; ``rule="frontrun"``,
alias ``"sched_at"``) and has two more, ``target-batch`` and ``beta-lambda-authors``
(:mod:`shepherd.core.policies.symphony_rules` names each and cites where it comes from).

**A GPU passes over an urgent candidate** (Fig. 4's losing cells; the
paper's rule, not a bug here). A freeing GPU takes only *schedulable*
candidates (§4.3; Appendix C likewise: only a candidate whose model timer
fired enters ``mc``). A lone request below β·λ waits for its sched_at
``dl − ℓ(2)`` while GPUs free and take other models' candidates of ≥ β·λ
requests; when its sched_at comes and every GPU is busy, it has
``ℓ(b+1) − ℓ(1) = α·b`` of slack left (1.06 ms for DenseNet121), and at
≥ 85 % utilization no GPU frees in time: the head is dropped (DenseNet121,
8 models on 8 GPUs, 30 ms, 4 s at 1200 r/s, β·λ ≈ 1.5: 32 drops, every
one a head that waited as a lone, not-schedulable candidate while a GPU
looked at it — 27 still alone when dropped, 5 joined by a second request too
late; work-conserving and the sched_at rule drop none). Checked and not
the cause: the model timer fires at sched_at and an idle GPU takes the
candidate then (tests/test_symphony.py), no cancelled timer fires, the rate
window (250 ms / 1 s / 4 s) changes nothing, Clipper pruning is worse (0.55
of work-conserving), and Appendix C's own ranking (by ``exec_at``: a β·λ
candidate by its last update, a timed one by sched_at) is worse still
(0.39). No reading of §4.3 or Appendix C we found lets a GPU take a
candidate that is not yet schedulable. ``rank="all"`` does — once some
candidate is schedulable, the GPU takes the candidate with the earliest
sched_at among all of them — and is a deviation, reported as its own row
(``symphony-ra`` in the experiments), never the default.

The two policies share this one class; ``symphony-wc`` only switches the
schedulability rule (:attr:`Symphony.work_conserving`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import polars as pl

from shepherd.core.autoscale import AutoscaleConfig, advise
from shepherd.core.engine.actions import Actions
from shepherd.core.engine.fastpath import ENGINE, FastPath, modelled, one_group
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.errors import UserError
from shepherd.core.policies.base import Policy
from shepherd.core.policies.queues import DeadlineQueues
from shepherd.core.policies import symphony_rules as rules
from shepherd.core.policies.registry import register
from shepherd.core.rules.latency import monotone
from shepherd.core.rules.symphony import (cutoff, earlier_gpu, fit, frontrun, goes_now, prefers_waiting, retry_at,
                                          window_lo, window_rate, window_start)

INF = 1 << 62


@dataclass(frozen=True)
class SymphonyConfig:
    """Symphony options (§4.3, Appendix C)."""

    d_ctrl_us: float = 0.0  #: control-message delay per dispatch (Appendix C ``delay``)
    d_data_us: float = 0.0  #: input-transfer delay per request of the batch
    rate_window_ms: float = 1000.0  #: window of the online arrival-rate estimate λ
    #: schedulability (``core.policies.symphony_rules``): "text" (§4.3: ≥ β·λ requests or now ≥ sched_at),
    #: "frontrun" (alias "sched_at"; Appendix C as printed and the authors' code default: sched_at only),
    #: "target-batch" (the authors' kTargetBatchSize), "beta-lambda-authors" (their kBetaLambda)
    rule: str = "text"
    #: "window" (drop heads that shrink the batch; a deviation: neither §4.3's Clipper wording nor the authors'
    #: kWindowDrop) or "clipper" (§4.3: only heads that cannot finish alone)
    prune: str = "window"
    #: which candidates a GPU that takes one ranks by sched_at: "schedulable" (§4.3 as stated, default) or "all"
    #: (a deviation: once any candidate is schedulable, the earliest sched_at of every candidate goes)
    rank: str = "schedulable"
    #: closed-loop autoscaling (§4.4, ``core.autoscale``): every this many seconds (0 = off) the
    #: cluster follows the advice from the last epoch's bad rate and idle fraction
    autoscale_epoch_s: float = 0.0
    autoscale_bad: float = 0.01  #: bad-rate threshold of the advice
    autoscale_max_gpus: int = 1_000_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "rule", rules.canonical(self.rule))  # one name per rule, in every artifact

    def validate(self) -> None:
        for name in ("d_ctrl_us", "d_data_us"):
            v = getattr(self, name)
            if not v >= 0:
                raise UserError(f"symphony {name} must be ≥ 0, got {v}")
        if not self.rate_window_ms > 0:
            raise UserError(f"symphony rate_window_ms must be positive, got {self.rate_window_ms}")
        if not self.autoscale_epoch_s >= 0:
            raise UserError(f"symphony autoscale_epoch_s must be ≥ 0, got {self.autoscale_epoch_s}")
        if 0 < self.autoscale_epoch_s and round(self.autoscale_epoch_s * 1e6) == 0:
            raise UserError(f"symphony autoscale_epoch_s {self.autoscale_epoch_s} rounds to 0 µs (0 = off)")
        AutoscaleConfig(self.autoscale_bad, 1, self.autoscale_max_gpus).validate()
        if self.rule not in rules.RULES:
            raise UserError(f"symphony rule must be one of {', '.join(rules.RULES)} (or 'sched_at' = "
                            f"'frontrun'), got '{self.rule}'")
        if self.prune not in ("window", "clipper"):
            raise UserError(f"symphony prune must be 'window' or 'clipper', got '{self.prune}'")
        if self.rank not in ("schedulable", "all"):
            raise UserError(f"symphony rank must be 'schedulable' or 'all', got '{self.rank}'")


@dataclass
class Candidate:
    """A model's candidate batch at a given GPU time (Appendix C ``Candidate``)."""

    model: int
    bs: int  #: requests in the batch (its earliest-deadline prefix)
    sched_at: int  #: latest time it can still grow by one request
    schedulable: bool


@register("symphony", SymphonyConfig)
class Symphony(Policy):
    """Symphony: one candidate per model, non-work-conserving, earliest sched_at first."""

    #: the scheduler is off the data path and built for line rate (§4.5): no modelled decision cost
    default_overhead = OverheadConfig(base_us=0.0, per_worker_us=0.0)
    work_conserving = False
    fast_path = FastPath(
        "whole", "shepherd.core.engine.fast.symphony",
        covers="d_ctrl_us=0, d_data_us=0, autoscale_epoch_s=0 (any rule, prune, rank, rate_window_ms), "
               "one serving group, overhead model|none",
        covered=lambda cfg, shape: (modelled(shape) and one_group(shape) and cfg.d_ctrl_us == 0
                                    and cfg.d_data_us == 0 and cfg.autoscale_epoch_s == 0),
        params=lambda cls, cfg, runtime: (rules.RULES.index(cfg.rule),
                                          (rules.METER_SPAN_US, rules.METER_BUCKETS, rules.XRPS, rules.XSTD)),
        counters=("batches", "dropped_pruned", "stale_timer_fired", "timers_cancelled", "booked_ahead"),
        mirrors=ENGINE + ("shepherd.core.policies.queues", "shepherd.core.policies.symphony_rules",
                          "shepherd.core.rules.symphony"),
        configs=tuple({"rule": r} for r in rules.RULES) + ({"prune": "clipper", "rank": "all"},))
    #: an SLO below ℓ(1) is a UserError in :meth:`prepare` (tests/test_engine_properties.py checks it)
    rejects_infeasible_slo = True

    @classmethod
    def prepare(cls, inputs, config):
        """The α/β tables; an empty cluster or an SLO below ℓ(1) = α + β (no feasible batch) is a user error."""
        runtime = super().prepare(inputs, config)
        if not runtime.cluster.workers:
            raise UserError("symphony needs at least one GPU (got 0)")
        trace = inputs.trace
        if trace.height:
            slo = trace.group_by("model").agg(pl.col("slo_us").min()).sort("model")
            for name, s in zip(slo["model"].to_list(), slo["slo_us"].to_list()):
                m = inputs.models.index(name)
                l1 = min(per_hw[m][1] for per_hw in runtime.lat)
                if s < l1:
                    raise UserError(f"SLO {s / 1000:g} ms of model '{name}' is below ℓ(1) = α + β = "
                                    f"{l1 / 1000:g} ms: no feasible batch")
        return runtime

    def __init__(self, act: Actions, config: SymphonyConfig) -> None:
        super().__init__(act, config)
        n_models = len(act.models)
        self.q = DeadlineQueues(n_models)
        self.maxb = act.max_batch
        self.workers = list(act.workers)
        self.local = {w: k for k, w in enumerate(self.workers)}
        hw = act.hardware[0] if self.workers else 0
        self.hw_name = act.runtime.hardware[hw]
        self.lat = act.lat[hw]
        self.dctl, self.ddat = int(round(config.d_ctrl_us)), float(config.d_data_us)
        self.delays = self.dctl > 0 or self.ddat > 0
        self.window_prune = config.prune == "window"
        self.rule = config.rule
        self.meter = [rules.BucketMeter() for _ in range(n_models)] if config.rule in rules.RULES[2:] else None
        self.slo = [0] * n_models  #: the model's SLO (µs), from its latest arrival (the target batch's budget)
        self.rank_all = config.rank == "all"
        top = self.maxb + 1
        #: ℓ(b) + delay(b), b = 0 … max batch (monotone: bisected for the largest feasible b)
        self.ld = [[self.lat[m][b] + self._delay(b) if b else 0 for b in range(top)] for m in range(n_models)]
        #: both tables non-decreasing (the searches bisect) — a measured CPU table may dip
        #: (:mod:`shepherd.core.rules.latency`)
        self.mono = [monotone(self.lat[m], self.maxb) and monotone(self.ld[m], self.maxb) for m in range(n_models)]
        self.beta_s = [max(0.0, (2 * self.lat[m][1] - self.lat[m][2]) / 1e6) if top > 2 else self.lat[m][1] / 1e6
                       for m in range(n_models)]
        self.window = max(1, int(round(config.rate_window_ms * 1000)))
        self.recent: list[deque] = [deque() for _ in range(n_models)]
        self.first_arrival = [-1] * n_models
        self.free_at = [0] * len(self.workers)
        self.idle = set(range(len(self.workers)))
        self.ahead: set[int] = set()  #: busy workers granted ahead (their next batch may be booked)
        self.booked: set[int] = set()
        self.model_timer: list[Any] = [None] * n_models
        self.gpu_timer: list[Any] = [None] * len(self.workers)
        self.token = 0  #: payload id of the latest model timer
        self.cancelled: set[int] = set()  #: tokens of cancelled model timers (a check: none may fire)
        self.retired: set[int] = set()  #: removed by the autoscaler while running a batch
        self.scale_us = int(round(config.autoscale_epoch_s * 1e6))
        arrivals = act.arrivals()[0] if self.scale_us else ()
        self.last_arrival = int(arrivals.max()) if len(arrivals) else 0
        self.scale_cfg = AutoscaleConfig(config.autoscale_bad, 1, config.autoscale_max_gpus)
        self.counters = {"batches": 0, "dropped_pruned": 0, "stale_timer_fired": 0, "timers_cancelled": 0,
                         "booked_ahead": 0}

    # ------------------------------------------------------------------ model side

    def _delay(self, b: int) -> int:
        return self.dctl + int(round(self.ddat * b))

    def rate(self, m: int, now: int) -> float:
        """λ of model ``m`` in requests/s (module docstring)."""
        rec = self.recent[m]
        for _ in range(window_lo(rec, 0, len(rec), now, self.window)):
            rec.popleft()
        return window_rate(len(rec), self.window, now - self.first_arrival[m] if self.first_arrival[m] >= 0 else 0)

    def candidate(self, m: int, now: int, g: int) -> Candidate | None:
        """Prune model ``m``'s queue for a GPU available at ``g`` and return its candidate (or None).

        ``prune="clipper"``: drop only the heads that cannot finish even alone;
        the batch is the earliest-deadline feasible prefix. ``prune="window"``
        (default): also drop the heads whose inclusion would force a smaller
        batch than a later start in the queue allows (the batch is the
        earliest of the largest feasible windows of consecutive deadlines),
        when the head's own batch would be below ¾ of it (under overload this
        keeps batches large — the flat top, §4.4; in a burst it does not trade
        requests for a slot or two).
        """
        q = self.q
        ld, lat, mono = self.ld[m], self.lat[m], self.mono[m]
        qd = q.d[m]
        # heads that cannot finish in any batch the queue allows are dropped (:func:`~shepherd.core.rules.symphony.
        # cutoff`: alone on a monotone table; on a dipping one the least end over the sizes the queue allows)
        dead: list[int] = []
        while True:
            got = q.expire(m, cutoff(lat, ld, now, g, max(1, min(self.maxb, q.length(m))), mono))
            if not got:
                break
            dead += got
        n = q.length(m)
        h = q.h[m]
        if n and self.window_prune:  # (the rule: :func:`shepherd.core.rules.symphony.window_start`)
            start, _ = window_start(qd, h, h + n, self.lat[m], ld, now, g, self.maxb, self.mono[m])
            if start > h:
                dead = dead + q.take(m, h, start - h)
                n = q.length(m)
        if dead:
            self.act.drop(dead, now)
            self.counters["dropped_pruned"] += len(dead)
        if n == 0:
            return None
        dl = qd[q.h[m]]
        b = fit(self.lat[m], ld, dl, now, g, min(n, self.maxb), self.mono[m])
        sched_at, full = frontrun(ld, dl, b, n, self.maxb)
        ok = goes_now(self.work_conserving, full, now, sched_at)
        if not ok:
            ok = rules.early(self.rule, b, self.rate(m, now) if self.rule == "text" else 0.0, self.beta_s[m],
                             self.meter[m] if self.meter else None, self.lat[m], self.slo[m] - self.dctl,
                             self.ddat, self.maxb, now)
        return Candidate(m, b, sched_at, ok)

    def _set_model_timer(self, m: int, at: int | None) -> None:
        t = self.model_timer[m]
        if t is not None:
            if at is not None and t.at == at and not t.cancelled:
                return
            self.act.cancel_timer(t)
            self.cancelled.add(t.payload[2])
            self.counters["timers_cancelled"] += 1
            self.model_timer[m] = None
        if at is not None:
            self.token += 1
            self.model_timer[m] = self.act.set_timer(at, ("model", m, self.token))

    # ------------------------------------------------------------------ GPU side

    def _earliest_worker(self) -> int | None:
        pool = self.idle if self.idle else self.ahead
        if not pool:
            return None
        k = -1
        for x in pool:
            if earlier_gpu(self.free_at[x], x, self.free_at[k], k):
                k = x
        return k

    def _grant(self, k: int, now: int, models) -> bool:
        """Give worker ``k`` the schedulable candidate with the earliest sched_at; False if none.

        ``rank="all"``: when some candidate is schedulable, the candidate with the earliest sched_at
        among all of them goes, schedulable or not (module docstring: a labelled deviation).
        """
        g = max(now, self.free_at[k])
        best: Candidate | None = None
        waiting: list[Candidate] = []
        for m in models:
            if self.q.length(m) == 0:
                continue
            c = self.candidate(m, now, g)
            if c is None:
                self._set_model_timer(m, None)
                continue
            if k in self.ahead and now + self._delay(c.bs) > g:
                continue  # its inputs would arrive after the GPU frees: wait for the completion
            if not c.schedulable:
                waiting.append(c)
                continue
            if best is None or c.sched_at < best.sched_at:
                best = c
        if k in self.idle:
            for c in waiting:  # an idle GPU takes it the moment it becomes schedulable
                self._set_model_timer(c.model, retry_at(now, c.sched_at))
        if best is None:
            return False
        urgent = min(waiting, key=lambda c: c.sched_at, default=None) if self.rank_all else None
        if urgent is not None and prefers_waiting(best.sched_at, urgent.sched_at, self.rank_all):
            best = urgent
        m = best.model
        self._set_model_timer(m, None)
        rids = self.q.take(m, self.q.h[m], best.bs)
        w = self.workers[k]
        self.counters["batches"] += 1
        if k in self.ahead:
            self.act.book(w, m, rids, now)
            self.ahead.discard(k)
            self.booked.add(k)
            self.counters["booked_ahead"] += 1
            start = g
        else:
            start = max(g, now + self._delay(best.bs))
            self.idle.discard(k)
            self.act.start(w, m, rids, now, at=start)
        self.free_at[k] = start + self.lat[m][best.bs]
        if self.delays:
            at = self.free_at[k] - self._delay(best.bs)
            if at > now:
                self.gpu_timer[k] = self.act.set_timer(at, ("gpu", k))
        return True

    def _dispatch(self, now: int, models=None) -> None:
        models = range(len(self.act.models)) if models is None else models
        while True:
            k = self._earliest_worker()
            if k is None or not self._grant(k, now, models):
                return

    # ------------------------------------------------------------------ events

    def on_arrival(self, now: int, rid: int, model: int, deadline: int, stream: int) -> None:
        self.q.push(model, deadline, rid)
        self.recent[model].append(now)
        if self.first_arrival[model] < 0:
            self.first_arrival[model] = now
        if self.meter:
            self.meter[model].hit(now)
            self.slo[model] = deadline - now
        if self.idle:  # rank="all" ranks every candidate, so every model is looked at
            self._dispatch(now, None if self.rank_all else (model,))

    def on_completion(self, now: int, worker: int) -> None:
        k = self.local[worker]
        if k in self.retired:
            return
        if k in self.booked:  # its booked batch starts now (the engine does it)
            self.booked.discard(k)
            return
        self.ahead.discard(k)
        self.idle.add(k)
        self.free_at[k] = now
        self._dispatch(now)

    def on_start(self, now: int) -> None:
        if self.scale_us:
            self.act.set_timer(now + self.scale_us, ("scale", 0))

    def _autoscale(self, now: int) -> None:
        """Follow §4.4's advice for the epoch that just ended (``core.autoscale``)."""
        win = self.act.windows(self.scale_us, end_us=now)
        row = win.filter(win["end_us"] <= now).tail(1)
        live = [k for k in range(len(self.workers)) if k not in self.retired]
        delta = advise(len(live), float(row["bad_rate"][0]), float(row["idle_fraction"][0]), self.scale_cfg)
        if delta > 0:
            for _ in range(delta):
                w = self.act.add_worker(self.hw_name, now)
                k = len(self.workers)
                self.workers.append(w)
                self.local[w] = k
                self.free_at.append(now)
                self.gpu_timer.append(None)
                self.idle.add(k)
            self.counters["gpus_added"] = self.counters.get("gpus_added", 0) + delta
            self._dispatch(now)
        elif delta < 0:
            # idle GPUs first, then busy ones (their batch finishes); never one with a booked batch
            order = sorted(live, key=lambda k: (k not in self.idle, -self.free_at[k], k))
            gone = [k for k in order if k not in self.booked and k not in self.ahead][:-delta]
            for k in gone:
                self.act.remove_worker(self.workers[k], now)
                self.idle.discard(k)
                self.retired.add(k)
                if self.gpu_timer[k] is not None:
                    self.act.cancel_timer(self.gpu_timer[k])
                    self.gpu_timer[k] = None
            self.counters["gpus_removed"] = self.counters.get("gpus_removed", 0) + len(gone)

    def on_timer(self, now: int, payload: Any) -> None:
        kind, x = payload[0], payload[1]
        if kind == "scale":
            self._autoscale(now)
            if self.q_pending() or now < self.last_arrival:
                self.act.set_timer(now + self.scale_us, ("scale", x + 1))
            return
        if kind == "model":
            if payload[2] in self.cancelled:
                self.counters["stale_timer_fired"] += 1
            self.model_timer[x] = None
            if self.idle:
                self._dispatch(now)
        else:
            self.gpu_timer[x] = None
            if x not in self.idle and x not in self.booked and x not in self.retired:
                self.ahead.add(x)
                self._dispatch(now)

    def q_pending(self) -> bool:
        return any(self.q.length(m) for m in range(len(self.act.models)))

    def stats(self) -> dict[str, Any]:
        return dict(self.counters)


@register("symphony-wc", SymphonyConfig)
class SymphonyWC(Symphony):
    """Symphony, work-conserving: a candidate is schedulable as soon as it is formed (§4.3)."""

    work_conserving = True
