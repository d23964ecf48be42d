"""``shepherd simulate`` end to end through the real CLI, including its bad-input contract."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import assemble


@pytest.fixture
def trace_file(tmp_path):
    rng = np.random.default_rng(1)
    a = np.sort(rng.integers(0, 2_000_000, 400)).astype(np.int64)
    b = np.sort(rng.integers(0, 2_000_000, 300)).astype(np.int64)
    path = tmp_path / "trace.parquet"
    write_artifact(assemble([a, b], ["ResNet18", "ResNet50"], [50_000, 80_000]), path, "trace", make_provenance())
    return path


def test_simulate_writes_all_four_tables(cli, trace_file, tmp_path):
    out = tmp_path / "run"
    r = cli("simulate", "--policy", "flex", "--trace", trace_file, "--gpus", "2", "-o", out, "--seed", "3")
    assert r.code == 0, r.err
    summary = read_artifact(out / "summary.parquet", "summary")
    req = read_artifact(out / "requests.parquet", "requests").frame
    bat = read_artifact(out / "batches.parquet", "batches").frame
    wk = read_artifact(out / "workers.parquet", "workers").frame
    assert req.height == 700 and wk.height == 2
    assert summary.frame["good"][0] == req.filter(pl.col("outcome") == "served").height
    assert summary.frame["batches"][0] == bat.filter(~pl.col("preempted")).height
    assert summary.provenance["config"]["policy"] == "flex"
    assert "goodput" in r.out


def test_record_summary_writes_only_summary_and_workers(cli, trace_file, tmp_path):
    out = tmp_path / "run"
    r = cli("simulate", "--policy", "clockwork", "--trace", trace_file, "--gpus", "1", "--record", "summary", "-o", out)
    assert r.code == 0, r.err
    names = sorted(p.name for p in out.iterdir())  # each table and its run record (which engine ran, and why)
    assert names == ["summary.parquet", "summary.run.json", "workers.parquet", "workers.run.json"]


@pytest.mark.parametrize("policy", ["flex", "clockwork", "nexus"])
def test_record_summary_gives_the_full_runs_summary(cli, trace_file, tmp_path, policy):
    """--record summary (a fast path keeps running aggregates only; the trace read compactly) writes the
    summary and workers tables of the full run, and prints the same batch sizes."""
    runs = {}
    for record in ("summary", "requests"):
        r = cli("simulate", "--policy", policy, "--trace", trace_file, "--gpus", "2", "--record", record,
                "-o", tmp_path / record, "--seed", "2")
        assert r.code == 0, r.err
        runs[record] = r.out
    for kind in ("summary", "workers"):
        a = read_artifact(tmp_path / "summary" / f"{kind}.parquet", kind).frame
        b = read_artifact(tmp_path / "requests" / f"{kind}.parquet", kind).frame
        assert a.equals(b)
    def sizes(out: str) -> str:  # the batch-size table: from its title to the summary table's
        start = out.index("most common batch sizes")
        return out[start:out.index(f"simulate {policy}", start)]

    assert "┃ size" in sizes(runs["requests"]) and sizes(runs["summary"]) == sizes(runs["requests"])


def test_same_seed_same_artifacts(cli, trace_file, tmp_path):
    for name in ("a", "b"):
        assert cli("simulate", "--policy", "nexus", "--trace", trace_file, "--gpus", "2",
                   "-o", tmp_path / name, "--seed", "5").code == 0
    for kind in ("requests", "batches", "workers", "summary"):
        a = read_artifact(tmp_path / "a" / f"{kind}.parquet", kind).frame
        b = read_artifact(tmp_path / "b" / f"{kind}.parquet", kind).frame
        assert a.equals(b)


def test_policy_options_and_load_change_the_run(cli, trace_file, tmp_path):
    base = tmp_path / "base"
    fast = tmp_path / "fast"
    assert cli("simulate", "--trace", trace_file, "--gpus", "1", "-o", base).code == 0
    assert cli("simulate", "--trace", trace_file, "--gpus", "1", "--load", "4", "--set", "lam=2",
               "-o", fast).code == 0
    a = read_artifact(base / "summary.parquet", "summary").frame
    b = read_artifact(fast / "summary.parquet", "summary").frame
    assert b["duration_s"][0] == pytest.approx(a["duration_s"][0] / 4, rel=1e-3)
    assert read_artifact(fast / "summary.parquet", "summary").provenance["config"]["policy_config"]["lam"] == 2.0


def test_plan_runs_one_scheduler_per_group(cli, trace_file, tmp_path):
    plan = pl.DataFrame({"group": [0, 1, 1, 0, 1], "role": ["worker", "worker", "worker", "stream", "stream"],
                         "name": ["w0", "w1", "w2", "0", "1"], "hardware": ["V100"] * 3 + [None, None]},
                        schema={"group": pl.Int32, "role": pl.String, "name": pl.String, "hardware": pl.String})
    write_artifact(plan, tmp_path / "plan.parquet", "plan", make_provenance())
    r = cli("simulate", "--trace", trace_file, "--plan", tmp_path / "plan.parquet", "-o", tmp_path / "run")
    assert r.code == 0, r.err
    req = read_artifact(tmp_path / "run" / "requests.parquet", "requests").frame.drop_nulls("worker")
    assert set(req.filter(pl.col("stream") == 0)["worker"].to_list()) == {0}
    assert set(req.filter(pl.col("stream") == 1)["worker"].to_list()) <= {1, 2}


# --------------------------------------------------------------------------- bad input: exit 2, one line, nothing written

def bad(cli, tmp_path, *args, needles=()):
    out = tmp_path / "never"
    r = cli("simulate", *args, "-o", out)
    assert_user_error(r, *needles)
    assert not out.exists()


def test_unknown_policy(cli, trace_file, tmp_path):
    bad(cli, tmp_path, "--policy", "fifo", "--trace", trace_file, "--gpus", "1", needles=("unknown policy 'fifo'",))


def test_profile_missing_a_model(cli, trace_file, tmp_path):
    prof = load_builtin("shepherd-v100").filter(pl.col("model") != "ResNet50")
    write_artifact(prof, tmp_path / "p.parquet", "profiles", make_provenance())
    bad(cli, tmp_path, "--trace", trace_file, "--gpus", "1", "--profiles", tmp_path / "p.parquet",
        needles=("ResNet50",))


def test_zero_workers(cli, trace_file, tmp_path):
    bad(cli, tmp_path, "--trace", trace_file, "--gpus", "0", needles=("--gpus",))


def test_negative_load(cli, trace_file, tmp_path):
    bad(cli, tmp_path, "--trace", trace_file, "--gpus", "1", "--load", "-2", needles=("--load",))


def test_neither_gpus_nor_plan(cli, trace_file, tmp_path):
    bad(cli, tmp_path, "--trace", trace_file, needles=("--gpus",))


def test_unknown_policy_option(cli, trace_file, tmp_path):
    bad(cli, tmp_path, "--trace", trace_file, "--gpus", "1", "--set", "lambda=2", needles=("lambda",))


def test_missing_trace_file(cli, tmp_path):
    bad(cli, tmp_path, "--trace", tmp_path / "nope.parquet", "--gpus", "1", needles=("nope.parquet",))


def test_bad_record_level(cli, trace_file, tmp_path):
    bad(cli, tmp_path, "--trace", trace_file, "--gpus", "1", "--record", "everything", needles=("--record",))


def test_stream_not_in_plan(cli, trace_file, tmp_path):
    plan = pl.DataFrame({"group": [0, 0], "role": ["worker", "stream"], "name": ["w0", "0"]},
                        schema={"group": pl.Int32, "role": pl.String, "name": pl.String})
    write_artifact(plan, tmp_path / "plan.parquet", "plan", make_provenance())
    bad(cli, tmp_path, "--trace", trace_file, "--plan", tmp_path / "plan.parquet", needles=("stream 1",))
