"""``shepherd report A B … --baseline P`` (issue 29): runs compared on shared axes, paired per-seed ratios,
intervals clipped to each metric's domain, the load axis in req/s, the title kept on synthetic traces.

The runs are written directly (a sweep's ``sweep.json`` + ``results.parquet``, a capacity grid's
``capacity.json`` + ``results.parquet``) with known numbers, so every test is a matter of seconds; the
sweep and capacity commands that write them for real are tested in test_sweep.py and test_capacity_grid.py.
"""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.experiments import confidence as ci

from conftest import assert_user_error

LOADS, SEEDS = (1.0, 2.0, 4.0), (0, 1, 2)
#: a policy's goodput at (load, seed): clockwork's times a fixed factor, so every paired ratio is known
FACTOR = {"clockwork": 1.0, "flex": 1.5, "nexus": 0.8}


def goodput(policy: str, load: float, seed: int) -> float:
    return FACTOR[policy] * 100.0 * load * (1.0 + 0.2 * seed)  # the seeds differ by far more than the ratio


def write_sweep(folder, name, policies, synthetic=True, rate=40.0, extra=None, metrics=None):
    """A sweep's folder with known numbers; ``metrics``: keep only these metric columns (fewer panels to draw)."""
    rows = []
    for policy in policies:
        for load in LOADS:
            for seed in SEEDS:
                gp = goodput(policy, load, seed)
                requests = int(rate * load * 60 * (1.0 + 0.01 * seed))
                rows.append({"sweep": name, "policy": policy, "trace": "maf-synthetic", "load": load, "slo_ms": None,
                             "seed": seed, "gpus": 2, "cluster": "2 GPUs", "slo_attainment": gp / 1e4,
                             "goodput_rps": gp, "p99_latency_ms": 5.0 + 40.0 * seed, "utilization": 0.3 + 0.3 * seed,
                             "drop_rate": 0.0, "mean_batch": 1.0 + seed, "requests": requests, "duration_s": 60.0,
                             "synthetic": synthetic, **(extra or {})})
    folder.mkdir(parents=True)
    frame = pl.DataFrame(rows, schema_overrides={"slo_ms": pl.Float64})
    if metrics is not None:
        frame = frame.drop(m for m in ("slo_attainment", "goodput_rps", "p99_latency_ms", "utilization", "drop_rate",
                                       "mean_batch") if m not in metrics)
    write_artifact(frame, folder / "results.parquet", "results", make_provenance({"name": name}, seed=None))
    (folder / "sweep.json").write_text(json.dumps({"config": {"name": name, "policies": [{"label": p} for p in policies],
                                                              "trace": {"name": "maf-synthetic"}},
                                                   "swept": ["load", "seed"]}))
    return folder


def write_capacity(folder, name, policies):
    rows = []
    for policy in policies:
        for slo in (100.0, 200.0):
            for seed in SEEDS:
                cap = FACTOR[policy] * slo / 50.0 + 0.1 * seed
                rows.append({"policy": policy, "trace": "maf-synthetic", "target": "SLO attainment ≥ 99 %",
                             "target_spec": "attainment=0.99", "slo_ms": slo, "seed": seed, "capacity": cap,
                             "capacity_rps": cap * 30.0, "bracket_hi": cap * 1.02, "native_rps": 30.0,
                             "simulations": 5, "binding_model": "ResNet50", "binding_attainment": 0.995,
                             "monotone": True, "warning": None, "synthetic": True})
    folder.mkdir(parents=True)
    frame = pl.DataFrame(rows, schema_overrides={"warning": pl.String})
    write_artifact(frame, folder / "results.parquet", "results", make_provenance({"name": name}, seed=None))
    (folder / "capacity.json").write_text(json.dumps({"config": {"name": name}, "swept": ["slo_ms", "seed"]}))
    return folder


# --------------------------------------------------------------------------- intervals in the domain

bounded = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(metric=st.sampled_from(sorted(ci.DOMAINS) + ["goodput_rps_ratio", "p50_latency_ms", "capacity_rps"]),
       data=st.data())
