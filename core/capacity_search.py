"""One capacity search, kept whole: every load tried, which model binds, and whether load was monotone.

:func:`shepherd.core.capacity.bisect` finds the highest load at which a target
holds *assuming* the target holds below the capacity and fails above it.
:func:`search` runs it and keeps, for every load it simulated, the target's
value and the SLO attainment per model (:class:`Probe`), so that a result can
say

* which model **binds** — the one that fails first as the load rises past the
  capacity (the worst model at the first failing load; at the capacity itself
  when the search stopped at ``max_load``), with its attainment and target
  value at the capacity (Symphony §2.1's "every model's p99 ≤ SLO" and PPipe
  §7.2's per-DNN ≥ 99 % are both decided by one model; a study should name it);
* whether the assumption held — after the bisection, ``probes`` more loads
  below the capacity (spread geometrically down to a quarter of it) are
  simulated, and any load at which the target failed below one at which it
  held is reported (:attr:`Search.violation`), so a non-monotone system is
  flagged instead of silently mis-bracketed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import polars as pl

from shepherd.core.capacity import Bracket, Target, bisect


@dataclass(frozen=True)
class Probe:
    """The target judged at one load: whether it held, its value and the attainment per model."""

    load: float
    holds: bool
    values: dict[str, float]
    attainment: dict[str, float]


def judge(target: Target, requests: pl.DataFrame, load: float) -> Probe:
    """:class:`Probe` of one simulation's per-request table (columns as :class:`Target` reads them)."""
    attainment = Target("attainment").per_model_values(requests) if requests.height else {}
    values = attainment if target.metric != "p99-slo" else (target.per_model_values(requests)
                                                            if requests.height else {})
    return Probe(load, target.holds(requests), values, attainment)


def _worst(target: Target, probe: Probe) -> str | None:
    """The model furthest from meeting the target at ``probe`` (highest p99/SLO, else lowest attainment)."""
    if not probe.values:
        return None
    if target.metric == "p99-slo":
        return max(sorted(probe.values), key=lambda m: probe.values[m])
    return min(sorted(probe.values), key=lambda m: probe.values[m])


@dataclass
class Search:
    """A capacity search's result: the bracket, every probe in order, the binding model, monotonicity."""

    target: Target
    bracket: Bracket
    probes: list[Probe] = field(default_factory=list)

    @property
    def capacity(self) -> float:
        """The highest load at which the target was seen to hold (0 when it never held)."""
        return self.bracket.lo

    def at(self, load: float) -> Probe | None:
        return next((p for p in self.probes if p.load == load), None)

    @property
    def binding_model(self) -> str | None:
        """The model that fails first above the capacity (the worst at the first failing load)."""
        above = self.at(self.bracket.hi) if math.isfinite(self.bracket.hi) else None
        return _worst(self.target, above or self.at(self.bracket.lo) or Probe(0, True, {}, {}))

    def binding(self) -> dict:
        """Binding model, its target value and attainment at the capacity (and at the first failing load)."""
        model = self.binding_model
        at_cap = self.at(self.bracket.lo)
        above = self.at(self.bracket.hi) if math.isfinite(self.bracket.hi) else None

        def get(probe: Probe | None, what: str) -> float | None:
            return None if probe is None or model is None else getattr(probe, what).get(model)

        return {"binding_model": model, "binding_attainment": get(at_cap, "attainment"),
                "binding_value": get(at_cap, "values"), "binding_attainment_above": get(above, "attainment")}

    @property
    def violation(self) -> tuple[float, float] | None:
        """(a load where the target failed, a higher load where it held), or None when monotone.

        The pair reported is the lowest failing load below the highest load that held."""
        held = [p.load for p in self.probes if p.holds]
        if not held:
            return None
        top = max(held)
        below = sorted(p.load for p in self.probes if not p.holds and p.load < top)
        return (below[0], top) if below else None

    @property
    def monotone(self) -> bool:
        return self.violation is None

    def warning(self) -> str | None:
        """One line when the target was not monotone in load (None otherwise)."""
        if self.violation is None:
            return None
        fail, held = self.violation
        return (f"{self.target.describe()} is not monotone in load: it failed at load {fail:.4g} but held at "
                f"{held:.4g}; the bisection assumes it holds below the capacity, so {self.capacity:.4g} is an "
                f"upper bracket, and loads from {fail:.4g} up may miss the target")


def probe_loads(capacity: float, count: int, min_load: float) -> list[float]:
    """``count`` loads below ``capacity``, geometric down to a quarter of it (none below ``min_load``)."""
    if capacity <= 0 or count <= 0:
        return []
    loads = [capacity * 4.0 ** (-k / count) for k in range(1, count + 1)]
    return [x for x in loads if x >= min_load]


def search(evaluate: Callable[[float], pl.DataFrame], target: Target, start: float = 1.0, rel_tol: float = 0.01,
           min_load: float = 1e-3, max_load: float = 1e4, probes: int = 3) -> Search:
    """Bisect the capacity of ``evaluate(load) -> per-request table`` and check monotonicity below it.

    A target unmet even at ``min_load`` gives capacity 0 (an unreachable point of a grid is a result,
    not an error)."""
    seen: list[Probe] = []

    def holds_at(load: float) -> bool:
        found = next((p for p in seen if p.load == load), None)
        if found is None:
            found = judge(target, evaluate(load), load)
            seen.append(found)
        return found.holds

    bracket = bisect(holds_at, start, rel_tol, min_load=min_load, max_load=max_load, unreachable_ok=True)
    for load in probe_loads(bracket.lo, probes, min_load):
        if all(abs(p.load / load - 1.0) > 1e-9 for p in seen):
            holds_at(load)
    return Search(target, bracket, seen)
