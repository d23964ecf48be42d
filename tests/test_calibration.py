"""Calibration under serving conditions (issue 40): the summary of a calibration run, the execution model and
decision delay the simulator takes from it, drift, the CLI — and that calibration never reads a validated
run's trace. Mechanics only: no timing is asserted."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from shepherd.core import calibration as cal
from tests.conftest import assert_user_error


def _raw(seed: int = 0) -> dict:
    """A calibration run as :func:`run_calibration` returns it: sizes 1..3, 4 batches each, half after idle."""
    size = np.array([1, 2, 3] * 4, np.int32)
    after_idle = np.array([False] * 6 + [True] * 6)
    exec_us = np.array([10_000, 8_000, 12_000, 11_000, 9_000, 13_000, 9_500, 7_500, 11_500, 9_800, 7_700, 11_900])
    return {"size": size, "after_idle": after_idle, "gap_us": np.where(after_idle, 15_000, 900),
            "exec_us": exec_us, "cpu_us": exec_us - 100, "dispatch_us": np.full(12, 300), "report_us": np.full(12, 200),
            "hop_us": np.array([100, 300]), "trace_rate_rps": 100.0, "trace_s": 3.0, "trace_requests": 2,
            "worker_core": 1, "engine_core": 0, "shared_cores": False, "warm_estimate_ms": [10.0, 8.0, 12.0]}


def test_summary_keeps_every_size_its_mean_spread_and_samples_by_condition():
    frame, meta = cal.summarize("M", _raw(), layers=10, seed=5)
    one = frame.filter(pl.col("batch") == 1).row(0, named=True)
    assert one["latency_ms"] == pytest.approx(np.mean([10.0, 11.0, 9.5, 9.8]))
    assert one["samples_ms"] == [10.0, 11.0] and one["idle_samples_ms"] == [9.5, 9.8]
    assert one["median_ms"] == pytest.approx(np.median([10.0, 11.0, 9.5, 9.8]))
    assert one["cv"] == pytest.approx(np.std([10.0, 11.0, 9.5, 9.8], ddof=1) / one["latency_ms"])
    assert frame["batch"].to_list() == [1, 2, 3]  # every size measured, none interpolated
    assert frame["exit_points"].unique().to_list() == [9]  # 10 layers: 9 boundaries a live worker stops at
    assert meta["non_monotone"] == [2]  # ℓ(2) < ℓ(1) is reported
    assert meta["decision_delay_ms"]["mean"] == pytest.approx(0.5)  # dispatch + report, back-to-back batches
    assert meta["hop_ms"]["mean"] == pytest.approx(0.2)
    raw = _raw()
    assert meta["core_wait_share"] == pytest.approx(1 - raw["cpu_us"].sum() / raw["exec_us"].sum())
    assert meta["seed"] == 5 and "never a validated run's" in meta["trace"]["note"]


def test_execution_model_and_decision_delay_come_from_the_calibration():
    frame, meta = cal.summarize("M", _raw(), layers=4, seed=0)
    model = cal.execution_model(frame, "measured", seed=3)
    assert model.mode == "measured" and model.seed == 3
    assert model.samples_ms[("M", 2)] == (8.0, 9.0) and model.idle_samples_ms[("M", 2)] == (7.5, 7.7)
    ovh = cal.decision_overhead(meta)
    assert ovh.mode == "model" and ovh.base_us == pytest.approx(500.0) and math.isinf(ovh.max_lag_us)
    plain = frame.drop("samples_ms", "idle_samples_ms")
    with pytest.raises(Exception, match="calibrated profile"):
        cal.execution_model(plain, "measured")


def test_drift_is_the_relative_change_of_each_size():
    a, meta_a = cal.summarize("M", _raw(), layers=4, seed=0)
    raw = _raw()
    raw["exec_us"] = raw["exec_us"] * 1.1
    b, meta_b = cal.summarize("M", raw, layers=4, seed=1)
    d = cal.drift(a, b, meta_a, meta_b)
    assert d["mean_change_pct"].to_list() == pytest.approx([10.0] * 3)
    assert d["decision_delay_change_ms"].to_list() == pytest.approx([0.0] * 3)


def test_non_monotone_lists_every_falling_size():
    assert cal.non_monotone([0, 12, 9, 10, 8, 11]) == [2, 4]
    assert cal.non_monotone([0, 1, 2, 3]) == []


def test_validation_calibrates_apart_from_every_validated_trace(tmp_path, monkeypatch):
    """Validate.prepare calibrates each model with the calibration seeds only, before any cell; every cell of a
    model carries the same calibration whatever its seed; and the validated traces are drawn from
    ``default_rng(seed)``, a stream the calibration (``[seed, SALT]``) never draws from."""
    pytest.importorskip("seaborn")
    import shepherd.experiments.validate as v
    from shepherd.core.engine.live.calibrate import SALT
    from shepherd.experiments.base import Scale

    calls = []

    def fake(model, max_batch, repeats, seed, rate_rps=None, progress=None):
        calls.append((model, seed))
        return cal.summarize(model, _raw(), layers=4, seed=seed)

    monkeypatch.setattr(cal, "calibrate", fake)
    monkeypatch.setattr("shepherd.core.measure.need_torch", lambda: None)
    monkeypatch.setattr(v, "MAX_BATCH", 3)
    exp = v.Validate()
    exp.prepare(tmp_path, Scale(quick=True, seeds=2))
    assert sorted(calls) == sorted((m, s) for m in v.MODELS for s in v.CALIBRATION_SEEDS)
    cells = exp.cells(Scale(quick=True, seeds=2))
    for model in v.MODELS:
        mine = [c.params for c in cells if c.params["model"] == model]
        assert len({p["calibration"] for p in mine}) == 1
        assert json.loads(mine[0]["calibration"])["meta"]["seed"] == v.CALIBRATION_SEEDS[0]
        assert {p["seed"] for p in mine} == {0, 1}
    assert not set(v.CALIBRATION_SEEDS) & {c.params["seed"] for c in cells}
    for s in {c.params["seed"] for c in cells}:
        for cs in v.CALIBRATION_SEEDS:
            ours = np.random.default_rng(s).random(8)
            theirs = np.random.default_rng([cs, SALT]).random(8)
            assert not np.allclose(ours, theirs)
    assert len(calls) == 2 * len(v.MODELS)  # cells made no calibration of their own


def test_calibrate_cli_writes_a_calibrated_profile(cli, tmp_path):
    pytest.importorskip("torch")
    from shepherd.core.artifacts import read_artifact

    out = tmp_path / "cal.parquet"
    res = cli("calibrate", "--model", "TinyCNN", "--max-batch", "3", "--repeats", "2", "--seed", "1", "-o", out)
    assert res.code == 0, res.err
    art = read_artifact(out, "profiles")
    assert art.frame["batch"].to_list() == [1, 2, 3]
    assert (art.frame["samples_ms"].list.len() + art.frame["idle_samples_ms"].list.len()).to_list() == [2, 2, 2]
    meta = art.extra["calibration"]
    assert meta["seed"] == 1 and meta["batches"] == 6 and meta["decision_delay_ms"]["mean"] >= 0
    again = tmp_path / "cal2.parquet"
    res = cli("calibrate", "--model", "TinyCNN", "--max-batch", "3", "--repeats", "2", "--seed", "2",
              "--against", out, "-o", again)
    assert res.code == 0 and "drift from cal.parquet" in res.out


@pytest.mark.parametrize("args, needle", [
    (("--repeats", "1"), "--repeats"),
    (("--rate", "-3"), "--rate"),
    (("--model", "NoSuchNet"), "NoSuchNet"),
])
def test_calibrate_bad_input_is_one_line(cli, tmp_path, args, needle):
    pytest.importorskip("torch")
    out = tmp_path / "cal.parquet"
    res = cli("calibrate", "--max-batch", "2", *args, "-o", out)
    assert_user_error(res, needle)
    assert not out.exists()


def test_validate_simulates_a_calibrated_profile_with_its_samples_and_delay_and_reruns(cli, tmp_path):
    """validate's defaults on a calibrated profile: drawn batch times and the calibrated decision delay; the
    folder's profiles.parquet keeps the calibration, so simulate re-runs the simulated half to the same table."""
    pytest.importorskip("torch")
    cal_file, out = tmp_path / "cal.parquet", tmp_path / "v"
    assert cli("calibrate", "--model", "TinyCNN", "--max-batch", "4", "--repeats", "3", "--seed", "1",
               "-o", cal_file).code == 0
    r = cli("validate", "--policy", "clockwork", "--model", "TinyCNN", "--profiles", cal_file, "--rate", "80",
            "--duration-s", "2", "--seed", "5", "--max-batch", "4", "-o", out)
    assert r.code == 0, r.err
    assert "--exec-time measured --overhead calibrated" in " ".join(r.out.split())
    from shepherd.core.artifacts import read_artifact

    saved = read_artifact(out / "profiles.parquet", "profiles")
    assert saved.extra["calibration"]["seed"] == 1 and "samples_ms" in saved.frame.columns
    sim = pl.read_parquet(out / "sim" / "clockwork" / "requests.parquet")
    args = ["simulate", "--trace", out / "trace.parquet", "--profiles", out / "profiles.parquet", "--policy",
            "clockwork", "--gpus", "1", "--max-batch", "4", "--seed", "5", "--engine", "reference"]
    again = cli(*args, "--exec-time", "measured", "--overhead", "calibrated", "-o", tmp_path / "re")
    assert again.code == 0, again.err
    assert pl.read_parquet(tmp_path / "re" / "requests.parquet").equals(sim)
    plain = cli(*args, "--exec-time", "mean", "--overhead", "none", "-o", tmp_path / "plain")
    assert plain.code == 0 and not pl.read_parquet(tmp_path / "plain" / "requests.parquet").equals(sim)


