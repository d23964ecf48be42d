"""Experiment runner: content-addressed cells, resume after a kill, executors agree."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

import experiment_fixtures
from conftest import assert_user_error
from shepherd.experiments import runner
from shepherd.experiments.base import Cell, Scale
from shepherd.experiments.confidence import half_width, mean_ci

EXP = experiment_fixtures.EXPERIMENT


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cell_key_is_a_content_hash():
    a = Cell("e", {"rate": 1, "seed": 0})
    assert a.key() == Cell("e", {"seed": 0, "rate": 1}).key()  # order does not matter
    assert a.key() != Cell("e", {"rate": 1, "seed": 1}).key()
    assert a.key() != Cell("f", {"rate": 1, "seed": 0}).key()


def test_rerun_skips_finished_cells(tmp_path):
    cells = EXP.cells(Scale(quick=True, seeds=2))
    first = runner.run_cells(cells, tmp_path, jobs=1)
    assert (first.total, first.ran, first.skipped) == (4, 4, 0)
    stamps = {c.key(): c.path(tmp_path).stat().st_mtime_ns for c in cells}
    again = runner.run_cells(cells, tmp_path, jobs=1)
    assert (again.ran, again.skipped) == (0, 4)
    assert stamps == {c.key(): c.path(tmp_path).stat().st_mtime_ns for c in cells}
    frame = runner.collect(cells, tmp_path)
    assert frame.height == 4 and set(frame["rate"]) == {100, 200}


def test_killed_run_resumes_with_only_the_missing_cells(tmp_path):
    tests_dir = Path(__file__).parent
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tests_dir)!r})
        from pathlib import Path
        import experiment_fixtures
        from shepherd.experiments import runner
        from shepherd.experiments.base import Scale
        cells = experiment_fixtures.EXPERIMENT.cells(Scale(quick=False, seeds=1))
        runner.run_cells(cells, Path({str(tmp_path)!r}), jobs=1)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          env={**__import__("os").environ, "SHEPHERD_TEST_DIE_AT": "400"})
    assert proc.returncode == -9, proc.stderr.decode()
    cells = EXP.cells(Scale(quick=False, seeds=1))
    done_before = [c for c in cells if c.path(tmp_path).exists()]
    assert [c.params["rate"] for c in done_before] == [100, 200]
    resumed = runner.run_cells(cells, tmp_path, jobs=1)
    assert (resumed.skipped, resumed.ran) == (2, 2)
    assert all(c.path(tmp_path).exists() for c in cells)


def test_process_pool_gives_identical_artifacts(tmp_path):
    cells = EXP.cells(Scale(quick=True, seeds=2))
    runner.run_cells(cells, tmp_path / "serial", jobs=1)
    runner.run_cells(cells, tmp_path / "pool", jobs=2)
    for c in cells:
        assert _digest(c.path(tmp_path / "serial")) == _digest(c.path(tmp_path / "pool"))


def test_confidence_half_width():
    assert half_width([5.0]) == 0.0
    # n = 4, sd = 1.2910, t(3) = 3.182 → 3.182 · 1.2910 / 2
    assert half_width([1.0, 2.0, 3.0, 4.0]) == pytest.approx(3.182 * 1.2909944 / 2, rel=1e-4)
    frame = pl.DataFrame({"g": ["a", "a", "b"], "v": [1.0, 3.0, 7.0]})
    ci = mean_ci(frame, ["g"], "v").sort("g")
    assert ci["mean"].to_list() == [2.0, 7.0] and ci["n"].to_list() == [2, 1]


def test_reproduce_and_report_through_the_cli(tmp_path, cli):
    res = tmp_path / "results"
    result = cli("reproduce", "test-paper", "--quick", "--jobs", "1", "--results", res)
    assert result.code == 0, result.err
    report = (res / "REPORT.md").read_text()
    assert "measured ≈ requested | holds" in report and "| test-paper | 1 | 0 | 0 | 0 |" in report
    assert "Synthetic data" in report
    again = cli("report", "test-measured-rate", "--results", res)
    assert again.code == 0, again.err


def test_unknown_experiment(cli, tmp_path):
    assert_user_error(cli("reproduce", "fig99", "--results", tmp_path), "unknown experiment 'fig99'")


def test_results_directory_not_writable(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_user_error(cli("reproduce", "test-paper", "--quick", "--results", blocker / "sub"),
                      "not writable")


def test_report_without_results(cli, tmp_path):
    assert_user_error(cli("report", "test-measured-rate", "--results", tmp_path), "no results")


def test_ray_executor_matches_local_executor(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is part of the test extra")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    cells = EXP.cells(Scale(quick=True, seeds=2))
    runner.run_cells(cells, tmp_path / "local", jobs=1)
    stats = runner.run_cells(cells, tmp_path / "ray", executor="ray", jobs=2)
    assert stats.ran == len(cells)
    assert not ray.is_initialized()  # the runner shut down the Ray it started
    for c in cells:
        assert _digest(c.path(tmp_path / "local")) == _digest(c.path(tmp_path / "ray"))


def test_unreachable_ray_address(cli, tmp_path):
    assert_user_error(cli("reproduce", "test-paper", "--quick", "--executor", "ray",
                          "--ray-address", "127.0.0.1:9", "--results", tmp_path), "unreachable")


def test_reproduce_says_what_it_skipped(tmp_path, cli, monkeypatch):
    # issue 44: "skipped 6" on a fresh run was Fig. 8 reusing Fig. 7's cells; the summary says so
    from shepherd.cli import common

    monkeypatch.setattr(common.console, "width", 400)
    res = tmp_path / "results"
    args = ("reproduce", EXP.name, experiment_fixtures.SHARED.name, "--quick", "--jobs", "1", "--results", res,
            "--no-report")
    first = cli(*args)
    assert first.code == 0, first.err
    line = next(ln for ln in first.out.splitlines() if "skipped" in ln)
    assert "1 (finished results reused: 1 shared with test-measured-rate, computed earlier in this run)" in line, line
    assert "earlier run" not in line
    again = cli(*args)
    line = next(ln for ln in again.out.splitlines() if "skipped" in ln)
    assert f"3 (finished results reused: 3 from an earlier run into {res})" in line, line
    log = (res / runner.LOG_NAME).read_text()
    assert "1 cached (finished results reused: 1 shared with test-measured-rate" in log