def test_intervals_never_leave_the_metrics_domain(metric, data):
    lo, hi = ci.domain(metric)
    values = data.draw(st.lists(st.floats(min_value=max(lo, -1e6), max_value=min(hi, 1e6), allow_nan=False),
                                min_size=1, max_size=8))
    mean, low, high = ci.interval(values, metric)
    assert lo <= low <= high <= hi
    assert low <= mean + 1e-9 * max(1.0, abs(mean)) and mean - 1e-9 * max(1.0, abs(mean)) <= high
    # the table's text: either the symmetric band (inside the domain) or the clipped one, never below its floor
    text = ci.fmt_interval(mean, ci.half_width(values), metric)
    if "[" in text:
        low_s, high_s = text.split("[")[1].rstrip("]").split(", ")
        assert lo <= float(low_s.replace(",", "")) and float(high_s.replace(",", "")) <= hi
    else:
        m, hw = (float(t.replace(",", "")) for t in text.split(" ± "))  # printed to 4 and 2 digits: allow their rounding
        slack = 0.05 * hw + 1e-3 * abs(m)
        assert m - hw >= lo - slack and m + hw <= hi + slack
    # the figure's band: the errorbar seaborn is given
    from shepherd.experiments.plotting import band

    assert band(metric)(values) == (low, high)


@given(bounds=st.tuples(bounded, bounded), metric=st.sampled_from(sorted(ci.DOMAINS)))
def test_clip_stays_in_the_domain(bounds, metric):
    lo, hi = ci.domain(metric)
    low, high = ci.clip(min(bounds), max(bounds), metric)
    assert lo <= low <= high <= hi


def test_mean_ci_tabulates_the_clipped_band():
    frame = pl.DataFrame({"g": ["a", "a"], "p99_latency_ms": [1.0, 100.0], "utilization": [0.1, 0.99]})
    lat = ci.mean_ci(frame, ["g"], "p99_latency_ms").row(0, named=True)
    assert lat["mean"] - lat["half_width"] < 0 and lat["low"] == 0.0 and lat["high"] > 100
    util = ci.mean_ci(frame, ["g"], "utilization").row(0, named=True)
    assert util["mean"] + util["half_width"] > 1 and util["high"] == 1.0
    assert ci.fmt_interval(50.5, 629.0, "p99_latency_ms") == "50.5 [0, 679.5]"
    assert ci.fmt_interval(0.5, 0.1, "utilization") == "0.5 ± 0.1"
    assert ci.domain("no_such_metric") == (-math.inf, math.inf)


# --------------------------------------------------------------------------- several runs, a baseline

def test_two_sweeps_compared_with_paired_ratios(cli, tmp_path):
    three = ["slo_attainment", "goodput_rps", "p99_latency_ms"]
    a = write_sweep(tmp_path / "a", "a", ["flex", "clockwork"], metrics=three)
    b = write_sweep(tmp_path / "b", "b", ["nexus"], metrics=three)
    r = cli("report", a, b, "--baseline", "clockwork", "-o", tmp_path / "res")
    assert r.code == 0, r.err
    out = tmp_path / "res" / "comparisons" / "a-vs-b"
    report = (out / "REPORT.md").read_text()
    for fig in ("a-vs-b-comparison", "a-vs-b-vs-clockwork"):
        assert (out / "figures" / f"{fig}.png").stat().st_size > 10_000 and f"figures/{fig}.png" in report
    # the comparison table: a row per policy and load, offered req/s beside the load
    assert "| a | flex | 1 | 40 |" in report and "| a | flex | 4 | 162 |" in report and "| b | nexus | 4 |" in report \
        and "offered (req/s)" in report
    # paired ratios: flex ÷ clockwork is 1.5 at every load and seed (the seeds' spread cancels), nexus (from the
    # other run, paired with a's clockwork: b has none) is 0.8
    assert "## Paired ratios to clockwork" in report
    assert "| a | flex | 2 | 1.5 ± " in report and "| b | nexus | 4 | 0.8 ± " in report
    assert "| a | flex | 9↑ 0↓ of 9 | 9↑ 0↓ of 9 |" in report and "| b | nexus | 0↑ 9↓ of 9 | 0↑ 9↓ of 9 |" in report
    # a latency band with a wide spread is clipped at 0, never negative
    assert " [0, " in report and "± -" not in report
    # the same inputs give the same bytes
    before = {p.name: p.read_bytes() for p in (out / "figures").iterdir()} | {"R": report.encode()}
    assert cli("report", a, b, "--baseline", "clockwork", "-o", tmp_path / "res").code == 0
    after = {p.name: p.read_bytes() for p in (out / "figures").iterdir()} | {"R": (out / "REPORT.md").read_bytes()}
    assert after == before