@pytest.mark.parametrize("args, needle", [
    (("--exec-time", "measured"), "--exec-time mean"),
    (("--overhead", "calibrated"), "--overhead none"),
    (("--exec-time", "drawn"), "--exec-time"),
])
def test_validate_refuses_calibrated_inputs_a_plain_profile_lacks(cli, tmp_path, args, needle):
    pytest.importorskip("torch")  # without it validate stops earlier, at "needs PyTorch"
    from tests.test_live_failures import profile_file

    out = tmp_path / "v"
    r = cli("validate", "--model", "TinyCNN", "--profiles", profile_file(tmp_path), *args, "-o", out)
    assert_user_error(r, needle)
    assert not out.exists()


def test_simulate_overhead_calibrated_needs_a_calibration(cli, tmp_path):
    from tests.test_live_failures import profile_file

    r = cli("simulate", "--trace", "maf2019-sample", "--gpus", "1", "--profiles", profile_file(tmp_path),
            "--overhead", "calibrated", "-o", tmp_path / "s")
    assert_user_error(r, "--overhead calibrated", "shepherd calibrate")
    assert not (tmp_path / "s").exists()


def test_probe_ratios_are_each_batch_over_its_sizes_calibrated_mean():
    frame, _ = cal.summarize("M", _raw(), layers=4, seed=0)
    raw = {"size": np.array([1, 3, 3], np.int32), "exec_us": np.array([10_000, 12_000, 24_000])}
    mean = dict(frame.select("batch", "latency_ms").iter_rows())
    assert cal.probe_ratios(frame, "M", raw).tolist() == pytest.approx([10 / mean[1], 12 / mean[3], 24 / mean[3]])
    with pytest.raises(Exception, match="no size 4"):
        cal.probe_ratios(frame, "M", {"size": np.array([4]), "exec_us": np.array([1000])})


