"""Accordion experiments: the measures behind the REPORT rows, the tolerance column, the measured-profile figures."""

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from shepherd.core.accordion.configs import builtin_layers
from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.core.engine import simulate
from shepherd.core.errors import UserError
from shepherd.experiments.accordion import common as c
from shepherd.experiments.accordion import fig01_motivation as f1
from shepherd.experiments.accordion import measured as m
from shepherd.experiments.accordion import stream_rows as rows_mod
from shepherd.experiments.accordion.fig03_predictor import EXPERIMENT as FIG3
from shepherd.experiments.base import Headline, Scale, Section
from shepherd.experiments.report import render


def test_full_share_is_exact_time_with_every_ep_held():
    # 2 EPs: both held on [5, 10) of a 20-unit horizon; a resize at 7 (end + start at one instant) is no gap
    s, e = np.array([0, 5, 7]), np.array([10, 7, 15])
    assert c.full_share(s, e, 2, 20) == pytest.approx(5 / 20)
    assert c.full_share(s, e, 3, 20) == 0.0
    assert c.active_max(s, e) == 2


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 50)), min_size=1, max_size=20), st.integers(1, 4))
def test_full_share_matches_a_unit_grid(segs, eps):
    s = np.array([a for a, _ in segs])
    e = s + np.array([d for _, d in segs])
    held = np.zeros(160, int)
    for a, b in zip(s, e):
        held[a:b] += 1
    assert c.full_share(s, e, eps, 160) == pytest.approx((held >= eps).mean())


def test_share_faster_pairs_queries_and_skips_unfinished():
    on = pl.DataFrame({"request": [0, 1, 2, 3], "latency_s": [1.0, 2.0, 3.0, None]})
    off = pl.DataFrame({"request": [0, 1, 2, 3], "latency_s": [2.0, 2.0, 1.0, 5.0]})
    share, n = c.share_faster(on, off)
    assert n == 3 and share == pytest.approx(1 / 3)


def test_fig3_per_stream_share():
    rows = []
    for w, lats in ((1.0, [1.0, 1.0, 4.0]), (0.0, [2.0, 1.0, 3.0])):
        rows += [{"stream": 2, "seed": 0, "window": w, "request": i, "latency_s": x} for i, x in enumerate(lats)]
    per = FIG3.per_stream(pl.DataFrame(rows))
    assert per["share"][0] == pytest.approx(1 / 3) and per["compared"][0] == 3


def test_tolerance_column_and_verdict():
    assert c.tolerance(4.0, "×") == pytest.approx(1.0) and c.tolerance(70.0, "%") == pytest.approx(17.5)
    assert c.tolerance(0.9, "%") == 2.0
    near = Headline("a", 4.0, 4.9, unit="×", tolerance=1.0)
    far = Headline("b", 4.0, 5.1, unit="×", tolerance=1.0)
    assert near.verdict.state == "holds" and far.verdict.state == "fails"
    assert Headline("c", None, 1.0).verdict.state == "not judged"
    text = render([Section("s", headlines=[near, far])], pytest.importorskip("pathlib").Path("."))
    assert "| what | paper | ours | per seed | tolerance | verdict |" in text
    assert "| b | 4 × | 5.1 × | — | ± 1 × | **fails** (5.1 above [3, 5]) |" in text


def test_accordion_ratio_rows_are_effect_based_and_only_2_percent_is_one_sided():
    rows = {what: rule for what, _, _, _, rule in rows_mod.paper_rows()}
    mod = next(r for w, r in rows.items() if "4.2×" in w and "late only" in w)
    assert mod.low == pytest.approx(1 + 3.2 * 0.75) and mod.high == pytest.approx(1 + 3.2 * 1.25)
    only = [r for w, r in rows.items() if "approximately only 2%" in w]
    assert only and all(r.low == float("-inf") for r in only)
    assert any("stream 1" in w and "perform well" in w for w in rows)
    # the seeds for the Moderate late-only row: 7.92 / ∞ / 2.22 is not a pass
    assert Headline.of_seeds("m", 4.2, [7.92, float("inf"), 2.22], "×", rule=mod).verdict.state == "inconclusive"


