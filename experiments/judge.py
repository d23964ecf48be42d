"""The one judge of every REPORT row: holds, fails or inconclusive, from the per-seed values (issue 41).

A judged row states what the paper says as a :class:`Rule` — the region of
values of ours that agree with the paper's sentence, its tolerance written in
the row — and the judge compares that region with the 95 % t interval of the
mean over seeds (:mod:`shepherd.experiments.confidence`, clipped to the
row's domain):

* **holds** — the whole interval lies inside the region;
* **fails** — the whole interval lies outside it;
* **inconclusive** — the interval straddles an edge of the region, or a
  seed's value is not finite (∞ or NaN: a ratio over a zero, a run that
  produced no value), or there are no seeds at all.

One seed has no measurable spread: its interval is the point, and the row
says "(1 seed)". Rules:

* :meth:`Rule.near` — "≈ x": ``x ± tolerance`` in the row's unit;
* :meth:`Rule.effect` — a ratio claim ("23 % higher", "4.2× fewer") judged on
  the effect, ours − 1 against paper − 1 ± a share of the effect, so a
  relative band on the ratio cannot let +8 % pass for +23 %;
* :meth:`Rule.span` — a stated range ("2–2.4×"): the range is the region (it
  already is the paper's spread), or widened by a share of each end's effect;
* :meth:`Rule.at_most` / :meth:`Rule.at_least` — a bounded claim ("only 2 %",
  "at least …"), judged one-sided as the sentence states; :meth:`Rule.above` /
  :meth:`Rule.below` the strict forms ("a beats b": the per-seed a − b > 0).

Nothing here knows an experiment; experiments build rows, this module decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

HOLDS, FAILS, INCONCLUSIVE, NOT_JUDGED = "holds", "fails", "inconclusive", "not judged"
STATES = (HOLDS, FAILS, INCONCLUSIVE, NOT_JUDGED)
INF = float("inf")


def num(x: float, digits: int = 3) -> str:
    """A number for people: ``digits`` significant digits below 1,000, whole numbers with thousands
    separated from 1,000 up (1,138, never 1.14e+03 or 1138.4), ∞ spelled."""
    if x is None:
        return "—"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if 0 < abs(x) < 1e-300:  # a strict rule's edge just past 0 (Rule.above(0)): shown as the bound it is
        x = 0.0
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    out = f"{x:.{digits}g}"
    return f"{float(out):,.0f}" if "e+" in out else out


@dataclass(frozen=True)
class Rule:
    """The values of ours that agree with the paper's sentence: ``low ≤ ours ≤ high`` (either may be
    infinite for a one-sided claim), and how that region was set, in words (printed in the row)."""

    low: float
    high: float
    text: str

    @classmethod
    def near(cls, paper: float, tol: float, unit: str = "") -> "Rule":
        """≈ ``paper``: within ± ``tol`` in the row's unit."""
        return cls(paper - tol, paper + tol, f"± {num(tol)}{_u(unit)}")

    @classmethod
    def effect(cls, paper: float, share: float = 0.25) -> "Rule":
        """A ratio claim: ours − 1 within ± ``share`` of the paper's effect (paper − 1)."""
        e = paper - 1.0
        lo, hi = sorted((1 + e * (1 - share), 1 + e * (1 + share)))
        return cls(lo, hi, f"effect {_pct(e)} ± {share:.0%} of it → [{num(lo)}, {num(hi)}]")

    @classmethod
    def span(cls, low: float, high: float, share: float = 0.0) -> "Rule":
        """A stated range of a ratio ("2x to 2.4x"): the range itself is the paper's spread, so by default
        it is the region; ``share`` > 0 widens each end by that share of its effect."""
        lo, hi = 1 + (low - 1) * (1 - share), 1 + (high - 1) * (1 + share)
        if not share:
            return cls(lo, hi, f"the stated range [{num(low)}, {num(high)}]")
        return cls(lo, hi, f"range {num(low)}–{num(high)}, each end's effect ± {share:.0%} → "
                           f"[{num(lo)}, {num(hi)}]")

    @classmethod
    def at_most(cls, bound: float, tol: float = 0.0, unit: str = "") -> "Rule":
        """An upper-bounded claim ("only 2 %"): ours ≤ ``bound`` + ``tol``; any lower value agrees."""
        return cls(-INF, bound + tol, f"≤ {num(bound + tol)}{_u(unit)} (one-sided"
                                      + (f", {num(bound)} + {num(tol)})" if tol else ")"))

    @classmethod
    def at_least(cls, bound: float, tol: float = 0.0, unit: str = "") -> "Rule":
        """A lower-bounded claim ("at least …", "more than …"): ours ≥ ``bound`` − ``tol``."""
        return cls(bound - tol, INF, f"≥ {num(bound - tol)}{_u(unit)} (one-sided"
                                     + (f", {num(bound)} − {num(tol)})" if tol else ")"))


    @classmethod
    def above(cls, bound: float, unit: str = "") -> "Rule":
        """A strict lower bound ("a beats b": a − b > 0; "falls": each step > 0): ours > ``bound``."""
        return cls(math.nextafter(bound, INF), INF, f"> {num(bound)}{_u(unit)} (one-sided)")

    @classmethod
    def below(cls, bound: float, unit: str = "") -> "Rule":
        """A strict upper bound ("under 89 %", "less than 5 %"): ours < ``bound``."""
        return cls(-INF, math.nextafter(bound, -INF), f"< {num(bound)}{_u(unit)} (one-sided)")