def test_tracked_execution_is_the_calibrated_shape_at_the_probes_speed():
    """Every size draws ℓ(b) × one of the probes' ratios — both conditions alike; a ratio sample that is empty or
    non-positive is a one-line error."""
    frame, _ = cal.summarize("M", _raw(), layers=4, seed=0)
    model = cal.tracked_execution(frame, [1.2, 0.9, 1.0], seed=4)
    lat = dict(frame.select("batch", "latency_ms").iter_rows())
    for b in (1, 2, 3):
        assert model.samples_ms[("M", b)] == pytest.approx([0.9 * lat[b], 1.0 * lat[b], 1.2 * lat[b]])
        assert model.idle_samples_ms[("M", b)] == model.samples_ms[("M", b)]
    assert model.mode == "measured" and model.seed == 4 and model.scale == 1.0
    for bad in ([], [1.0, 0.0], [math.nan]):
        with pytest.raises(Exception, match="speed probes"):
            cal.tracked_execution(frame, bad)


def test_speed_probes_draw_from_streams_apart_from_the_calibration_and_the_validated_trace():
    """A probe's order, gaps and trace come from ``[seed, SALT, PROBE_STREAM, phase]``: not the calibration's
    ``[seed, SALT]``, not the validated trace's ``default_rng(seed)``, and the two phases differ."""
    from shepherd.core.engine.live.calibrate import SALT

    for seed in (0, 1, 101):
        draws = [np.random.default_rng(seed).random(8), np.random.default_rng([seed, SALT]).random(8)]
        draws += [np.random.default_rng([seed, SALT, cal.PROBE_STREAM, ph]).random(8) for ph in (0, 1)]
        for i in range(len(draws)):
            for j in range(i + 1, len(draws)):
                assert not np.allclose(draws[i], draws[j])