@pytest.mark.parametrize("policy", list(f1.SYSTEMS))
def test_fig1_violations_never_beat_the_capacity_bound(policy):
    layers = builtin_layers()
    for seed in range(2):
        t = f1.trace(seed)
        bound = f1.violation_bound(t, layers)
        # Table 1 per instance: a 10-instance VGG16 query costs ≥ 6.9 EP-s; the last deadline is < 30 s
        span = int(t["deadline_us"].max() - t["arrival_us"].min())
        assert bound == pytest.approx(1 - (8 * span // 6_900_000) / 100)
        res = simulate(t, None, policy, {"eps": 8, "window": 0.0}, artifacts={"layer_profiles": layers}, seed=seed)
        assert (res.requests_frame()["outcome"] != "served").mean() >= bound - 1e-12


def fake_measured(tmp_path, cpu="Test CPU 9000"):
    """A measured-profile cache without torch: the built-in layers at 0.8×, labelled as measured here."""
    frame = builtin_layers().with_columns(pl.col("latency_ms") * 0.8, pl.lit("cpu-1t").alias("hardware"))
    env = {"device": "cpu", "cpu": cpu, "threads": 1, "torch": "test"}
    write_artifact(frame, tmp_path / m.CACHE, "layer_profiles", make_provenance({"environment": env}, None, []))
    return frame


def test_measured_profile_is_read_from_the_cache_not_remeasured(tmp_path, monkeypatch):
    frame = fake_measured(tmp_path)

    def no_measuring(*a, **k):
        raise AssertionError("re-measured although a cached profile exists")
    monkeypatch.setattr("shepherd.core.measure.artifact.measure", no_measuring)
    got, cpu = m.measure_or_read(tmp_path)
    assert cpu == "Test CPU 9000" and got.equals(frame)
    back = m.frame_of(m.as_param(got), cpu)
    for model in m.MODELS:
        assert back.filter(pl.col("model") == model)["latency_ms"].to_list() == pytest.approx(
            frame.filter(pl.col("model") == model).sort("layer")["latency_ms"].to_list())


def test_measured_experiment_cells_carry_the_profile_and_run_deterministically(tmp_path):
    fake_measured(tmp_path)
    exp = f1.Fig1Measured()
    assert exp.cells(Scale(quick=True, seeds=1)) == []  # not prepared: no grid
    assert exp.prepare(tmp_path, Scale(quick=True)) is None
    cells = exp.cells(Scale(quick=True, seeds=1))
    assert len(cells) == len(f1.Fig1().cells(Scale(quick=True, seeds=1)))
    p = cells[0].params
    assert p["cpu"] == "Test CPU 9000" and set(p["layers"]) == set(m.MODELS)
    a, b = exp.run_cell(p), exp.run_cell(p)
    assert a.equals(b)
    assert a["layers"][0].startswith("sha256:") and "VGG16" in a["speedups"][0]
    # the window and SLO scale with the measured VGG16 1-EP latency (0.8 × Table 1)
    assert a["slo_s"][0] == pytest.approx(8.0)
    fake_measured(tmp_path / "other", cpu="Other CPU")
    other = f1.Fig1Measured()
    other.prepare(tmp_path / "other", Scale(quick=True))
    assert other.cells(Scale(quick=True, seeds=1))[0].key() != cells[0].key()  # same profile values, other CPU


def test_measured_experiment_skips_with_a_line_without_torch(tmp_path, monkeypatch):
    def no_torch(*a, **k):
        from shepherd.core.measure import INSTALL_HINT
        raise UserError(INSTALL_HINT)
    monkeypatch.setattr("shepherd.core.measure.artifact.measure", no_torch)
    exp = f1.Fig1Measured()
    line = exp.prepare(tmp_path, Scale(quick=True))
    assert "skipped" in line and "torch" in line and exp.cells(Scale(quick=True)) == []


def test_reproduce_and_report_fig1_on_a_cached_measured_profile(tmp_path, cli):
    fake_measured(tmp_path)
    r = cli("reproduce", "accordion-fig1-measured", "--quick", "-j", "1", "-o", tmp_path)
    assert r.code == 0, r.err
    report = (tmp_path / "REPORT.md").read_text()
    assert "measured on Test CPU 9000" in report and "| tolerance | verdict |" in report
    assert (tmp_path / "figures" / "accordion-fig1-measured.png").exists()


@pytest.mark.parametrize("share", [0.0, 0.12, 0.5])
def test_fig1_max_query_cost_is_where_the_capacity_bound_allows_the_share(share):
    t = f1.trace(0)
    span = int(t["deadline_us"].max() - t["arrival_us"].min())
    cost = f1.max_query_cost(t, share)
    on_time = lambda c: min(t.height, int(8 * span / c + 1e-9))  # noqa: E731 - the bound's count at cost c
    assert 1 - on_time(cost) / t.height <= share + 1e-12
    assert 1 - on_time(cost * 1.05) / t.height > share  # a dearer query no longer fits that share


def test_fig1_reads_table1_both_ways():
    cells = f1.Fig1().cells(Scale(quick=True, seeds=1))
    assert {cl.params["reading"] for cl in cells} == set(f1.READINGS)
    p = next(cl.params for cl in cells if cl.params["reading"] == "batch" and cl.params["policy"] == "accordion")
    row = f1.Fig1().run_cell(p).row(0, named=True)
    assert row["query_1ep_s"] == pytest.approx(0.69) and row["violations"] == 0.0


def test_every_judged_stream_row_quotes_its_section():
    from shepherd.experiments.accordion import stream_rows as sr
    for what, paper, unit, _, rule in sr.paper_rows():
        assert what.startswith(("§", "abstract")) and "'" in what and paper is not None, what
        assert rule is not None and rule.low <= paper <= rule.high, what


def test_per_seed_rows_are_mean_and_half_width_over_seeds():
    from shepherd.experiments.accordion import stream_rows as sr
    from shepherd.experiments.confidence import half_width
    runs = pl.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "policy": ["accordion", "fastest"] * 3,
                         "finish_s": [10.0, 20.0, 10.0, 10.0, 10.0, 30.0]})
    m, hw = sr.per_seed(lambda r, n: sr.mean(r, "finish_s", policy="fastest") / sr.mean(r, "finish_s", policy="accordion"),
                        runs, runs)
    assert m == pytest.approx(2.0) and hw == pytest.approx(half_width([2.0, 1.0, 3.0]))


