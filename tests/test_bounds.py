"""One bounds table (core/bounds.py): a value past a cap is one ``error:`` line and exit 2 before anything
is allocated (issue 33 items 2 and 4)."""

from __future__ import annotations

import pytest

from shepherd.core import bounds
from shepherd.core.errors import UserError

from conftest import assert_user_error


def test_check_bound_accepts_the_ends_and_refuses_past_them():
    low, high = bounds.BOUNDS["gpus"]
    bounds.check_bound("gpus", low)
    bounds.check_bound("gpus", high)
    for bad in (low - 1, high + 1, float("nan")):
        with pytest.raises(UserError, match="gpus must be in"):
            bounds.check_bound("gpus", bad)


def test_plan_json_nested_200000_deep_is_a_user_error(cli, tmp_path):
    """json.loads recurses once per level: a hostile file raised RecursionError (internal error, exit 1)."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    out = tmp_path / "x.parquet"
    assert_user_error(cli("plan-import", deep, "-o", out), "nested too deeply")
    assert not out.exists()


def test_nexus_frontends_past_the_cap(cli, tmp_path):
    trace = tmp_path / "t.parquet"
    assert cli("traces", "generate", "--rate", "100", "--duration-s", "1", "-o", trace).code == 0
    out = tmp_path / "o"
    r = cli("simulate", "--trace", trace, "--gpus", "2", "--policy", "nexus", "--set", "frontends=100000000",
            "-o", out)
    assert_user_error(r, "frontends must be in [1, 10,000]")
    assert not out.exists()


def test_measure_batch_past_the_cap_is_refused_before_torch_runs(cli, tmp_path):
    """``--batch 100000`` on ResNet50 tried to allocate ≈ 60 GB."""
    out = tmp_path / "m.parquet"
    assert_user_error(cli("profile", "--measure", "ResNet50", "--batch", "1,100000", "-o", out), "--batch sizes")
    assert not out.exists()
