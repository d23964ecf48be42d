"""``shepherd sweep`` / ``report RESULTS`` / ``runs``: a small flex-vs-clockwork-vs-nexus grid end to end,
resume, content addressing by file contents, Ray, and the bad-input contract."""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.experiments import sweep as sw
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import assert_user_error

SMALL = """
name = "small"
policies = ["flex", "clockwork", "nexus"]
[trace]
name = "maf-synthetic"
duration_min = 1
synthetic_rate = 40.0
functions = 50
[cluster]
gpus = 2
[grid]
load = [1.0, 3.0]
seed = [0, 1]
"""


def write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def mtimes(folder):
    return {p.name: p.stat().st_mtime_ns for p in (folder / "cells" / "sweep").glob("*.parquet")}


def test_small_comparison_runs_resumes_and_reports(cli, tmp_path):
    config, out = write(tmp_path, SMALL), tmp_path / "res"
    r = cli("sweep", config, "-o", out, "-j", "1")
    assert r.code == 0, r.err
    table = pl.read_parquet(out / "results.parquet")
    assert table.height == 12  # 3 policies × 2 loads × 2 seeds, one row per cell
    for col in ("policy", "trace", "load", "slo_ms", "seed", "cluster", "config", "gpus", "trace.synthetic_rate",
                "slo_attainment", "goodput_rps", "p99_latency_ms", "cell"):
        assert col in table.columns, col
    assert sorted(set(table["policy"])) == ["clockwork", "flex", "nexus"]
    assert sorted(set(table["load"])) == [1.0, 3.0] and sorted(set(table["seed"])) == [0, 1]
    assert table["cluster"].unique().to_list() == ["2 GPUs"]
    # load 3 offers three times the requests per second of load 1 (same trace, time-compressed)
    by = table.group_by("load").agg(pl.col("goodput_rps").mean()).sort("load")
    assert by["goodput_rps"][1] > 2.0 * by["goodput_rps"][0]
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["config"]["grid"] == {"load": [1.0, 3.0], "seed": [0, 1]} and meta["swept"] == ["load", "seed"]

    # resume: finished cells are kept; a lost cell (a killed run) is the only one recomputed
    before = mtimes(out)
    lost = sorted(before)[0]
    (out / "cells" / "sweep" / lost).unlink()
    r = cli("sweep", config, "-o", out, "-j", "1")
    assert r.code == 0, r.err
    after = mtimes(out)
    assert set(after) == set(before)
    assert [k for k in before if before[k] != after[k]] == [lost]

    # report: the comparison figure and a table row per policy and load
    r = cli("report", out)
    assert r.code == 0, r.err
    png = out / "figures" / "small-comparison.png"
    assert png.is_file() and png.stat().st_size > 10_000
    report = (out / "REPORT.md").read_text()
    assert "| nexus | 3 |" in report and "| flex | 1 |" in report and "figures/small-comparison.png" in report

    # runs list finds it; runs show prints its config
    r = cli("runs", "list", "--results", tmp_path)
    assert r.code == 0 and "small" in r.out and "12 cells" in r.out
    r = cli("runs", "show", "small", "--results", tmp_path)
    assert r.code == 0 and '"synthetic_rate": 40.0' in r.out


def test_dry_run_prints_the_grid_and_set_overrides(cli, tmp_path):
    config = write(tmp_path, SMALL)
    r = cli("sweep", config, "--dry-run", "--set", "grid.load=[1, 2, 4]", "--set", "cluster.gpus=3",
            "-o", tmp_path / "x")
    assert r.code == 0, r.err
    assert "18 cells" in r.out and "gpus=3" in r.out
    assert not (tmp_path / "x").exists()  # a dry run writes nothing


def trace_file(path, rate=50.0, seed=0):
    trace = assemble([poisson(np.random.default_rng(seed), rate, 2_000_000)], ["ResNeSt50"], [100_000])
    write_artifact(trace, path, "trace", make_provenance({}, seed))
    return path


