"""Symphony's rules as numbers (Symphony §4.2 Eqs. 2–3, §4.3; the authors' ``BatchSizeEstimator``, ``RpsMeter``
and ``kBetaLambda``): what :mod:`shepherd.core.policies.symphony_rules` calls and Symphony's kernel compiles."""

from __future__ import annotations

import math


def target_batch(lat, budget_us: float, d_data_us: float, rate: float, std: float, max_batch: int,
                 xrps: float, xstd: float) -> int:
    """The target batch of Eqs. 2–3 as the authors' ``BatchSizeEstimator(xrps, xstd)`` solves them (§4.2).

    ``lat[b]`` is ℓ(b) in µs. With r = xrps·rate + xstd·std (req/s): the largest b before the first b whose
    ``ℓ(b)·(1 + 1/max(1, n)) > budget − d_data·b`` with ``n = r·ℓ(b)/b`` GPUs (Eqs. 2 and 3); when that n is
    ≤ 1 (less than a GPU's worth of load), the largest b with ``ℓ(b) + b/r ≤ budget`` instead (Nexus's
    rule for a model below one GPU). At least 1, at most ``max_batch``.
    """
    r = xrps * rate + xstd * std
    if r <= 0:
        return 1
    b, n = max_batch, 0.0
    for bs in range(1, max_batch + 1):
        sec = lat[bs] / 1e6
        n = r * sec / bs
        if sec * (1 + 1 / max(1.0, n)) > (budget_us - d_data_us * bs) / 1e6:
            b = max(1, bs - 1)
            break
    if n > 1:
        return b
    for bs in range(2, max_batch + 1):
        if lat[bs] / 1e6 + bs / r + d_data_us * bs / 1e6 > budget_us / 1e6:
            return bs - 1
    return max_batch


def secant_beta_s(lat, b: int, target: int) -> float:
    """β of the authors' ``kBetaLambda``: the intercept (s) of the line through (b, ℓ(b)) and (x, ℓ(x)),
    x the target batch, or b + 1 when b is the target."""
    x = target if b != target else b + 1
    alpha = (lat[x] - lat[b]) / (x - b)
    return (lat[x] - alpha * x) / 1e6


def meter_rates(total: int, sumsq: int, k: int, span_us: int) -> tuple[float, float]:
    """The authors' ``RpsMeter::Get``: over ``k`` buckets of ``span_us`` holding ``total`` arrivals (their
    counts' squares summing to ``sumsq``), the mean and the sample standard deviation of the buckets' rates
    (req/s)."""
    avg = total / k
    var = (sumsq - k * avg * avg) / (k - 1) if k > 1 else 0.0
    per_s = 1e6 / span_us
    return avg * per_s, math.sqrt(max(0.0, var)) * per_s


def window_rate(n: int, window_us: int, since_first_us: int) -> float:
    """§4.3's λ (req/s): the ``n`` arrivals of the last ``window_us`` over min(window, the time since the model's
    first arrival); 0 before any (``since_first_us`` 0)."""
    span = min(window_us, since_first_us)
    return n * 1e6 / span if span > 0 else 0.0
