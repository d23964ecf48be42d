"""Symphony's schedulability rules, by name (Symphony §4.3, Appendix C; the authors' released scheduler).

When may a candidate that can still grow (not at the max batch, every queued request in it) go to an idle
GPU before its ``sched_at``? Each rule answers, and every rule also takes it at ``sched_at``:

* ``text`` — §4.3 as stated: once it holds ≥ β·λ requests, β the profile's fixed cost and λ the model's
  rate over ``rate_window_ms`` (the default rule).
* ``frontrun`` (alias ``sched_at``) — never early: Appendix C as printed (its second ``exec_at =
  max(earliest, frontrun_at)`` overrides the β·λ line) and the **default of the authors' code**:
  ``SchedulableCondition`` defaults to ``kFrontrun`` in ``abcdabcd987/nexuslb``
  (``src/nexus/dispatcher/rankmt/``, read at ``dbb9043``), where every candidate executes at its frontrun
  time ``dl − ℓ(b+1)``.
* ``target-batch`` — the authors' ``kTargetBatchSize`` (their 2022-03 rule ``bs ≥ target ? earliest :
  frontrun``): once it holds the target batch of Eqs. 2–3 (§4.2), as their ``BatchSizeEstimator`` solves
  them (:func:`target_batch`) from the bucketed rate (:class:`BucketMeter`).
* ``beta-lambda-authors`` — the authors' ``kBetaLambda`` (two side branches, 2023-04 and 2024-01): once
  ``b ≥ β·λ`` with β the intercept of the secant of ℓ between the current batch b and the target batch
  (:func:`secant_beta_s`; b + 1 when b is the target) and λ the bucketed mean rate.

Choices where the authors' code and our engine differ, written down: the rate meter's buckets are aligned
at simulated time 0 (theirs at the dispatcher's start); the estimator's batch search stops at the max batch
(theirs has no bound); their 100 µs timer jitter and response latency are not modelled (the engine's
``d_ctrl_us``/``d_data_us`` are the only delays: the budget is SLO − ``d_ctrl``, less ``d_data`` per request).
"""

from __future__ import annotations

from typing import Sequence

from shepherd.core.rules import symphony as numbers

#: the rules, default first; a second name is accepted for one of them
RULES = ("text", "frontrun", "target-batch", "beta-lambda-authors")
ALIASES = {"sched_at": "frontrun"}
#: the authors' ``BatchSizeEstimator(1.0, 0.0)`` (``bse_(1.0, 0.0)`` in every ModelThread / scheduler of
#: abcdabcd987/nexuslb): the rate the batch is sized for is the bucketed mean, no std added
XRPS, XSTD = 1.0, 0.0
#: the authors' ``RpsMeter``: 100 buckets of 50 ms (λ over 5 s)
METER_SPAN_US, METER_BUCKETS = 50_000, 100


def canonical(rule: str) -> str:
    """The rule's one name (``sched_at`` → ``frontrun``); unknown names pass through for validation."""
    return ALIASES.get(rule, rule)


class BucketMeter:
    """The authors' ``RpsMeter``: arrivals counted in ``buckets`` buckets of ``span_us`` (100 × 50 ms = 5 s),
    the current, partial bucket included; :meth:`get` gives the mean and the sample standard deviation of the
    buckets' rates (req/s) over the buckets since time 0, at most ``buckets`` of them. A ring of buckets kept by
    :func:`shepherd.core.rules.symphony.meter_hit` / ``meter_get``, which Symphony's kernel compiles."""

    __slots__ = ("span", "size", "state", "bucket", "count")

    def __init__(self, span_us: int = METER_SPAN_US, buckets: int = METER_BUCKETS) -> None:
        self.span, self.size = span_us, buckets
        self.state = [0, 0, 0, 0]  #: head, non-empty buckets, their total count and sum of squared counts
        self.bucket, self.count = [0] * buckets, [0] * buckets

    def hit(self, now: int) -> None:
        numbers.meter_hit(self.state, self.bucket, self.count, now, self.span)

    def get(self, now: int) -> tuple[float, float]:
        return numbers.meter_get(self.state, self.bucket, self.count, now, self.span)


def target_batch(lat: Sequence[float], budget_us: float, d_data_us: float, rate: float, std: float,
                 max_batch: int) -> int:
    """The target batch of Eqs. 2–3 as the authors' ``BatchSizeEstimator(XRPS, XSTD)`` solves them (§4.2;
    :func:`shepherd.core.rules.symphony.target_batch`, which Symphony's kernel compiles)."""
    return numbers.target_batch(lat, budget_us, d_data_us, rate, std, max_batch, XRPS, XSTD)


secant_beta_s = numbers.secant_beta_s


def early(rule: str, b: int, lam_window: float, beta_s: float, meter: BucketMeter | None, lat: Sequence[float],
          budget_us: float, d_data_us: float, max_batch: int, now: int) -> bool:
    """Whether a candidate of ``b`` requests is schedulable before its ``sched_at`` under ``rule``
    (module docstring; :func:`shepherd.core.rules.symphony.early`, which Symphony's kernel compiles).
    ``lam_window`` is §4.3's λ (the ``text`` rule), ``beta_s`` the profile's β."""
    avg, std = meter.get(now) if meter is not None and rule in RULES[2:] else (0.0, 0.0)
    return numbers.early(RULES.index(rule), b, beta_s, lam_window, avg, std, lat, budget_us, d_data_us, max_batch,
                         XRPS, XSTD)