def _u(unit: str) -> str:
    return f" {unit.strip()}" if unit and unit.strip() else ""


def _pct(effect: float) -> str:
    return f"{effect:+.0%}" if abs(effect) < 1 else f"{effect:+.2g}×"


@dataclass(frozen=True)
class Verdict:
    state: str
    #: why, in a few words (the interval against the region, or which seed is not finite)
    reason: str = ""


def interval(seeds: Sequence[float], bounds: tuple[float, float] = (-INF, INF)) -> tuple[float, float, float]:
    """(mean, low, high) of finite ``seeds``: the 95 % t interval clipped to ``bounds``."""
    from shepherd.experiments.confidence import clip_to, half_width

    vals = [float(v) for v in seeds]
    mean = sum(vals) / len(vals)
    hw = half_width(vals)
    return (mean, *clip_to(mean - hw, mean + hw, bounds))


def judge(rule: Rule | None, seeds: Sequence[float] | None = None, *, mean: float | None = None,
          half_width: float = 0.0, bounds: tuple[float, float] = (-INF, INF)) -> Verdict:
    """The verdict of one row: ``rule`` against the interval of ``seeds`` (or, for a row built from an
    aggregate with no per-seed values, ``mean`` ± ``half_width``)."""
    if rule is None:
        return Verdict(NOT_JUDGED)
    if seeds is not None:
        if len(seeds) == 0:
            return Verdict(INCONCLUSIVE, "no seed gave a value")
        bad = [i for i, v in enumerate(seeds) if v is None or not math.isfinite(float(v))]
        if bad:
            return Verdict(INCONCLUSIVE, f"seed{'s' if len(bad) > 1 else ''} "
                                         f"{', '.join(str(i) for i in bad)} not finite")
        _, lo, hi = interval(seeds, bounds)
    else:
        if mean is None or not math.isfinite(mean) or not math.isfinite(half_width):
            return Verdict(INCONCLUSIVE, "no finite value")
        from shepherd.experiments.confidence import clip_to
        lo, hi = clip_to(mean - half_width, mean + half_width, bounds)
    where = f"[{num(lo)}, {num(hi)}]" if lo != hi else num(lo)
    if rule.low <= lo and hi <= rule.high:
        return Verdict(HOLDS)
    if hi < rule.low or lo > rule.high:
        return Verdict(FAILS, f"{where} {'below' if hi < rule.low else 'above'} [{num(rule.low)}, {num(rule.high)}]")
    edge = rule.low if lo < rule.low else rule.high
    return Verdict(INCONCLUSIVE, f"{where} straddles {num(edge)}")


def judge_claim(text: str, rule: Rule, seeds: Sequence[float], detail: str = "",
                bounds: tuple[float, float] = (-INF, INF)):
    """A qualitative claim ("a beats b", "within 15 %") decided by the judge from the per-seed values of
    the quantity it bounds; the detail gets the per-seed values and the verdict's reason."""
    from shepherd.experiments.base import Claim

    seeds = list(seeds)
    v = judge(rule, seeds, bounds=bounds)
    parts = [p for p in (detail, f"per seed {seed_list(seeds)}" if 1 < len(seeds) <= 5 else "",
                         f"{seed_list(seeds)} (1 seed)" if len(seeds) == 1 else "", f"rule {rule.text}",
                         v.reason) if p]
    return Claim(text, v.state == HOLDS, "; ".join(parts), state=v.state)


def judge_value(text: str, rule: Rule, value: float, what: str, detail: str = "", deterministic: bool = True):
    """A claim about one quantity with no seed to vary — a solver's plan, an analytic formula, a profile table
    (``deterministic``), or a universal claim's worst case over its instances (say which in ``what``): the
    judge decides on that single value and the row says why there is one."""
    why = f"deterministic ({what}): one value" if deterministic else f"one value: {what}"
    return judge_claim(text, rule, [value], "; ".join(p for p in (why, detail) if p))


def seed_values(fn: Callable[[Any], float], frame: Any, seed: str = "seed") -> list[float]:
    """``fn`` applied to each seed's slice of ``frame`` (a polars frame with a ``seed`` column), in seed
    order; non-finite values are kept (the judge calls such a row inconclusive)."""
    import polars as pl

    keys = sorted(frame[seed].unique().to_list())
    return [float(fn(frame.filter(pl.col(seed) == k))) for k in keys]


def seed_list(seeds: Sequence[float]) -> str:
    return " / ".join(num(float(v)) if v is not None else "—" for v in seeds)


def counts(sections) -> dict[str, dict[str, int]]:  # noqa: ANN001 - Sections
    """Per paper: how many rows (headlines and claims) hold, fail, are inconclusive, are not judged.
    Beyond-the-paper rows are never judged and not counted."""
    out: dict[str, dict[str, int]] = {}
    for sec in sections:
        c = out.setdefault(sec.paper or sec.title, dict.fromkeys(STATES, 0))
        for h in sec.headlines:
            c[h.verdict.state] += 1
        for cl in sec.claims:
            c[cl.verdict.state] += 1
    return out
