"""Ideal batching of one model on N GPUs: uncoordinated vs staggered execution (Symphony §4.2, Table 4).

With ℓ(b) = α·b + β and requests arriving uniformly:

* **uncoordinated** (Nexus-like frontends, Fig. 3a): a request can wait a
  whole batch before its own runs, so 2·ℓ(b) ≤ SLO (Eq. 1):
  b = ⌊(SLO/2 − β)/α⌋;
* **staggered** (a centralized scheduler, Fig. 3b): the N GPUs are offset by
  ℓ(b)/N, the worst wait is ℓ(b)/N, so (1 + 1/N)·ℓ(b) ≤ SLO (Eq. 2):
  b = ⌊(SLO/(1 + 1/N) − β)/α⌋;
* throughput of N GPUs at batch b: N·b/ℓ(b) (Eq. 3's left side);
* GPUs needed for a rate λ: the smallest N with N·b_N/ℓ(b_N) ≥ λ, b_N the
  staggered batch of N GPUs (Eqs. 2–3 together).

Times in ms, rates in requests/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shepherd.core.errors import UserError


@dataclass(frozen=True)
class Linear:
    """ℓ(b) = α·b + β in ms."""

    alpha_ms: float
    beta_ms: float

    def latency(self, b: int) -> float:
        return self.alpha_ms * b + self.beta_ms

    def check_slo(self, slo_ms: float) -> None:
        """An SLO below ℓ(1) = α + β admits no batch at all (a user error)."""
        if not slo_ms >= self.alpha_ms + self.beta_ms:
            raise UserError(f"SLO {slo_ms:g} ms is below ℓ(1) = α + β = {self.alpha_ms + self.beta_ms:g} ms: "
                            "no batch can meet it")


def _floor_batch(budget_ms: float, lin: Linear) -> int:
    # a tiny epsilon so that exact quotients (e.g. 7.0000000001 from rounding) stay exact
    return max(0, math.floor((budget_ms - lin.beta_ms) / lin.alpha_ms + 1e-9))


def uncoordinated_batch(lin: Linear, slo_ms: float) -> int:
    """⌊(SLO/2 − β)/α⌋ (Eq. 1)."""
    return _floor_batch(slo_ms / 2.0, lin)


def staggered_batch(lin: Linear, slo_ms: float, gpus: int) -> int:
    """⌊(SLO/(1 + 1/N) − β)/α⌋ (Eq. 2)."""
    if gpus < 1:
        raise UserError(f"the number of GPUs must be ≥ 1, got {gpus}")
    return _floor_batch(slo_ms / (1.0 + 1.0 / gpus), lin)


def throughput_rps(lin: Linear, batch: int, gpus: int) -> float:
    """N·b/ℓ(b) in requests/s (0 for b = 0)."""
    if batch <= 0:
        return 0.0
    return gpus * batch / lin.latency(batch) * 1000.0


def gpus_needed(lin: Linear, slo_ms: float, rate_rps: float, limit: int = 1_000_000) -> int:
    """Smallest N with N·b_N/ℓ(b_N) ≥ λ, b_N the staggered batch of N GPUs (Eqs. 2–3)."""
    lin.check_slo(slo_ms)
    if rate_rps <= 0:
        return 0
    n = 1
    while n <= limit:
        if throughput_rps(lin, staggered_batch(lin, slo_ms, n), n) >= rate_rps:
            return n
        n += 1
    raise UserError(f"rate {rate_rps:g} r/s needs more than {limit} GPUs")


@dataclass(frozen=True)
class Ideal:
    """One Table 4 row's analytic columns."""

    uncoordinated_batch: int
    uncoordinated_rps: float
    staggered_batch: int
    staggered_rps: float


def ideal(lin: Linear, slo_ms: float, gpus: int) -> Ideal:
    lin.check_slo(slo_ms)
    bu, bs = uncoordinated_batch(lin, slo_ms), staggered_batch(lin, slo_ms, gpus)
    return Ideal(bu, throughput_rps(lin, bu, gpus), bs, throughput_rps(lin, bs, gpus))
