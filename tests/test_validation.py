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


def _cells(errs: list[float]) -> pl.DataFrame:
    base = {"policy": "flex", "load": 0.5, "metric": "slo_attainment", "live": 1.0, "sim": 1.0,
            "sim_measured": 1.0, "rel_err_measured": 0.0, "dispatch_ms": 1.0, "hop_ms": 0.5, "exec_ratio": 1.0,
            "exec_cv_max": 0.1, "decision_us": 10.0}
    return pl.DataFrame([base | {"seed": i, "rel_err": e} for i, e in enumerate(errs)])


def test_error_table_mean_spread_and_half_width():
    pytest.importorskip("seaborn")
    from shepherd.experiments.validate import error_table

    row = error_table(_cells([0.01, 0.03, 0.05])).row(0, named=True)
    assert row["runs"] == 3
    assert row["err_pct"] == pytest.approx(3.0)
    assert row["err_pct_sd"] == pytest.approx(2.0)
    assert row["err_pct_hw"] == pytest.approx(4.303 * 2.0 / math.sqrt(3), rel=1e-3)  # t(0.975, 2) = 4.303


def test_report_rows_judge_the_goal(tmp_path):
    pytest.importorskip("seaborn")
    from shepherd.experiments.validate import Validate

    ok = Validate().report(_cells([0.01, 0.02, 0.03]), tmp_path).headlines
    bad = Validate().report(_cells([0.2, 0.3, 0.4]), tmp_path).headlines
    assert [h.verdict.state for h in ok] == ["holds"] and [h.verdict.state for h in bad] == ["fails"]
    assert "goal: error within ±5 %" in ok[0].what and "|" not in ok[0].what  # a markdown table cell