def test_a_validation_cell_runs_a_probe_before_and_after_its_live_run(monkeypatch):
    """Validate.run_cell with probes: one probe (phase 0) before the live run, one (phase 1) after it, and the
    judged simulation draws from both probes' ratios; the calibration-only and before-only simulations and the
    probes' medians are kept beside it."""
    pytest.importorskip("seaborn")
    import shepherd.core.validation as val
    import shepherd.experiments.validate as v

    frame, meta = cal.summarize("M", _raw(), layers=4, seed=0)
    events = []

    def probe(model, profiles, max_batch, repeats, seed, phase):
        events.append(("probe", phase))
        return {"phase": phase, "ratios": [1.5 + phase] * 4, "median": 1.5 + phase, "core_wait_share": 0.0,
                "batches": 4}

    def pair(trace, profiles, policy, *, execution, **kw):
        events.append(("live", None))
        exe = execution()
        events.append(("sim", exe.samples_ms[("M", 1)][0] / frame["latency_ms"][0]))
        from shepherd.core.engine import simulate
        sim = simulate(trace, profiles, policy, gpus=1, seed=kw["seed"], max_batch=kw["max_batch"], execution=exe)
        rows = val.compare(val.metrics(sim), val.metrics(sim))
        return {"live": sim, "sim": sim, "rows": rows, "rows_live_exec": rows, "sim_live_exec": sim,
                "residuals": {"core_wait_share": 0.0, "exec_ratio": 1.0, "exec_cpu_ratio": 1.0,
                              "dispatch_ms_mean": 0.1, "hop_ms_mean": 0.1, "failures": []},
                "sensitivity": {"attainment_pts_per_pct": 0.0, "p99_pct_per_pct": 0.0}}

    monkeypatch.setattr(cal, "speed_probe", probe)
    monkeypatch.setattr(val, "run_pair", pair)
    params = {"policy": "clockwork", "model": "M", "load": 0.5, "duration_s": 2.0, "slo_ms": 60.0, "max_batch": 3,
              "seed": 0, "calibration": json.dumps({"rows": frame.to_dicts(), "meta": meta}, default=float),
              "probe_repeats": 4}
    out = v.Validate().run_cell(params)
    assert [e[0] for e in events] == ["probe", "live", "probe", "sim"] and events[0][1] == 0 and events[2][1] == 1
    assert events[3][1] == pytest.approx(1.5)  # the lowest pooled ratio: both probes' ratios (1.5 and 2.5) drawn
    assert out["probe_before"].to_list()[0] == 1.5 and out["probe_after"].to_list()[0] == 2.5
    assert out["sim_calibrated"].null_count() == 0 and out["sim_probe_before"].null_count() == 0