def test_a_policy_in_both_runs_is_told_apart_and_paired_within_its_run(cli, tmp_path):
    a = write_sweep(tmp_path / "a", "a", ["flex", "clockwork"], metrics=["goodput_rps"])
    b = write_sweep(tmp_path / "b", "b", ["flex", "clockwork"], metrics=["goodput_rps"])
    r = cli("report", a, b, "--baseline", "clockwork", "-o", tmp_path / "res")
    assert r.code == 0, r.err
    report = (tmp_path / "res" / "comparisons" / "a-vs-b" / "REPORT.md").read_text()
    assert "| a | a · flex | 1 |" in report and "| b | b · clockwork | 1 |" in report
    assert "| a | a · flex | 9↑ 0↓ of 9 |" in report and "| b | b · flex | 9↑ 0↓ of 9 |" in report


def test_one_sweep_keeps_its_report_and_gains_the_ratio_section(cli, tmp_path):
    a = write_sweep(tmp_path / "a", "a", ["flex", "clockwork", "nexus"], metrics=["slo_attainment", "goodput_rps"])
    assert cli("report", a).code == 0
    plain = (a / "REPORT.md").read_text()
    assert "Paired ratios" not in plain and "# Sweep a" in plain
    r = cli("report", a, "--baseline", "flex")
    assert r.code == 0, r.err
    with_ratios = (a / "REPORT.md").read_text()
    assert with_ratios.startswith(plain) and "## Paired ratios to flex" in with_ratios
    assert "| clockwork | 1 | 0.6667 ± " in with_ratios and (a / "figures" / "a-vs-flex.png").is_file()


def test_one_capacity_grid_with_a_baseline(cli, tmp_path):
    cap = write_capacity(tmp_path / "cap", "cap", ["clockwork", "flex"])
    assert cli("report", cap).code == 0
    plain = (cap / "REPORT.md").read_text()
    assert "binding model" in plain and (cap / "figures" / "cap-capacity.png").is_file()
    r = cli("report", cap, "--baseline", "clockwork")
    assert r.code == 0, r.err
    report = (cap / "REPORT.md").read_text()
    assert report.startswith(plain) and "## Paired ratios to clockwork" in report
    assert "| flex | 100 |" in report and "6↑ 0↓ of 6" in report


def test_refusals_are_one_line(cli, tmp_path):
    a = write_sweep(tmp_path / "a", "a", ["flex", "clockwork"])
    cap = write_capacity(tmp_path / "cap", "cap", ["clockwork"])
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "sweep.json").write_text(json.dumps({"config": {"name": "bare"}, "swept": []}))
    write_artifact(pl.DataFrame({"policy": ["flex"], "goodput_rps": [1.0]}), bare / "results.parquet", "results",
                   make_provenance({}, seed=None))
    assert_user_error(cli("report", a, "--baseline", "symphony"), "symphony", "clockwork, flex")
    assert_user_error(cli("report", a, cap), "share no metric")
    assert_user_error(cli("report", a, bare), "share no axis")
    assert_user_error(cli("report", a, tmp_path / "nothing"), "not a folder")
    assert_user_error(cli("report", "shepherd", "--baseline", "clockwork"), "--baseline compares runs")
    assert not (a / "REPORT.md").exists()


# --------------------------------------------------------------------------- load in req/s; titles

def test_offered_rate_is_given_only_where_one_trace_stands_behind_each_load(tmp_path):
    from shepherd.experiments.sweep_report import offered_rates

    frame = pl.DataFrame({"load": [1.0, 1.0, 2.0, 2.0], "seed": [0, 1, 0, 1], "requests": [600, 660, 1200, 1320],
                          "duration_s": [60.0] * 4})
    assert offered_rates(frame, "load") == {1.0: 10.5, 2.0: 21.0}  # seeds differ: their mean
    assert offered_rates(frame, "slo_ms") is None
    other = frame.with_columns(seed=pl.lit(0), requests=pl.Series([600, 900, 1200, 1800]))  # two traces, one seed
    assert offered_rates(other, "load") is None


def test_a_titled_figure_keeps_its_title_on_a_synthetic_trace():
    from shepherd.experiments import plotting

    fig, _ = plotting.figure()
    fig.suptitle("my-study: maf-synthetic on 2 GPUs")
    plotting.synthetic_caption(fig, True)
    assert fig.get_suptitle() == "my-study: maf-synthetic on 2 GPUs"
    assert "synthetic" in fig.get_supxlabel()
    bare, _ = plotting.figure()
    plotting.synthetic_caption(bare, True)  # the paper figures without a title: the caption on top, as before
    assert "synthetic" in bare.get_suptitle()


@pytest.mark.parametrize("metric", ["p99_latency_ms", "utilization"])
def test_the_sweep_table_never_prints_a_band_outside_the_domain(metric):
    from shepherd.experiments.sweep_report import _table

    data = pl.DataFrame({"policy": ["flex"] * 3, "load": [1.0] * 3, metric: [0.01, 0.5, 0.99]})
    table = _table(data, ["policy", "load"], [metric])
    assert "[0, " in table if metric == "p99_latency_ms" else ", 1]" in table