def test_cells_are_keyed_by_file_contents_not_paths(tmp_path):
    trace_file(tmp_path / "a.parquet")
    text = 'policies = ["flex"]\n[trace]\npath = "a.parquet"\n[cluster]\ngpus = 1\n'
    key = sw.cells(sw.read_config(write(tmp_path, text)))[0].key()
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.copy(tmp_path / "a.parquet", moved / "b.parquet")
    text_b = text.replace("a.parquet", "elsewhere/b.parquet")
    assert sw.cells(sw.read_config(write(tmp_path, text_b, "b.toml")))[0].key() == key  # same bytes, same cell
    trace_file(tmp_path / "a.parquet", rate=60.0)  # edited contents: a new cell
    assert sw.cells(sw.read_config(write(tmp_path, text)))[0].key() != key


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray not installed")
def test_ray_executor_gives_the_same_table(cli, tmp_path):
    trace_file(tmp_path / "t.parquet")
    text = ('policies = ["flex", "clockwork"]\n[trace]\npath = "t.parquet"\n[cluster]\ngpus = 1\n'
            '[grid]\nload = [1.0, 2.0]\n')
    config = write(tmp_path, text)
    assert cli("sweep", config, "-o", tmp_path / "loc", "-j", "1").code == 0
    r = cli("sweep", config, "-o", tmp_path / "ray", "-j", "2", "--executor", "ray")
    assert r.code == 0, r.err
    a = pl.read_parquet(tmp_path / "loc" / "results.parquet").sort("cell")
    b = pl.read_parquet(tmp_path / "ray" / "results.parquet").sort("cell")
    assert a.height == 4 and a.equals(b)


@pytest.mark.parametrize("text, needles", [
    ("colour = 3\n" + SMALL, ("unknown config key 'colour'",)),
    (SMALL.replace("gpus = 2", "gpus = 2\nnodes = 1"), ("cluster.nodes",)),
    (SMALL.replace("seed = [0, 1]", "seed = [0, 1]\nbogus = [1]"), ("unknown grid key 'bogus'",)),
    (SMALL.replace("load = [1.0, 3.0]", 'load = [1.0, "high"]'), ("grid.load", "'high'")),
    (SMALL.replace("seed = [0, 1]", "seed = [0.5]"), ("grid.seed", "0.5")),
    (SMALL.replace("seed = [0, 1]", "seed = []"), ("grid.seed", "empty")),
    (SMALL.replace('policies = ["flex", "clockwork", "nexus"]', "policies = []"), ("policies", "empty")),
    (SMALL.replace('"nexus"]', '"nexus"]\n[run]\nspeed = 2'), ("run.speed",)),
    (SMALL.replace("seed = [0, 1]", 'seed = [0, 1]\n"policy.nope" = [1]'), ("policy.nope",)),
])
def test_bad_configs_are_one_line_errors_naming_the_key(cli, tmp_path, text, needles):
    r = cli("sweep", write(tmp_path, text), "--dry-run")
    assert_user_error(r, *needles)


def test_bad_option_type_and_missing_config(cli, tmp_path):
    text = SMALL.replace('policies = ["flex", "clockwork", "nexus"]',
                         '[[policies]]\nname = "flex"\noptions = { lam = "big" }\n')
    assert_user_error(cli("sweep", write(tmp_path, text), "--dry-run"), "policies[0].options.lam", "'big'")
    assert_user_error(cli("sweep", tmp_path / "none.toml"), "none.toml")
    assert_user_error(cli("sweep", write(tmp_path, SMALL), "--set", "nokey"), "key=value")


def test_every_example_config_expands(cli):
    from pathlib import Path

    examples = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.toml"))
    assert len(examples) >= 3
    for path in examples:
        r = cli("sweep", path, "--dry-run")
        assert r.code == 0 and " cells into " in r.out, (path, r.err)
    cfg = sw.read_config(examples[[p.stem for p in examples].index("flex-vs-baselines")])
    grid = sw.cells(cfg)
    assert len(grid) == 36 and {c.params["policy"] for c in grid} == {"flex", "clockwork", "nexus"}
    assert {c.params["gpus"] for c in grid} == {32} and len(cfg.grid["load"]) == 4 and len(cfg.grid["seed"]) == 3


def test_report_on_a_folder_that_is_not_a_sweep(cli, tmp_path):
    assert_user_error(cli("report", tmp_path), "not a sweep's results")
    assert_user_error(cli("report", "no-such-experiment"), "no-such-experiment")
