"""Capacity: the highest offered load at which a target still holds.

One mechanism for every paper's "how much can it serve" number:

* PPipe §7.2 — *max load factor*: the highest load at which SLO attainment is
  ≥ 99 % (per DNN, on a downward grid of load factors: :func:`scan_down`);
* Symphony §2.1 — *goodput*: the highest aggregate request rate at which every
  model's p99 latency is ≤ its SLO (``Target("p99-slo")``);
* goodput ≥ Y % of offered (``Target("goodput", Y)``).

A target is judged on a per-request table (columns ``model``, ``arrival_us``,
``deadline_us``, ``finish_us`` — null or negative when never served — and
``outcome``), so it is independent of the policy and the engine. Searches are
generic over an ``evaluate(load) -> requests table`` function; the caller owns
simulation. The search assumes the target is monotone in load (holds below the
capacity, fails above); :func:`bisect` brackets the capacity by doubling or
halving from a start load, then bisects until the bracket is within a relative
tolerance. Seeds are searched independently and the spread of their capacities
is the uncertainty (:func:`capacity_over_seeds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import polars as pl

from shepherd.core.errors import UserError

METRICS = ("attainment", "p99-slo", "goodput")


@dataclass(frozen=True)
class Target:
    """What must hold at a load.

    * ``attainment`` X — every model's SLO attainment (good / offered) ≥ X;
      with ``per_model=False`` the aggregate attainment ≥ X.
    * ``p99-slo`` — every model's p99 latency ≤ its SLO, where a dropped or
      unserved request counts as infinitely late (Symphony §2.1: goodput is the
      rate whose p99 latency meets the SLO; a dropped request never meets it).
      ``threshold`` is the percentile, 0.99 by default.
    * ``goodput`` Y — good requests ≥ Y × offered, aggregated over models.
    """

    metric: str
    threshold: float = 0.99
    per_model: bool = True

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise UserError(f"unknown capacity target '{self.metric}' (known: {', '.join(METRICS)})")
        if not 0 < self.threshold <= 1:
            raise UserError(f"capacity target {self.metric} needs a threshold in (0, 1], got {self.threshold:g}")

    @classmethod
    def parse(cls, text: str) -> "Target":
        """``attainment=0.99`` | ``p99-slo`` | ``p99-slo=0.95`` | ``goodput=0.95``."""
        name, _, value = text.partition("=")
        name = name.strip()
        if not value.strip():
            return cls(name) if name == "p99-slo" else cls._needs_value(name)
        try:
            threshold = float(value)
        except ValueError:
            raise UserError(f"capacity target '{text}': '{value}' is not a number") from None
        return cls(name, threshold)

    @staticmethod
    def _needs_value(name: str) -> "Target":
        if name not in METRICS:
            raise UserError(f"unknown capacity target '{name}' (known: {', '.join(METRICS)})")
        raise UserError(f"capacity target '{name}' needs a value, e.g. {name}=0.99")

    def per_model_values(self, requests: pl.DataFrame) -> dict[str, float]:
        """The target's metric per model: attainment, p99 latency / SLO, or good / offered."""
        served = pl.col("finish_us").is_not_null() & (pl.col("finish_us") >= 0)
        if self.metric == "p99-slo":
            slack = (pl.when(served).then(pl.col("finish_us") - pl.col("arrival_us")).otherwise(None)
                     / (pl.col("deadline_us") - pl.col("arrival_us")))
            frame = requests.group_by("model").agg(
                slack.fill_null(math.inf).quantile(self.threshold, interpolation="nearest").alias("v"))
        else:
            frame = requests.group_by("model").agg((pl.col("outcome") == "served").mean().alias("v"))
        return dict(zip(frame["model"].to_list(), frame["v"].to_list()))

    def holds_per_model(self, requests: pl.DataFrame) -> dict[str, bool]:
        values = self.per_model_values(requests)
        if self.metric == "p99-slo":
            return {m: v <= 1.0 for m, v in values.items()}
        return {m: v >= self.threshold for m, v in values.items()}

    def holds(self, requests: pl.DataFrame) -> bool:
        if requests.height == 0:
            return True
        if self.metric == "goodput" or (self.metric == "attainment" and not self.per_model):
            return float((requests["outcome"] == "served").mean()) >= self.threshold
        return all(self.holds_per_model(requests).values())

    def describe(self) -> str:
        if self.metric == "p99-slo":
            return f"every model's p{100 * self.threshold:g} latency ≤ its SLO"
        if self.metric == "goodput":
            return f"goodput ≥ {100 * self.threshold:g} % of offered"
        scope = "every model's" if self.per_model else "aggregate"
        return f"{scope} SLO attainment ≥ {100 * self.threshold:g} %"


