"""The one judge (issue 41): holds / fails / inconclusive from constructed per-seed values."""

import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from shepherd.experiments.base import Claim, Headline, Section
from shepherd.experiments.confidence import half_width
from shepherd.experiments.judge import (FAILS, HOLDS, INCONCLUSIVE, NOT_JUDGED, Rule, counts, judge,
                                        judge_claim, num)
from shepherd.experiments.report import render


def state(rule, seeds, **kw):
    return judge(rule, seeds, **kw).state


def test_interval_inside_holds_outside_fails_straddling_is_inconclusive():
    rule = Rule.near(4.0, 1.0)                                   # [3, 5]
    assert state(rule, [4.0, 4.2, 3.9]) == HOLDS
    assert state(rule, [9.0, 9.5, 8.8]) == FAILS
    # mean 4.6 inside the band, but the interval reaches above 5: not a pass
    seeds = [4.0, 5.2, 4.6]
    m = sum(seeds) / 3
    assert m + half_width(seeds) > 5 > m
    assert state(rule, seeds) == INCONCLUSIVE
    assert "straddles 5" in judge(rule, seeds).reason


def test_a_non_finite_seed_is_inconclusive_never_dropped():
    # Accordion §4.4.3 Moderate 4.2×, per seed 7.92 / ∞ / 2.22 (issue 41): the ∞ seed must decide, not vanish
    rule = Rule.effect(4.2)
    v = judge(rule, [7.92, math.inf, 2.22])
    assert v.state == INCONCLUSIVE and "seed 1" in v.reason
    assert state(rule, [4.1, math.nan, 4.3]) == INCONCLUSIVE
    assert state(rule, []) == INCONCLUSIVE
    h = Headline.of_seeds("x", 4.2, [7.92, math.inf, 2.22], "×", rule=rule)
    assert h.verdict.state == INCONCLUSIVE and h.ours == pytest.approx((7.92 + 2.22) / 2)


def test_ratio_claims_are_judged_on_the_effect():
    # Symphony Fig. 6 "23 % higher": +8 % is a third of the effect, not 'within 15 % of 1.23'
    rule = Rule.effect(1.23)
    assert state(rule, [1.08, 1.08, 1.08]) == FAILS
    assert state(rule, [1.22, 1.24, 1.23]) == HOLDS
    assert rule.low == pytest.approx(1 + 0.23 * 0.75) and rule.high == pytest.approx(1 + 0.23 * 1.25)
    # Accordion abstract 1.6× QPS: 1.21 matches 1.2× as well as 1.6× under a ±25 % band on the ratio; not here
    assert state(Rule.effect(1.6), [1.21, 1.20, 1.22]) == FAILS
    # "fewer" ratios below 1 keep their order
    r = Rule.effect(0.5)
    assert r.low < r.high and state(r, [0.5, 0.5]) == HOLDS


def test_a_stated_range_is_the_region():
    rule = Rule.span(2.0, 2.4)                                   # Symphony 1080Ti all: "2x to 2.4x"
    assert (rule.low, rule.high) == (2.0, 2.4) and "stated range [2, 2.4]" in rule.text
    assert state(rule, [1.78, 1.77, 1.79]) == FAILS              # held under the old 15 % band on the ratio
    assert state(rule, [2.15, 2.2, 2.25]) == HOLDS
    wide = Rule.span(2.0, 2.4, share=0.25)
    assert wide.low == pytest.approx(1.75) and wide.high == pytest.approx(2.75)


def test_one_sided_rows_fail_only_on_their_side():
    only = Rule.at_most(2.0, 0.5, "%")                           # "approximately only 2 %"
    assert state(only, [0.05, 0.04, 0.06]) == HOLDS              # far below an upper bound is agreement
    assert state(only, [9.0, 11.0, 10.0]) == FAILS
    assert state(only, [2.0, 3.0, 2.5]) == INCONCLUSIVE
    least = Rule.at_least(3.0)
    assert state(least, [30.0, 31.0]) == HOLDS and state(least, [1.0, 1.1]) == FAILS
    assert "one-sided" in only.text and "≤ 2.5 %" in only.text


def test_one_seed_is_a_point_and_no_rule_is_not_judged():
    assert state(Rule.near(1.0, 0.1), [1.05]) == HOLDS
    assert state(Rule.near(1.0, 0.1), [1.5]) == FAILS
    assert state(None, [1.0, 2.0]) == NOT_JUDGED
    assert Headline("c", None, 1.0).verdict.state == NOT_JUDGED


def test_an_aggregate_row_is_judged_on_its_interval():
    # a row given only mean ± half-width (no per-seed values) goes through the same rule
    assert Headline("a", 4.0, 4.9, unit="×", tolerance=1.0).verdict.state == HOLDS
    assert Headline("a", 4.0, 4.9, 0.3, unit="×", tolerance=1.0).verdict.state == INCONCLUSIVE
    assert Headline("a", 4.0, 5.1, unit="×", tolerance=1.0).verdict.state == FAILS


