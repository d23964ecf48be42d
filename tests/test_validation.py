"""Validation arithmetic (issue 34): relative errors, the error table over runs, the REPORT rows — no live run."""

from __future__ import annotations

import math

import polars as pl
import pytest

from shepherd.core import validation as val
from shepherd.core.engine.overhead import OverheadConfig


def test_compare_is_sim_minus_live_over_live():
    live = dict.fromkeys(val.METRICS, 2.0) | {"p99_ms": 100.0, "utilization": 0.0}
    sim = dict.fromkeys(val.METRICS, 3.0) | {"p99_ms": 90.0, "utilization": 0.5}
    rows = {r["metric"]: r for r in val.compare(live, sim)}
    assert rows["slo_attainment"]["rel_err"] == pytest.approx(0.5)
    assert rows["p99_ms"]["rel_err"] == pytest.approx(-0.1)
    assert rows["utilization"]["rel_err"] is None  # no error relative to zero


def test_measured_overhead_is_dispatch_plus_hop():
    ovh = val.measured_overhead({"dispatch_ms_mean": 1.5, "hop_ms_mean": 0.25})
    assert isinstance(ovh, OverheadConfig) and ovh.mode == "model"
    assert ovh.base_us == pytest.approx(1750.0) and ovh.per_worker_us == 0 and math.isinf(ovh.max_lag_us)
    assert val.measured_overhead({"dispatch_ms_mean": math.nan, "hop_ms_mean": math.nan}).base_us == 0


def _cells(errs: list[float], load: float = 0.5, core_wait: float = 0.01, sim_att: float = 0.95,
           p99_first: float = 10.0, p99_step: float = 2.0) -> pl.DataFrame:
    """Result rows of one validation cell over seeds: attainment errors ``errs`` (fractions); p99 ``p99_first``
    % high on the first seed and ``p99_step`` % more on each next."""
    rows = []
    for i, e in enumerate(errs):
        common = {"policy": "flex", "model": "M", "load": load, "seed": i, "slo_ms": 100.0, "rate_rps": 10.0,
                  "capacity_rps": 20.0, "sens_attainment_pts_per_pct": -2.5, "sens_p99_pct_per_pct": 1.0,
                  "core_wait_share": core_wait, "exec_ratio": 1.0, "exec_cpu_ratio": 1.0, "dispatch_ms": 0.3,
                  "hop_ms": 0.1, "decision_delay_ms": 0.5, "calibration_core_wait": 0.0, "failures": 0,
                  "live_pct": [0.0] * 101, "sim_pct": [0.0] * 101}
        live = sim_att - e
        rows.append(common | {"metric": "slo_attainment", "live": live, "sim": sim_att, "sim_before": sim_att + 0.1,
                              "sim_live_exec": live + e / 4, "err_abs": e, "rel_err_pct": e / live * 100,
                              "err_execution": e * 3 / 4, "err_scheduling": e / 4})
        d = (p99_first + i * p99_step) / 2  # ms over a live p99 of 50 ms
        rows.append(common | {"metric": "p99_ms", "live": 50.0, "sim": 50.0 + d, "sim_before": 40.0,
                              "sim_live_exec": 52.0, "err_abs": d, "rel_err_pct": d * 2,
                              "err_execution": 3.0, "err_scheduling": d - 3.0})
    return pl.DataFrame(rows)


def test_error_table_points_half_width_split_and_per_seed_values():
    pytest.importorskip("seaborn")
    from shepherd.experiments.validate import error_table

    row = error_table(_cells([0.01, 0.03, 0.05])).row(0, named=True)
    assert row["runs"] == 3
    assert row["att_err_pts"] == pytest.approx(3.0)
    assert row["att_err_pts_hw"] == pytest.approx(4.303 * 2.0 / math.sqrt(3), rel=1e-3)  # t(0.975, 2) = 4.303
    assert row["att_err_pts_seeds"] == pytest.approx([1.0, 3.0, 5.0])
    assert row["att_exec_pts"] == pytest.approx(2.25) and row["att_sched_pts"] == pytest.approx(0.75)
    assert row["p99_err_pct"] == pytest.approx(12.0)
    assert row["att_err_before_pts"] == pytest.approx(13.0)


def test_report_rows_judge_the_goals(tmp_path):
    pytest.importorskip("seaborn")
    from shepherd.experiments.validate import Validate

    ok = Validate().report(_cells([0.01, 0.02, 0.03]), tmp_path).headlines
    bad = Validate().report(_cells([0.2, 0.3, 0.4]), tmp_path).headlines
    att = [h for h in ok if "attainment" in h.what]
    p99 = [h for h in ok if "p99" in h.what]
    # p99 +10/+12/+14 %: the interval of the mean (12 ± 5) straddles the ±10 % goal — the judge cannot say
    assert [h.verdict.state for h in att] == ["holds"] and [h.verdict.state for h in p99] == ["inconclusive"]
    assert [h.verdict.state for h in bad if "attainment" in h.what] == ["fails"]
    tight = Validate().report(_cells([0.01, 0.02, 0.03], p99_first=12, p99_step=0.2), tmp_path).headlines
    assert [h.verdict.state for h in tight if "p99" in h.what] == ["fails"]
    assert [h.seeds for h in tight if "p99" in h.what] == [pytest.approx((12.0, 12.2, 12.4))]
    assert "goal ±5" in att[0].what and "|" not in att[0].what  # a markdown table cell
    above = Validate().report(_cells([0.01], load=1.5), tmp_path).headlines
    assert not [h for h in above if "p99" in h.what]  # p99 is judged below capacity only


def test_a_cell_whose_worker_waited_for_its_core_is_not_judged(tmp_path):
    pytest.importorskip("seaborn")
    from shepherd.experiments.validate import CORE_WAIT_LIMIT, Validate

    heads = Validate().report(_cells([0.2, 0.3], core_wait=CORE_WAIT_LIMIT * 2), tmp_path).headlines
    assert heads and all(h.verdict.state == "not judged" for h in heads)
    assert all("not judged" in h.what for h in heads)


def test_the_grid_can_fail_claim_reads_below_capacity_cells(tmp_path):
    pytest.importorskip("seaborn")
    from shepherd.experiments.validate import Validate

    perfect = Validate().report(_cells([0.0], sim_att=1.0), tmp_path).claims
    tight = Validate().report(_cells([0.0], sim_att=0.95), tmp_path).claims
    assert [c.holds for c in perfect] == [False] and [c.holds for c in tight] == [True]