@dataclass
class Bracket:
    """The capacity lies in ``[lo, hi)``: the target held at ``lo`` and failed at ``hi``."""

    lo: float
    hi: float
    evaluations: list[tuple[float, bool]] = field(default_factory=list)

    @property
    def estimate(self) -> float:
        """The highest load seen to hold (the conservative end of the bracket)."""
        return self.lo


def bisect(holds_at: Callable[[float], bool], start: float = 1.0, rel_tol: float = 0.01,
           min_load: float = 1e-3, max_load: float = 1e4, max_evaluations: int = 60,
           unreachable_ok: bool = False) -> Bracket:
    """Bracket the highest load at which ``holds_at`` is true, to ``rel_tol``.

    From ``start``, doubles while the target holds (or halves while it fails)
    to find a bracket, then bisects geometrically. A target that fails even at
    ``min_load`` is a :class:`UserError` (unreachable) — or, with
    ``unreachable_ok``, the bracket ``[0, lowest load tried)``; one that still
    holds at ``max_load`` returns ``[max_load, inf)``.
    """
    if not (start > 0 and math.isfinite(start)):
        raise UserError(f"capacity search needs a positive start load, got {start}")
    seen: list[tuple[float, bool]] = []

    def probe(load: float) -> bool:
        ok = bool(holds_at(load))
        seen.append((load, ok))
        return ok

    load = start
    if probe(load):
        lo = load
        while True:
            if lo >= max_load:
                return Bracket(lo, math.inf, seen)
            nxt = min(lo * 2.0, max_load)
            if not probe(nxt):
                hi = nxt
                break
            lo = nxt
    else:
        hi = load
        while True:
            nxt = hi / 2.0
            if nxt < min_load:
                if unreachable_ok:
                    return Bracket(0.0, hi, seen)
                raise UserError(f"the capacity target is not met even at load {hi:g} "
                                f"(searched down to {min_load:g}): unreachable on this setup")
            if probe(nxt):
                lo = nxt
                break
            hi = nxt
    while hi / lo - 1.0 > rel_tol and len(seen) < max_evaluations:
        mid = math.sqrt(lo * hi)
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return Bracket(lo, hi, seen)


def scan_down(grid: Sequence[float], holds_at: Callable[[float], Mapping[str, bool]],
              keys: Sequence[str], stop_when_found: bool = True) -> dict[str, float]:
    """Per key, the first load of a descending ``grid`` at which the target holds (0.0 if none).

    PPipe §7.2's max load factor: a downward sweep of load factors (1.0, 0.95,
    …), each simulating the whole group at once; a DNN's max load factor is the
    highest factor at which its attainment is ≥ 99 %. The scan stops once every
    key is found, unless ``stop_when_found`` is false.
    """
    found: dict[str, float] = {}
    for load in grid:
        for key, ok in holds_at(load).items():
            if ok and key not in found:
                found[key] = load
        if stop_when_found and all(k in found for k in keys):
            break
    return {k: found.get(k, 0.0) for k in keys}


@dataclass
class Capacity:
    """Capacities found per seed, with the bracket of each."""

    target: Target
    brackets: dict[int, Bracket]
    #: per seed, the whole search (:class:`shepherd.core.capacity_search.Search`) when it was kept
    searches: dict = field(default_factory=dict)

    @property
    def per_seed(self) -> dict[int, float]:
        return {seed: b.estimate for seed, b in self.brackets.items()}

    @property
    def mean(self) -> float:
        values = list(self.per_seed.values())
        return sum(values) / len(values)

    @property
    def half_width(self) -> float:
        """95 % t half-width of the mean over seeds (0 with one seed)."""
        from shepherd.core.confidence import half_width

        return half_width(list(self.per_seed.values()))


def capacity_over_seeds(evaluate: Callable[[float, int], pl.DataFrame], target: Target, seeds: Sequence[int],
                        start: float = 1.0, rel_tol: float = 0.01, **limits: float) -> Capacity:
    """Search each seed's capacity independently: ``evaluate(load, seed)`` → per-request table."""
    if not seeds:
        raise UserError("capacity search needs at least one seed")
    brackets = {seed: bisect(lambda load, s=seed: target.holds(evaluate(load, s)), start, rel_tol, **limits)
                for seed in seeds}
    return Capacity(target, brackets)