def test_domain_clipping_applies_before_judging():
    # a ratio's interval below 0 is clipped to 0 (unit ×), so an at-most rule sees [0, hi]
    seeds = [0.1, 0.1, 3.0]
    assert judge(Rule.at_most(5.0), seeds, bounds=(0.0, math.inf)).state == judge(Rule.at_most(5.0), seeds).state


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=2, max_size=6), st.floats(-20, 20), st.floats(0.1, 20))
def test_verdict_agrees_with_the_interval(seeds, paper, tol):
    rule = Rule.near(paper, tol)
    m = sum(seeds) / len(seeds)
    lo, hi = m - half_width(seeds), m + half_width(seeds)
    s = state(rule, seeds)
    assert (s == HOLDS) == (rule.low <= lo and hi <= rule.high)
    assert (s == FAILS) == (hi < rule.low or lo > rule.high)


def test_claims_from_the_judge_and_the_head_counts():
    c1 = judge_claim("a beats b", Rule.at_least(0.0), [1.0, 2.0, 1.5])
    c2 = judge_claim("a beats b by far", Rule.at_least(0.0), [-1.0, 2.0, 0.5])
    assert c1.verdict.state == HOLDS and c1.holds and "per seed 1 / 2 / 1.5" in c1.detail
    assert c2.verdict.state == INCONCLUSIVE and not c2.holds
    sec = Section("s", headlines=[Headline.of_seeds("r", 1.23, [1.08, 1.07], "×", rule=Rule.effect(1.23)),
                                  Headline("n", 2.0, 2.1)],
                  claims=[c1, c2, Claim("plain", False)], paper="symphony")
    assert counts([sec]) == {"symphony": {HOLDS: 1, FAILS: 2, INCONCLUSIVE: 1, NOT_JUDGED: 1}}
    text = render([sec], Path("."))
    assert "| symphony | 1 | 2 | 1 | 1 |" in text
    assert "| r | 1.23 × | 1.08 ± 0.064 × | 1.08 / 1.07 | effect +23% ± 25% of it → [1.17, 1.29] | **fails**" in text


def test_report_rows_show_one_seed_and_human_numbers():
    sec = Section("s", headlines=[Headline.of_seeds("one", 1000.0, [1138.0], "r/s", rule=Rule.near(1000, 200)),
                                  Headline("two", 1000.0, 1138.0, 120.4, "r/s", tolerance=300.0)])
    text = render([sec], Path("."))
    assert "1,138 r/s (1 seed)" in text and "± 0" not in text
    assert "1,138 ± 120 r/s" in text
    assert num(1138.0) == "1,138" and num(120.4, 2) == "120" and num(0.0635, 2) == "0.064" and num(2.5) == "2.5"


def test_table5_planning_claim_is_never_decided_by_wall_clock(tmp_path):
    pytest.importorskip("seaborn")
    import polars as pl

    from shepherd.experiments.shepherd.table5_planning import Table5

    base = {"streams": [200_000, 1_000_000], "paper_s": [2.0, 9.0], "gap": [0.0, 0.005], "valid": [True, True],
            "aggregate_s": [0.1, 0.2], "status": ["optimal"] * 2, "objective": [1.0, 2.0], "groups": [3, 4]}
    loaded = pl.DataFrame(base | {"solve_s": [20.0, 95.0], "cpu_s": [2.0, 9.0]})   # a busy machine's wall clock
    claim = Table5().report(loaded, tmp_path).claims[-1]
    assert claim.verdict.state == HOLDS and "CPU" in claim.text and "wall 95.0 s, not judged" in claim.detail
    slow = pl.DataFrame(base | {"solve_s": [20.0, 95.0], "cpu_s": [2.0, 90.0]})
    assert Table5().report(slow, tmp_path).claims[-1].verdict.state == FAILS
    old = pl.DataFrame(base | {"solve_s": [20.0, 95.0]})                                # cells without CPU time
    assert Table5().report(old, tmp_path).claims[-1].verdict.state == NOT_JUDGED


def test_ppipe_fig14_runtime_claims_are_judged_on_cpu_seconds_never_wall_clock():
    import polars as pl

    from shepherd.experiments.ppipe.fig14_milp_runtime import cpu_claims

    rows = {"panel": ["gpus"] * 2 + ["types"] * 2, "value": [100, 100_000, 2, 4]}
    # a loaded machine: wall time 10× at 100k GPUs and falling with more types; the work did neither
    busy = pl.DataFrame(rows | {"solve_s": [1.0, 10.0, 9.0, 3.0], "cpu_s": [1.0, 1.5, 2.0, 40.0]})
    flat, types = cpu_claims(busy)
    assert flat.verdict.state == HOLDS and "1.00 → 1.50 CPU-s" in flat.detail and "not judged" in flat.detail
    assert types.verdict.state == HOLDS and "4: 40.0 CPU-s" in types.detail
    grows = pl.DataFrame(rows | {"solve_s": [1.0, 1.0, 3.0, 3.0], "cpu_s": [1.0, 9.0, 3.0, 2.0]})
    assert [c.verdict.state for c in cpu_claims(grows)] == [FAILS, FAILS]
    old = pl.DataFrame(rows | {"solve_s": [1.0, 1.0, 3.0, 3.0]})                     # cells without CPU time
    assert [c.verdict.state for c in cpu_claims(old)] == [NOT_JUDGED, NOT_JUDGED]