def test_violations_are_counted_both_ways():
    from shepherd.traces.accordion import stream
    t = stream(3, "strict", duration_s=60.0, seed=1)
    res = simulate(t, None, "accordion", {}, artifacts={"layer_profiles": builtin_layers()}, seed=1)
    row = c.summarise(res, t, eps=64, extra={}).row(0, named=True)
    assert row["violations"] == pytest.approx(row["violations_late"] + row["dropped"])


@pytest.mark.parametrize("xs,ys,level,want", [([1, 2, 4], [90, 50, 10], 30, 3.0), ([1, 2], [5, 6], 30, None),
                                              ([1, 2], [30, 40], 30, 1.0)])
def test_map_crossing(xs, ys, level, want):
    from shepherd.experiments.accordion.maps import crossing
    got = crossing(xs, ys, level)
    assert got == (None if want is None else pytest.approx(want))


def test_fig1_map_cost_scales_the_window_like_a_cheaper_query():
    from shepherd.experiments.accordion import maps
    exp = maps.MapFig1()
    cells = exp.cells(Scale(quick=True, seeds=1))
    assert len(cells) == len(maps.QUERY_COST_S) * 3 * 3  # at least 3 seeds at quick scale
    dear = exp.run_cell({"policy": "slo-conforming", "seed": 0, "cost_s": 6.9}).row(0, named=True)
    cheap = exp.run_cell({"policy": "slo-conforming", "seed": 0, "cost_s": 0.69}).row(0, named=True)
    assert dear["slo_s"] == pytest.approx(10.0) and cheap["slo_s"] == pytest.approx(100.0)
    assert cheap["violations"] <= dear["violations"] and dear["violations"] >= dear["bound"] - 1e-12


def test_stream_load_scale_and_peak_floor():
    from shepherd.traces.accordion import rate_shape, stream
    base, double = stream(2, duration_s=120.0, seed=0), stream(2, duration_s=120.0, seed=0, load_scale=2.0)
    assert 1.6 < double.height / base.height < 2.4
    flat, peaky = rate_shape(2, 120.0, floor=100.0), rate_shape(2, 120.0, floor=0.0)
    assert flat.max() / flat.min() < 1.02 < peaky.max() / peaky.min()
    with pytest.raises(UserError):
        stream(2, load_scale=0.0)


def test_fig3_map_compares_each_window_with_the_predictor_off():
    from shepherd.experiments.accordion import maps
    rows = []
    for w, lats, drop in ((0.0, [2.0, 1.0, 3.0], 0.0), (0.5, [1.0, 1.0, 2.0], 0.2), (1.0, [2.0, 1.0, 2.5], 0.1)):
        rows += [{"stream": 2, "seed": 0, "window": w, "request": i, "latency_s": x, "dropped": drop}
                 for i, x in enumerate(lats)]
    tab = maps.MapFig3().table(pl.DataFrame(rows)).sort("window")
    assert tab["window"].to_list() == [0.5, 1.0]
    assert tab["share"].to_list() == pytest.approx([200 / 3, 100 / 3]) and tab["dropped"].to_list() == [20.0, 10.0]


def test_occupancy_map_cells_vary_load_and_shape_only():
    from shepherd.experiments.accordion import maps
    cells = maps.MapOccupancy().cells(Scale(quick=True, seeds=1))
    assert len(cells) == 2 * 2 * len(maps.LOADS) * len(maps.FLOORS) * 3
    assert {cl.params["target"] for cl in cells} == {"moderate"} and {cl.params["stream"] for cl in cells} == {3, 6}


def test_fig3_map_runs_and_notes_every_target():
    from shepherd.experiments.accordion import maps
    cells = maps.MapFig3().cells(Scale(quick=True, seeds=1))
    assert {cl.params["target"] for cl in cells} == {"moderate", "strict", "relaxed"}
    low = pl.DataFrame({"window": [0.1, 1.0], "share": [60.0, 40.0], "dropped": [20.0, 1.0]})
    high = pl.DataFrame({"window": [0.1, 1.0], "share": [83.5, 40.0], "dropped": [49.0, 1.0]})
    assert "no window in the map reaches" in maps.fig3_note("moderate", low) and "moderate target" in \
        maps.fig3_note("moderate", low)
    note = maps.fig3_note("strict", high)  # the Strict: 83.5 % at 0.1 × SLO, 49 % dropped
    assert "reached near window" in note and "strict target" in note and "83.5 %" in note