def test_runs_differing_by_cluster_size_share_their_policies_labels(tmp_path):
    from shepherd.experiments.compare import combine, load_run, paired_ratios

    a = write_sweep(tmp_path / "a", "a", ["flex", "clockwork"])
    b = write_sweep(tmp_path / "b", "b", ["flex", "clockwork"], extra={"gpus": 16, "cluster": "16 GPUs"})
    comb = combine([load_run(a), load_run(b)])
    # gpus is the style; cluster only renames it (dropped); no run prefix: the runs never meet at one point
    assert (comb.x, comb.style, comb.varying) == ("load", "gpus", ["load", "gpus", "seed"])
    assert sorted(set(comb.frame["label"])) == ["clockwork", "flex"]
    ratios = paired_ratios(comb, "clockwork").filter(pl.col("metric") == "goodput_rps")
    assert ratios.height == 18 and ratios["ratio"].round(9).unique().to_list() == [1.5]


def test_two_simulate_outputs_compared(cli, tmp_path):
    from shepherd.core.runinfo import with_run_columns

    folders = []
    for policy, good in (("flex", 90), ("clockwork", 60)):
        summary = pl.DataFrame({"policy": [policy], "requests": [100], "good": [good], "goodput_rps": [good / 10.0],
                                "slo_attainment": [good / 100.0], "duration_s": [10.0]})
        summary = with_run_columns(summary, policy=policy, trace="maf-synthetic", load=1.0, slo_ms=None, seed=0,
                                   gpus=2, plan=None, config={})
        folder = tmp_path / policy
        folder.mkdir()
        write_artifact(summary, folder / "summary.parquet", "summary", make_provenance({}, seed=0))
        folders.append(folder)
    r = cli("report", *folders, "--baseline", "clockwork", "-o", tmp_path / "res")
    assert r.code == 0, r.err
    report = (tmp_path / "res" / "comparisons" / "flex-vs-clockwork" / "REPORT.md").read_text()
    assert "| flex | 1.5 (1 seed) | 1.5 (1 seed) |" in report and "| flex | 1↑ 0↓ of 1 | 1↑ 0↓ of 1 |" in report
    assert "± 0" not in report


def test_a_policy_option_axis_labels_its_lines_and_pairs_with_the_baseline(tmp_path):
    from shepherd.experiments.compare import _single, load_run, paired_ratios

    folder = write_sweep(tmp_path / "a", "a", ["clockwork"], metrics=["goodput_rps"])
    frame = pl.read_parquet(folder / "results.parquet").with_columns(pl.lit(None, pl.Float64).alias("option.lam"))
    flex = [frame.with_columns(policy=pl.lit("flex"), goodput_rps=pl.col("goodput_rps") * lam,
                               **{"option.lam": pl.lit(lam)}) for lam in (2.0, 3.0)]
    write_artifact(pl.concat([frame, *flex]), folder / "results.parquet", "results", make_provenance({}, seed=None))
    comb = _single(load_run(folder))
    assert comb.x == "load" and "option.lam" not in comb.varying
    assert sorted(set(comb.frame["label"])) == ["clockwork", "flex option.lam=2.0", "flex option.lam=3.0"]
    ratios = paired_ratios(comb, "clockwork")
    by = ratios.group_by("label").agg(pl.col("ratio").mean().round(9)).sort("label")
    assert by.rows() == [("flex option.lam=2.0", 2.0), ("flex option.lam=3.0", 3.0)]


def test_paper_headlines_clip_a_ratio_interval_at_zero(tmp_path):
    from shepherd.experiments.base import Headline, Section
    from shepherd.experiments.report import render

    sec = Section("fig", [])
    sec.headlines = [Headline("Shepherd / Clockwork", 2.5, 0.4, 0.9, "×"), Headline("loss", 10.0, 1.0, 5.0, "%"),
                     Headline("goodput", None, 900.0, 50.0, "req/s")]
    text = render([sec], tmp_path)
    assert "| 0.4 [0, 1.3] ×" in text  # a ratio is never below 0
    assert "| 1 ± 5 %" in text and "| 900 ± 50 req/s" in text  # a change may be negative; a band inside: ±


# --------------------------------------------------------------------------- issue 41: comparisons never silently wrong

