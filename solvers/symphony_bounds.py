"""Valid lower bounds on ΔR and ΔS of Symphony's partitioning MILP — Appendix A.1, Eqs. (4), (7), (8).

The LP relaxation of Eqs. (4)–(10) has the value 0 whatever the instance:
x_ij = 1/l puts exactly R̄ and S̄ on every sub-cluster, so ΔR = ΔS = 0 meets
(7)–(8), and the solver's bound starts at 0 (on 800 × 20 HiGHS spends its 10 s
at the root, so it stays there). The bounds below hold for *every* integer
assignment (Eqs. 9–10), whatever the caps (5), (6), (11), so adding them as
lower bounds on the auxiliary variables ΔR, ΔS removes no integer solution and
leaves the optimum of Eq. (4) unchanged; the solver's bound can only rise.

For per-model values v_i (r_i or s_i), l parts and the average V̄ = Σ v_i / l,
``deviation_floor`` bounds D = max_j |V_j − V̄| from below by the largest of:

* **pigeonhole, high side**: of the t largest values, some part holds at least
  q = ⌈t/l⌉, so max_j V_j ≥ the sum of the q smallest among them, for every t
  (t = 1: the largest model alone; t = m: the ⌈m/l⌉ smallest models);
* **pigeonhole, low side**: some part holds at most ⌊m/l⌋ models, so
  min_j V_j ≤ the sum of the ⌊m/l⌋ largest values (0 when m < l);
* **integrality**: when every v_i is an integer (static memory in MB in
  Symphony's Table 1), every V_j is a multiple of g = gcd(v_i). Unless l·g
  divides Σ v_i the parts cannot all equal V̄: some part is above V̄, hence at
  least g·⌈V̄/g⌉, and some below, at most g·⌊V̄/g⌋. Computed in exact
  rational arithmetic (a float V̄ near a multiple of g would give a bound of
  almost g instead of almost 0).

On A.2's 800 × 20 instances the pigeonhole terms are 0 (the largest model's
rate is far below R̄) and the integrality term of ΔS is at most half a
megabyte, so the floor of Eq. (4) is tiny: it confirms, rather than cures,
that the optimum of Eq. (4) there is itself near 0. Fig. 15 therefore reports
the absolute gap (objective − bound) beside the relative one.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

EXACT_INT = 2.0**53  # integers above this are not exactly representable as floats


def _integer_values(values: np.ndarray) -> list[int] | None:
    """The values as Python ints when every one is an exact integer; None otherwise."""
    if not (np.abs(values) < EXACT_INT).all() or not (values == np.round(values)).all():
        return None
    return [int(v) for v in values]


def integrality_floor(values: np.ndarray, parts: int) -> float:
    """Lower bound on max_j |V_j − V̄| from the V_j being multiples of gcd(v_i) (0 for non-integer values)."""
    ints = _integer_values(np.asarray(values, dtype=float))
    if ints is None:
        return 0.0
    g = math.gcd(*ints)
    if g == 0:
        return 0.0
    q = Fraction(sum(ints), parts * g)  # V̄ / g
    if q.denominator == 1:
        return 0.0
    return float(g * max(math.ceil(q) - q, q - math.floor(q)))


def pigeonhole_floor(values: np.ndarray, parts: int) -> float:
    """Lower bound on max_j |V_j − V̄| from how many models some part must (or may only) hold."""
    v = np.sort(np.asarray(values, dtype=float))[::-1]
    m = len(v)
    if m == 0:
        return 0.0
    mean = float(v.sum()) / parts
    prefix = np.concatenate(([0.0], np.cumsum(v)))
    t = np.arange(1, m + 1)
    q = -(-t // parts)  # ⌈t/l⌉
    high = float((prefix[t] - prefix[t - q]).max()) - mean
    low = mean - float(prefix[m // parts])
    return max(high, low, 0.0)


def deviation_floor(values: np.ndarray, parts: int) -> float:
    """max_j |Σ_i v_i x_ij − V̄| ≥ this for every assignment x (module docstring)."""
    return max(pigeonhole_floor(values, parts), integrality_floor(values, parts))


def objective_floor(rate: np.ndarray, static_mb: np.ndarray, parts: int, w: float) -> tuple[float, float, float]:
    """(ΔR floor, ΔS floor, Eq. (4) floor = ΔR floor + w·ΔS floor)."""
    dr, ds = deviation_floor(rate, parts), deviation_floor(static_mb, parts)
    return dr, ds, dr + w * ds
