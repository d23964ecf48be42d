"""One meaning per option name (STYLE.md pattern 16): old spellings work one release, with a notice."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import assert_user_error


@pytest.fixture
def trace_file(tmp_path):
    trace = assemble([poisson(np.random.default_rng(0), 40.0, 2_000_000)], ["ResNeSt50"], [100_000])
    return write_artifact(trace, tmp_path / "t.parquet", "trace", make_provenance({}, 0))


def notices(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "deprecated" in ln]


def test_simulate_slo_old_spelling_same_result_with_one_notice(cli, trace_file, tmp_path):
    new = cli("simulate", "--trace", trace_file, "--gpus", "1", "--slo-ms", "30", "-o", tmp_path / "a")
    old = cli("simulate", "--trace", trace_file, "--gpus", "1", "--slo", "30", "-o", tmp_path / "b")
    assert new.code == 0 and old.code == 0, (new.err, old.err)
    assert notices(new.err) == []
    assert notices(old.err) == ["warning: --slo is deprecated and will be removed in the next release; use --slo-ms"]
    a = pl.read_parquet(tmp_path / "a" / "summary.parquet")
    b = pl.read_parquet(tmp_path / "b" / "summary.parquet")
    assert a.equals(b) and a["slo_ms"][0] == 30.0
    assert_user_error(cli("simulate", "--trace", trace_file, "--gpus", "1", "--slo", "30", "--slo-ms", "40"),
                      "--slo-ms", "--slo")


def test_simulate_summary_names_what_ran(cli, trace_file, tmp_path):
    assert cli("simulate", "--trace", trace_file, "--gpus", "3", "--load", "2", "--seed", "4",
               "--policy", "clockwork", "-o", tmp_path / "s").code == 0
    row = read_artifact(tmp_path / "s" / "summary.parquet", "summary").frame.row(0, named=True)
    assert (row["policy"], row["trace"], row["load"], row["slo_ms"], row["seed"], row["cluster"]) == \
        ("clockwork", "t.parquet", 2.0, None, 4, "3 GPUs")
    assert '"urgency"' in row["config"]  # the policy's resolved config, as JSON


def test_traces_generate_duration_and_maf_rate(cli, tmp_path):
    a = cli("traces", "generate", "--rate", "50", "--duration-s", "2", "-o", tmp_path / "a.parquet")
    b = cli("traces", "generate", "--rate", "50", "--duration", "2", "-o", tmp_path / "b.parquet")
    assert a.code == 0 and b.code == 0 and notices(a.err) == [] and len(notices(b.err)) == 1
    assert "--duration is deprecated" in b.err
    assert pl.read_parquet(tmp_path / "a.parquet").equals(pl.read_parquet(tmp_path / "b.parquet"))
    common = ["traces", "maf", "maf-synthetic", "--duration-min", "1", "--functions", "20"]
    c = cli(*common, "--rate", "30", "-o", tmp_path / "c.parquet")
    d = cli(*common, "--load", "30", "-o", tmp_path / "d.parquet")
    assert c.code == 0 and d.code == 0 and len(notices(d.err)) == 1 and "use --rate" in d.err
    assert pl.read_parquet(tmp_path / "c.parquet").equals(pl.read_parquet(tmp_path / "d.parquet"))
    assert pl.read_parquet(tmp_path / "c.parquet").height == pytest.approx(30 * 60, rel=0.1)


def test_readme_command_table_uses_only_new_names():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = "\n".join(ln for ln in text.splitlines() if ln.startswith("| `shepherd"))
    assert "`--slo-ms" in table and "`--rate`" in table and "--duration-s" in table
    for old in ("`--slo MS`", "`--slo `", "`--duration`", "`--load` rescaling"):
        assert old not in table, old


def test_plan_show_and_objective_meaning(cli, trace_file, tmp_path):
    r = cli("plan", "--trace", trace_file, "--planner", "herd", "--gpus", "2", "-o", tmp_path / "p.parquet")
    assert r.code == 0, r.err
    assert "highs (python-mip)" in r.out and "burst tolerance" in r.out
    r = cli("plan", "show", tmp_path / "p.parquet")
    assert r.code == 0, r.err
    assert "herd" in r.out and "burst tolerance" in r.out and "groups" in r.out
    assert_user_error(cli("plan", "shw", tmp_path / "p.parquet"), "shw")
    assert_user_error(cli("plan", "show", tmp_path / "none.parquet"), "none.parquet")