def test_two_sweeps_differing_only_by_slo_are_one_row_per_run_policy_and_point(cli, tmp_path):
    from shepherd.experiments.compare import combine, load_run

    two = ["slo_attainment", "goodput_rps"]
    a = write_sweep(tmp_path / "a", "a", ["flex", "clockwork"], metrics=two)                    # the trace's SLOs
    b = write_sweep(tmp_path / "b", "b", ["flex", "clockwork"], metrics=two, extra={"slo_ms": 80.0})
    r = cli("report", a, b, "--baseline", "clockwork", "-o", tmp_path / "res")
    assert r.code == 0, r.err
    out = tmp_path / "res" / "comparisons" / "a-vs-b"
    report = (out / "REPORT.md").read_text()
    assert "None" not in report
    table = report.split("## Paired ratios")[0]
    rows = [line for line in table.splitlines() if line.startswith(("| a |", "| b |"))]
    assert len(rows) == 2 * 2 * 3 and len(set(r.split("|")[1:5].__repr__() for r in rows)) == 12  # run·policy·load
    assert "| a | flex | 1 | trace's own | 40 | 0.018 ± " in report and "| b | flex | 1 | 80 | 40 | 0.018 ± " in report
    # every row has both metrics (a row is never split into one row per metric)
    assert not any("| — |" in r for r in rows)
    # ratios are computed for both runs, not "—" for the run that kept the trace's SLO
    assert "| a | flex | 1 | trace's own | 1.5 ± 0 | 1.5 ± 0 |" in report and "| b | flex | 4 | 80 | 1.5 ± 0" in report
    assert "| a | flex | 9↑ 0↓ of 9 |" in report and "| b | flex | 9↑ 0↓ of 9 |" in report
    assert "**Inputs differ — SLO:** a: trace's own; b: 80 ms." in report
    # both runs in the figure: the style axis is the SLO and no drawn row lacks it
    comb = combine([load_run(a), load_run(b)])
    assert comb.style == "slo_ms" and comb.frame["slo_ms"].null_count() == 0
    assert sorted(set(comb.frame["slo_ms"])) == ["80", "trace's own"]


def test_runs_on_different_traces_get_their_own_offered_rate_and_a_notice(cli, tmp_path):
    a = write_sweep(tmp_path / "a", "a", ["flex"], metrics=["goodput_rps"], rate=987.8)
    b = write_sweep(tmp_path / "b", "b", ["clockwork"], metrics=["goodput_rps"], rate=39.1,
                    extra={"trace": "maf2019-sample", "cluster": "4 GPUs", "gpus": 4})
    r = cli("report", a, b, "-o", tmp_path / "res")
    assert r.code == 0, r.err
    report = (tmp_path / "res" / "comparisons" / "a-vs-b" / "REPORT.md").read_text()
    assert "| a | flex | 1 | 2 | 998 |" in report and "| b | clockwork | 1 | 4 | 39 |" in report  # never their mean
    assert "**Inputs differ — trace:** a: maf-synthetic; b: maf2019-sample." in report
    assert "**Inputs differ — cluster:** a: 2 GPUs; b: 4 GPUs." in report
    assert "Inputs differ — SLO" not in report and "Inputs differ — profile" not in report


def test_shared_tick_rates_only_where_every_run_offers_the_same():
    from shepherd.experiments.sweep_report import offered_by_run, offered_rates

    frame = pl.DataFrame({"run": ["a", "a", "b", "b"], "load": [1.0, 2.0, 1.0, 2.0], "seed": [0, 0, 1, 1],
                          "requests": [59_268, 118_536, 2_346, 4_692], "duration_s": [60.0] * 4})
    assert offered_rates(frame, "load") is None
    assert offered_by_run(frame, "load") == {("a", 1.0): 987.8, ("a", 2.0): 1975.6, ("b", 1.0): 39.1, ("b", 2.0): 78.2}


def test_numbers_for_people_and_one_seed():
    assert ci.fmt_interval(1138.0, 120.4) == "1,138 ± 120"
    assert ci.fmt_interval(480.0, 201.0) == "480 ± 200"
    assert ci.fmt_interval(1.0, 0.0, n=1) == "1 (1 seed)"
    assert ci.fmt_interval(1.5, 3.9e-16) == "1.5 ± 0"


def test_an_integer_axis_has_integer_ticks():
    from shepherd.experiments import plotting

    fig, axes = plotting.figure()
    data = pl.DataFrame({"gpus": [1, 2, 1, 2], "goodput_rps": [1.0, 2.0, 1.5, 2.5], "policy": ["a"] * 4})
    plotting.lines(axes[0][0], data, x="gpus", y="goodput_rps", hue="policy")
    ticks = [t for t in axes[0][0].get_xticks() if axes[0][0].get_xlim()[0] <= t <= axes[0][0].get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
