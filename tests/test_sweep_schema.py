"""The sweep config's schema (experiments/sweep_config.py) and the checks a dry run makes (sweep_checks.py):
everything a run would reject is rejected first, in well under a second, and leaves nothing behind."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.experiments import sweep as sw
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import assert_user_error

BASE = """
name = "schema"
policies = ["flex", "clockwork"]
{profiles}
[trace]
name = "maf-synthetic"
duration_min = 1
synthetic_rate = 40.0
functions = 20
{models}
[cluster]
gpus = 2
[grid]
load = [1.0, 2.0]
"""


def config(tmp_path, profiles="", models="", extra="", name="s.toml"):
    path = tmp_path / name
    path.write_text(BASE.format(profiles=profiles, models=models) + extra)
    return path


def timed(cli, *args):
    start = time.perf_counter()
    result = cli(*args)
    return result, time.perf_counter() - start


BAD_CONFIGS = [('profiles = "symphony-a100"', 'models = ["ResNet18"]', "a.toml", ("symphony-a100", "ResNet18")),
               ("", 'models = "ResNet50,VGG16"', "b.toml", ("shepherd-v100", "VGG16"))]


@pytest.mark.slow
def test_the_two_sweep_bugs_are_rejected_in_under_a_second(cli, tmp_path):
    """A timing check (so ``-m slow``, not the default suite): the dry run rejects both bugs in under a second
    (the runs used to fail after 16 s and 30 s)."""
    assert cli("sweep", config(tmp_path, 'profiles = "symphony-a100"', 'models = "ResNet50, VGG16"',
                               name="good.toml"), "--dry-run").code == 0  # warms the imports
    for profiles, models, name, needles in BAD_CONFIGS:
        r, seconds = timed(cli, "sweep", config(tmp_path, profiles, models, name=name), "--dry-run")
        assert_user_error(r, *needles)
        assert seconds < 1.0, seconds


def test_the_two_sweep_bugs_are_rejected_by_the_dry_run(cli, tmp_path):
    good = config(tmp_path, 'profiles = "symphony-a100"', 'models = "ResNet50, VGG16"', name="good.toml")
    r = cli("sweep", good, "--dry-run")
    assert r.code == 0, r.err
    # a comma string is a list (it was iterated by character); the chosen table is the one checked
    cell = sw.cells(sw.read_config(good))[0]
    assert cell.params["trace_options"]["models"] == ["ResNet50", "VGG16"]
    prepared = sw.prepare(cell.params)  # what a run reads: the symphony-a100 table, not shepherd-v100
    assert set(prepared.loaded.frame["model"].unique()) == {"ResNet50", "VGG16"}
    # ResNet18 is in shepherd-v100 but not in symphony-a100; VGG16 the other way round
    for profiles, models, name, needles in BAD_CONFIGS:  # rejected by the dry run (timed: the slow test above)
        assert_user_error(cli("sweep", config(tmp_path, profiles, models, name=name), "--dry-run"), *needles)


@pytest.mark.parametrize("extra, needles", [
    ("[run]\nload = -1\n", ("run.load", "-1")),
    ("[run]\nload = nan\n", ("run.load", "nan")),
    ("[run]\noverhead = \"nope\"\n", ("overhead", "nope")),
    ("[run]\nseed = -2\n", ("run.seed",)),
    ("[capacity]\ntarget = \"speed=1\"\n", ("capacity.target", "speed")),
])
def test_values_a_cell_would_reject_are_rejected_before_any_folder(cli, tmp_path, extra, needles):
    out = tmp_path / "out"
    assert_user_error(cli("sweep", config(tmp_path, extra=extra), "-o", out), *needles)
    assert not out.exists()


@pytest.mark.parametrize("sets, needles", [
    (["cluster.gpus=0"], ("cluster.gpus", "0")),
    (["cluster.gpus=-4"], ("cluster.gpus", "-4")),
    (["grid.gpus=[2, 0]"], ("grid.gpus", "0")),
    (["name=../../escaped"], ("name", "folder name")),
    (["name=/tmp/abs"], ("name", "folder name")),
    (["policies=[{name = \"flex\", options = {lam = -3.0}}]"], ("λ", "-3")),
    (["policies=[{name = \"flex\", options = {lam = \"nope\"}}]"], ("policies[0].options.lam", "nope")),
    (["trace.duration_min=1.5"], ("trace.duration_min", "1.5")),
    (["trace.models=[]"], ("trace.models", "empty")),
    (["grid.seed=[0, 0]"], ("grid.seed", "repeats")),
    (["grid.max_batch=[100000000]"], ("grid.max_batch", "4096")),  # the bounds table (core/bounds.py)
    (["grid.gpus=[1000000000]"], ("grid.gpus", "100000")),
    (["run.max_batch=100000000"], ("run.max_batch", "4096")),
    (["cluster.gpus=100000000"], ("cluster.gpus", "100000")),
    (["policies=[\"ppipe\"]"], ("ppipe", "pipeline plan")),
])
def test_overrides_go_through_the_same_schema(cli, tmp_path, sets, needles):
    args = [a for s in sets for a in ("--set", s)]
    out = tmp_path / "out"
    assert_user_error(cli("sweep", config(tmp_path), *args, "-o", out), *needles)
    assert not out.exists() and not (tmp_path / "escaped").exists()


def test_input_files_are_checked_for_their_kind(cli, tmp_path):
    frame = assemble([poisson(np.random.default_rng(0), 20.0, 1_000_000)], ["ResNet50"], [100_000])
    write_artifact(frame, tmp_path / "t.parquet", "trace", make_provenance({}, 0))
    path = config(tmp_path, extra="")
    assert_user_error(cli("sweep", path, "--set", 'cluster.plan="t.parquet"', "--dry-run"), "t.parquet", "trace")
    assert_user_error(cli("sweep", path, "--set", 'cluster.plan="none.parquet"', "--dry-run"), "none.parquet")
    assert_user_error(cli("sweep", tmp_path, "--dry-run"), "folder")


def test_one_file_named_as_two_kinds_is_checked_as_each(cli, tmp_path):
    frame = assemble([poisson(np.random.default_rng(0), 20.0, 1_000_000)], ["ResNet50"], [100_000])
    write_artifact(frame, tmp_path / "t.parquet", "trace", make_provenance({}, 0))
    path = config(tmp_path, extra="")
    r = cli("sweep", path, "--set", 'trace={path = "t.parquet"}', "--set", 'cluster.plan="t.parquet"', "--dry-run")
    assert_user_error(r, "plan t.parquet", "trace artifact")


def test_a_huge_grid_is_refused_before_it_is_expanded(cli, tmp_path):
    loads = ", ".join(f"{x}.0" for x in range(1, 1001))
    seeds = ", ".join(str(x) for x in range(1000))
    out = tmp_path / "out"  # listing these 2 M cells took minutes and gigabytes: refused from the axes' lengths
    r = cli("sweep", config(tmp_path), "--set", f"grid.load=[{loads}]", "--set", f"grid.seed=[{seeds}]", "-o", out)
    assert_user_error(r, "grid's size", "1000 load", "1000 seed", "2,000,000")
    assert not out.exists()


def test_schema_for_editors_and_seed_options(cli, tmp_path):
    r = cli("sweep", "--schema")
    assert r.code == 0, r.err
    schema = json.loads(r.out)
    assert {"trace", "policies", "grid", "capacity", "cluster", "run"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    path = config(tmp_path)
    r = cli("sweep", path, "--seed", "5", "--replicas", "3", "--dry-run")
    assert r.code == 0 and "12 cells" in r.out, r.err  # 2 policies × 2 loads × seeds 5, 6, 7
    assert {c.params["seed"] for c in sw.cells(sw.read_config(path, ["grid.seed=[5, 6, 7]"]))} == {5, 6, 7}
    assert_user_error(cli("sweep", path, "--seeds", "1,1", "--dry-run"), "--seeds", "repeats")
    assert_user_error(cli("sweep", path, "--seeds", "1,2", "--seed", "3", "--dry-run"), "--seeds", "--seed")
    r = cli("sweep", path, "--address", "auto", "--dry-run")
    assert r.code == 0 and "--address is deprecated" in r.err and "--ray-address" in r.err
    r = cli("sweep", path, "--results", tmp_path / "x", "--dry-run")
    assert r.code == 0 and "--results is deprecated" in r.err and str(tmp_path / "x") in r.out


def test_the_schema_file_in_docs_is_current():
    """docs/sweep.schema.json is what `shepherd sweep --schema` prints (regenerate it after a schema change)."""
    from pathlib import Path

    from shepherd.experiments.sweep_schema import json_schema

    path = Path(__file__).resolve().parents[1] / "docs" / "sweep.schema.json"
    assert json.loads(path.read_text()) == json_schema(), "run: shepherd sweep --schema > docs/sweep.schema.json"
