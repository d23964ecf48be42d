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
    r = cli("capacity", "--trace", trace, "--profiles", prof, "--policy", "clockwork", "--gpus", "4",
            "--max-batch", "8", "--target", "attainment=0.99", "--start", "2", "--rel-tol", "0.01")
    assert r.code == 0, r.err
    line = next(ln for ln in r.out.splitlines() if "mean ± 95 %" in ln)
    value = float(line.split("│")[2].split("±")[0])
    assert value == pytest.approx(4.0, rel=0.03)
    assert "bracket" in r.out


def test_unreachable_and_bad_targets_are_one_line_errors(cli, tmp_path):
    trace, prof = md_c_inputs(tmp_path, seconds=5.0)
    base = ["capacity", "--trace", trace, "--profiles", prof, "--policy", "clockwork", "--gpus", "1", "--max-batch", "8"]
    assert_user_error(cli(*base, "--slo-ms", "5"), "unreachable")  # 10 ms service never meets a 5 ms SLO
    assert_user_error(cli(*base, "--target", "attainment=1.5"), "attainment", "1.5")
    assert_user_error(cli(*base, "--target", "speed=1"), "speed")
    assert_user_error(cli(*base, "--seeds", "a,b"), "--seeds", "a,b")
