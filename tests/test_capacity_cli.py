"""``shepherd capacity``: the CLI path of the M/D/c case (analytic capacity within 3 %) and bad input."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.core.profiles import linear_rows
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import assert_user_error


def md_c_inputs(tmp_path, seconds=240.0, base_rps=100.0):
    """c = 4 workers, 10 ms per request whatever the batch (β = 0), SLO 0.5 s: capacity 400 req/s = load 4."""
    raw = pl.DataFrame({"model": ["m"], "hardware": ["gpu"], "alpha_ms": [10.0], "beta_ms": [0.0]})
    prof = write_artifact(linear_rows(raw, "test", max_batch=8), tmp_path / "p.parquet", "profiles",
                          make_provenance({}, 0))
    trace = assemble([poisson(np.random.default_rng(0), base_rps, int(seconds * 1e6))], ["m"], [500_000])
    return write_artifact(trace, tmp_path / "t.parquet", "trace", make_provenance({}, 0)), prof


def test_cli_finds_the_md_c_capacity_within_3_percent(cli, tmp_path):
    trace, prof = md_c_inputs(tmp_path)
    out = tmp_path / "cap"
    r = cli("capacity", "--trace", trace, "--profiles", prof, "--policy", "clockwork", "--gpus", "4",
            "--max-batch", "8", "--target", "attainment=0.99", "--start", "2", "--rel-tol", "0.01", "-o", out)
    assert r.code == 0, r.err
    row = pl.read_parquet(out / "results.parquet").row(0, named=True)
    assert row["capacity"] == pytest.approx(4.0, rel=0.03)
    assert row["capacity"] < row["bracket_hi"] <= row["capacity"] * 1.0101
    assert row["binding_model"] == "m" and row["binding_attainment"] >= 0.99 > row["binding_attainment_above"]
    assert "m 1/1" in r.out  # the binding model, on 1 of 1 seeds
    report = (out / "REPORT.md").read_text()
    assert "| m (1/1) |" in report and "figures/capacity-capacity.png" in report


def test_an_unreachable_point_is_capacity_zero_and_bad_input_is_one_line(cli, tmp_path):
    trace, prof = md_c_inputs(tmp_path, seconds=5.0)
    base = ["capacity", "--trace", trace, "--profiles", prof, "--policy", "clockwork", "--gpus", "1", "--max-batch", "8"]
    r = cli(*base, "--slo-ms", "5", "-o", tmp_path / "zero", "-j", "1")  # 10 ms service never meets a 5 ms SLO
    assert r.code == 0, r.err
    row = pl.read_parquet(tmp_path / "zero" / "results.parquet").row(0, named=True)
    assert row["capacity"] == 0.0 and row["binding_model"] == "m" and row["binding_attainment"] is None
    assert "not met even at load" in r.err and "capacity 0" in (tmp_path / "zero" / "REPORT.md").read_text()
    bad = tmp_path / "bad"
    for args, needles in [(("--target", "attainment=1.5"), ("attainment", "1.5")),
                          (("--target", "speed=1"), ("speed",)),
                          (("--seeds", "a,b"), ("--seeds", "a,b")),
                          (("--seeds", "0,0"), ("--seeds", "repeats seed 0")),
                          (("--seeds", "0,1", "--seed", "3"), ("--seeds", "--seed")),
                          (("--replicas", "2"), ("trace file", "redraw_window_s")),  # identical replicas
                          (("--grid", "load=1,2"), ("load",)),
                          (("--grid", "slo_ms=5,-1"), ("slo_ms", "-1")),
                          (("--set", "nope=1"), ("nope",)),
                          (("--set", "trace.nope=1"), ("trace.nope",)),
                          (("--jobs", "0"), ("--jobs",))]:
        assert_user_error(cli(*base, *args, "-o", bad), *needles)
        assert not bad.exists(), args  # a bad config leaves nothing behind
