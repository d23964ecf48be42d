"""``shepherd capacity`` as a sweep kind: several policies, a grid over SLO, real replicas, cached searches,
a figure and REPORT.md naming the binding model, recorded in ``runs list``; flags and a TOML are one config."""

from __future__ import annotations

import json

import polars as pl
import pytest

from shepherd.experiments import capacity_sweep as cs
from shepherd.experiments import sweep as sw

from conftest import assert_user_error

STUDY = """
name = "cap-grid"
policies = ["clockwork", "flex"]
[trace]
name = "maf-synthetic"
duration_min = 1
synthetic_rate = 30.0
functions = 12
[cluster]
gpus = 1
[capacity]
target = "attainment=0.95"
rel_tol = 0.05
probes = 2
[capacity.grid]
slo_ms = [150.0, 300.0]
seed = [0, 1]
"""

FLAGS = ["--trace", "maf-synthetic", "--set", "trace.duration_min=1", "--set", "trace.synthetic_rate=30.0",
         "--set", "trace.functions=12", "--policy", "clockwork,flex", "--gpus", "1", "--target", "attainment=0.95",
         "--rel-tol", "0.05", "--probes", "2", "--grid", "slo_ms=150,300", "--name", "cap-grid"]


def test_a_capacity_grid_runs_caches_reports_and_is_listed(cli, tmp_path):
    config = tmp_path / "study.toml"
    config.write_text(STUDY)
    out = tmp_path / "runs" / "cap"
    r = cli("capacity", config, "-o", out, "-j", "1")
    assert r.code == 0, r.err
    table = pl.read_parquet(out / "results.parquet")
    assert table.height == 8  # 2 policies × 2 SLOs × 2 seeds
    assert sorted(set(table["policy"])) == ["clockwork", "flex"] and sorted(set(table["slo_ms"])) == [150.0, 300.0]
    assert (table["capacity"] > 0).all() and (table["bracket_hi"] <= table["capacity"] * 1.0501).all()
    assert table["binding_model"].null_count() == 0 and (table["binding_attainment"] >= 0.95).all()
    # replicas are real: the seeds' traces differ, so some point's capacity differs between seeds
    by_seed = table.pivot(on="seed", index=["policy", "slo_ms"], values="capacity")
    assert (by_seed["0"] != by_seed["1"]).any()
    assert (out / "figures" / "cap-grid-capacity.png").stat().st_size > 10_000
    report = (out / "REPORT.md").read_text()
    for row in table.group_by("policy", "slo_ms").agg(pl.col("binding_model").mode().first()).iter_rows():
        assert f"| {row[0]} | {row[1]:g} |" in report
    assert "binding model" in report
    (out / "REPORT.md").unlink()
    assert cli("report", out).code == 0 and (out / "REPORT.md").read_text() == report  # drawn again, the same
    r = cli("runs", "list", "--results", tmp_path / "runs")
    assert r.code == 0 and "capacity" in r.out and "8 searches" in r.out

    # the same study from flags: the same cells (content-addressed); a third replica runs only its own searches
    cells = cs.cells(sw.read_config(config))
    r = cli("capacity", *FLAGS, "--replicas", "3", "-o", out, "-j", "1")
    assert r.code == 0, r.err
    assert "4 ran (0 recomputed), 8 cached" in r.err + r.out
    again = cs.cells(sw.read_config(config, ["capacity.grid.seed=[0, 1, 2]"]))
    assert {c.key() for c in cells} < {c.key() for c in again}
    assert pl.read_parquet(out / "results.parquet").height == 12


def test_runs_list_shows_a_damaged_grid_folder_and_the_rest(cli, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "sweep.json").write_text("{not json")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "capacity.json").write_text(json.dumps({"config": {"name": "fine", "policies": [
        {"label": "flex"}], "trace": {"name": "maf-synthetic"}, "capacity": {"targets": ["p99-slo"]}}}))
    r = cli("runs", "list", "--results", tmp_path)
    assert r.code == 0, r.err
    assert "damaged" in r.out and "fine" in r.out and "capacity" in r.out


@pytest.mark.parametrize("marker, text", [("sweep.json", "{not json"), ("capacity.json", "[1, 2]"),
                                          ("sweep.json", "")])
def test_report_of_a_damaged_grid_folder_is_one_line(cli, tmp_path, marker, text):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / marker).write_text(text)
    pl.DataFrame({"policy": ["flex"]}).write_parquet(folder / "results.parquet")
    r = cli("report", folder)
    assert_user_error(r, marker, "damaged")
    assert not (folder / "REPORT.md").exists() and not (folder / "figures").exists()
    r = cli("runs", "show", folder)
    assert r.code == 2, r.out
