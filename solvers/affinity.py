"""Model affinity, affinity sets, and Flex's competitive ratio — Shepherd §5.2, §4, Appendix B.

* :func:`affinity` is A(m_i, m_j) of §5.2 ("Extending FLEX to multiple models");
  :func:`affinity_k` is K of Eq. 4, the largest A over all *ordered* pairs of a
  set (A is asymmetric, and A(m, m) = 1, so K ≥ 1).
* :func:`affinity_sets` pre-computes the partition HERD's constraint (e) uses
  (§4): every set has pairwise A ≤ K̄ in both directions. The paper does not
  say how the partition is built; we use a deterministic greedy (models sorted
  by α, then β, then name; each joins the first set it is compatible with,
  else opens a new one). K̄ = ∞ gives one set (the paper's §7 setup).
* :func:`competitive_ratio` evaluates Eq. 25 (single GPU, single model) and
  Eq. 47 (multi-GPU, multi-model) for given x1, x2, x3, λ, and
  :func:`optimal_ratio` solves the optimisation of Eq. 26 numerically.

Reproduction note (measured, see tests/test_affinity.py): solving Eq. 47 as
printed gives c ≈ 12.67 at λ ≈ 2.80 (the objective is flat: c(3.03) ≈ 12.71),
and Eq. 25 gives c ≈ 10.87 at λ ≈ 2.30; the paper reports 12.62 at λ ≈ 3.03
and 10.81 at λ ≈ 2.38. Ratios agree within 0.6 %; the λ at the optimum is
poorly determined because the ratio is flat in λ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np


def affinity(alpha_i: float, beta_i: float, alpha_j: float, beta_j: float) -> float:
    """A(m_i, m_j) — Shepherd §5.2 (the formula above Eq. 4)."""
    first = (alpha_i + beta_i) / alpha_j
    denom = alpha_j + beta_j - beta_i
    if denom <= 0:
        return first
    return min(first, max(alpha_i / denom, alpha_i / alpha_j))


def affinity_k(params: Sequence[tuple[float, float]]) -> float:
    """K = max over ordered pairs of A(m_i, m_j) — Shepherd Eq. 4 (1.0 for one model)."""
    k = 1.0
    for i, (ai, bi) in enumerate(params):
        for j, (aj, bj) in enumerate(params):
            if i != j:
                k = max(k, affinity(ai, bi, aj, bj))
    return k


def affinity_sets(params: Mapping[str, tuple[float, float]], k_bar: float = math.inf) -> list[list[str]]:
    """Partition models into sets whose pairwise affinity (both orders) is ≤ K̄ — Shepherd §4 (e)."""
    if k_bar < 1:
        raise ValueError("K̄ must be ≥ 1 (A(m, m) = 1)")
    order = sorted(params, key=lambda m: (params[m][0], params[m][1], m))
    sets: list[list[str]] = []
    for model in order:
        a, b = params[model]
        for members in sets:
            if all(
                affinity(a, b, *params[o]) <= k_bar and affinity(*params[o], a, b) <= k_bar
                for o in members
            ):
                members.append(model)
                break
        else:
            sets.append([model])
    return sets


# --------------------------------------------------------------------------- competitive ratio

def _worst_p(f_slope: float, f_cap: float, g_scale: float) -> float:
    """min over p ∈ [0, 1] of max(min(p·f_slope, f_cap), (1 − p)·g_scale).

    The first term increases in p, the second decreases, so the minimum of the
    maximum sits where they cross.
    """
    if f_slope <= 0 or g_scale <= 0:
        return 0.0
    cross = f_slope * g_scale / (f_slope + g_scale)  # p·s = (1 − p)·g
    return min(cross, f_cap)  # past the cap, (1 − p)·g meets the plateau f_cap


def competitive_ratio(x1: float, x2: float, x3: float, lam: float, k: float = 1.0, setting: str = "mgmm") -> float:
    """c for given assignment weights and preemption threshold λ.

    ``setting="sgsm"``: Eq. 25, 1 / min_p max((λ−1)/λ·min(p·x1/λ, x2), (1−p)·x3).
    ``setting="mgmm"``: Eq. 47, λ/(λ−1) / min_p max(min(p·x1/λ, p·x1/K, x2/K), (1−p)·x3).
    Returns ∞ where the weights are infeasible (x1 + x2 + x3 > 1, a weight ≤ 0, λ ≤ 1).
    """
    if min(x1, x2, x3) <= 0 or x1 + x2 + x3 > 1 + 1e-12 or lam <= 1 or k < 1:
        return math.inf
    shrink = (lam - 1) / lam
    if setting == "sgsm":
        # (1−p)·x3 crosses shrink·min(p·x1/λ, x2): scale the first term into the helper.
        value = _worst_p(shrink * x1 / lam, shrink * x2, x3)
        return math.inf if value <= 0 else 1.0 / value
    if setting == "mgmm":
        value = shrink * _worst_p(x1 / max(lam, k), x2 / k, x3)
        return math.inf if value <= 0 else 1.0 / value
    raise ValueError(f"unknown setting '{setting}' (sgsm | mgmm)")


@dataclass(frozen=True)
class RatioOptimum:
    ratio: float
    lam: float
    x1: float
    x2: float
    x3: float


def optimal_ratio(setting: str = "mgmm", k: float = 1.0) -> RatioOptimum:
    """Solve Eq. 26 (or its mgmm analogue) numerically: min over x1, x2, x3, λ of c.

    Reduction used (exact, not an approximation): write x1 = s·u, x3 = s·(1−u),
    x2 = 1 − s (more weight never hurts, so x1 + x2 + x3 = 1). The crossing
    value of the worst-case p is s·φ(u) with φ linear-fractional in u, and the
    cap is proportional to 1 − s; the best s equalises the two, leaving a
    value increasing in φ. So for each λ only max_u φ(u) is needed: a 1-D
    search, nested in a 1-D search over λ (grid, then golden-section).
    """
    if setting not in ("sgsm", "mgmm"):
        raise ValueError(f"unknown setting '{setting}' (sgsm | mgmm)")

    def best_at(lam: float) -> tuple[float, float, float, float]:
        shrink = (lam - 1) / lam
        slope_scale = shrink / lam if setting == "sgsm" else 1.0 / max(lam, k)
        u = _golden(lambda v: _phi(v, slope_scale), 1e-9, 1 - 1e-9, maximise=True)
        phi = _phi(u, slope_scale)
        cap_scale = shrink if setting == "sgsm" else 1.0 / k  # cap = cap_scale·(1 − s)
        s = cap_scale / (phi + cap_scale)
        x1, x3 = s * u, s * (1 - u)
        return competitive_ratio(x1, 1 - s, x3, lam, k, setting), x1, 1 - s, x3

    lams = np.linspace(1.01, 10.0, 900)
    vals = [best_at(float(lam))[0] for lam in lams]
    i = int(np.argmin(vals))
    lo, hi = float(lams[max(i - 1, 0)]), float(lams[min(i + 1, len(lams) - 1)])
    lam = _golden(lambda v: best_at(v)[0], lo, hi, maximise=False)
    c, x1, x2, x3 = best_at(lam)
    return RatioOptimum(float(c), float(lam), float(x1), float(x2), float(x3))


def _phi(u: float, slope_scale: float) -> float:
    """Crossing value per unit s: (a·u)(1−u)/(a·u + (1−u)) with a = slope_scale."""
    f = slope_scale * u
    g = 1.0 - u
    return f * g / (f + g) if f + g > 0 else 0.0


def _golden(fn, lo: float, hi: float, maximise: bool, iters: int = 100) -> float:
    """Golden-section search of a unimodal function on [lo, hi]."""
    ratio = (math.sqrt(5) - 1) / 2
    sign = -1.0 if maximise else 1.0
    a, b = lo, hi
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = sign * fn(c), sign * fn(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = sign * fn(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = sign * fn(d)
    return (a + b) / 2
