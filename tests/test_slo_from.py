"""``--slo-from TABLE`` / sweep ``trace.slo_from``: a paper table's per-model SLOs on any trace (issue 44)."""

from __future__ import annotations

import polars as pl
import pytest

from conftest import assert_user_error
from shepherd.core.artifacts import read_artifact
from shepherd.core.profiles import read_builtin_raw
from shepherd.traces.resolve import load_trace
from shepherd.traces.slos import tables_with_slos

MODELS = "ResNet50,BERT,DenseNet121"  # in Shepherd Table 4 (the default profiles) and both Symphony zoos


def _table(name: str) -> dict[str, int]:
    raw = read_builtin_raw(name)
    return {m: int(round(s * 1000)) for m, s in zip(raw["model"], raw["slo_ms"])}


def _check(frame: pl.DataFrame, table: str) -> None:
    want = _table(table)
    per_model = frame.group_by("model").agg(pl.col("slo_us").unique()).rows()
    assert len(per_model) == len(MODELS.split(","))
    for model, slos in per_model:
        assert slos == [want[model]], (model, slos)
    assert (frame["deadline_us"] - frame["arrival_us"] == frame["slo_us"]).all()


def test_the_tables_with_slos_are_symphonys():
    assert tables_with_slos() == ["symphony-1080ti", "symphony-a100"]


@pytest.mark.parametrize("table", ["symphony-1080ti", "symphony-a100"])
def test_named_trace_gets_each_models_slo(table):
    loaded = load_trace("maf-synthetic", duration_min=1, synthetic_rate=200, functions=30, models=MODELS.split(","),
                        slo_from=table)
    _check(loaded.frame, table)
    assert loaded.config["slo_from"] == table
    plain = load_trace("maf-synthetic", duration_min=1, synthetic_rate=200, functions=30, models=MODELS.split(","))
    assert plain.frame.drop("slo_us", "deadline_us").equals(loaded.frame.drop("slo_us", "deadline_us"))
    assert set(plain.frame["slo_us"].to_list()) == {250_000}


def test_traces_maf_writes_the_tables_slos(cli, tmp_path):
    out = tmp_path / "t.parquet"
    r = cli("traces", "maf", "maf2019-sample", "--duration-min", "1", "--models", MODELS,
            "--slo-from", "symphony-a100", "-o", out)
    assert r.code == 0, r.err
    art = read_artifact(out, "trace")
    _check(art.frame, "symphony-a100")
    assert art.provenance["config"]["slo_from"] == "symphony-a100"


def test_simulate_serves_a_trace_file_under_the_tables_slos(cli, tmp_path):
    trace = tmp_path / "t.parquet"
    assert cli("traces", "maf", "maf-synthetic", "--duration-min", "1", "--synthetic-rate", "100", "--functions",
               "20", "--models", MODELS, "-o", trace).code == 0
    out = tmp_path / "sim"
    r = cli("simulate", "--policy", "clockwork", "--trace", trace, "--gpus", "2", "--slo-from", "symphony-1080ti",
            "-o", out)
    assert r.code == 0, r.err
    requests = read_artifact(out / "requests.parquet", "requests").frame
    assert requests.height > 0
    want = _table("symphony-1080ti")
    slos = requests.group_by("model").agg((pl.col("deadline_us") - pl.col("arrival_us")).unique().alias("slo_us"))
    assert slos.height == 3
    for model, got in slos.rows():
        assert got == [want[model]], (model, got)  # each request's deadline is its model's SLO after arrival
    assert read_artifact(out / "summary.parquet", "summary").provenance["config"]["slo_from"] == "symphony-1080ti"


def test_sweep_trace_slo_from(cli, tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text('name = "slos"\npolicies = ["clockwork"]\n[trace]\nname = "maf-synthetic"\nduration_min = 1\n'
                   f'synthetic_rate = 100.0\nfunctions = 20\nmodels = "{MODELS}"\nslo_from = "symphony-a100"\n'
                   '[cluster]\ngpus = 2\n')
    r = cli("sweep", cfg, "-o", tmp_path / "out", "-j", "1")
    assert r.code == 0, r.err
    res = read_artifact(tmp_path / "out" / "results.parquet", "results").frame
    assert res.height == 1
    # the cell's inputs, read from its parameters as the run read them: the trace carries the table's SLOs
    from shepherd.experiments import sweep as sw
    from shepherd.experiments.sweep_config import read_config

    (cell,) = sw.cells(read_config(cfg))
    _check(sw.prepare(cell.params).loaded.frame, "symphony-a100")
    # and a uniform SLO next to it is refused before anything runs
    assert_user_error(cli("sweep", cfg, "--set", "run.slo_ms=100", "--dry-run"), "trace.slo_from", "slo_ms")
    assert_user_error(cli("sweep", cfg, "--set", "trace.slo_from=shepherd-v100", "--dry-run"), "no per-model SLOs")
    assert_user_error(cli("sweep", cfg, "--set", 'trace.models="ResNet18"', "--dry-run"), "no SLO for model 'ResNet18'")


def test_refusals(cli, tmp_path):
    base = ("traces", "maf", "maf-synthetic", "--duration-min", "1", "-o", tmp_path / "t.parquet")
    assert_user_error(cli(*base, "--slo-from", "shepherd-v100"), "no per-model SLOs", "symphony-1080ti")
    assert_user_error(cli(*base, "--slo-from", "nope"), "neither a built-in profile table")
    assert_user_error(cli(*base, "--slo-from", "symphony-a100"), "no SLO for model")  # Shepherd Table 4's models
    assert_user_error(cli(*base, "--models", MODELS, "--slo-ms", "100", "--slo-from", "symphony-a100"), "not both")
    assert not (tmp_path / "t.parquet").exists()
    assert_user_error(cli("simulate", "--trace", "maf-synthetic", "--gpus", "1", "--slo-ms", "50",
                          "--slo-from", "symphony-a100", "-o", tmp_path / "s"), "not both")
