"""Profiles: built-in paper tables, least-squares fit, dense latency lookups."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core import profiles as prof
from shepherd.core.artifacts import read_artifact, sha256_file
from shepherd.core.errors import UserError


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    alpha=st.floats(0.01, 50.0),
    beta=st.floats(0.0, 200.0),
    noise=st.floats(0.0, 0.05),
    seed=st.integers(0, 2**32 - 1),
)
def test_fit_recovers_known_parameters_from_noisy_data(alpha, beta, noise, seed):
    rng = np.random.default_rng(seed)
    batch = np.repeat(np.arange(1, 129), 3)
    truth = alpha * batch + beta
    measured = truth * (1.0 + noise * rng.standard_normal(batch.size))
    fit = prof.fit_linear(batch, measured)
    # Multiplicative noise of relative size σ: the estimates land within a few σ.
    scale = alpha * 128 + beta
    assert abs(fit.alpha - alpha) <= 0.02 * alpha + 6 * noise * scale / 128 / np.sqrt(batch.size / 128) + 1e-9
    assert abs(fit.beta - beta) <= 0.02 * beta + 6 * noise * scale / np.sqrt(batch.size / 128) + 1e-6
    if noise == 0:
        assert fit.r2 == pytest.approx(1.0)
    assert fit.r2 <= 1.0 + 1e-12


def test_single_batch_size_fit_is_documented_constant():
    fit = prof.fit_linear(np.array([4, 4, 4]), np.array([10.0, 10.0, 10.0]))
    assert (fit.alpha, fit.beta, fit.r2) == (0.0, 10.0, 1.0)


def test_shepherd_table_4_has_17_models_with_paper_values():
    frame = prof.load_builtin("shepherd-v100")
    params = prof.model_params(frame)
    assert params.height == 17
    rn18 = params.filter(pl.col("model") == "ResNet18").row(0, named=True)
    assert (rn18["alpha_ms"], rn18["beta_ms"], rn18["exit_points"], rn18["short"]) == (0.22, 3.74, 40, "RN18")
    rn18_rows = frame.filter(pl.col("model") == "ResNet18")
    assert rn18_rows["batch"].to_list() == list(range(1, 129))
    assert rn18_rows.filter(pl.col("batch") == 128)["latency_ms"].item() == pytest.approx(0.22 * 128 + 3.74)


@pytest.mark.parametrize("name", prof.table_names())
def test_every_builtin_table_is_a_valid_profiles_artifact(tmp_path, cli, name):
    out = tmp_path / f"{name}.parquet"
    result = cli("profile", "--table", name, "-o", out)
    assert result.code == 0, result.err
    frame = read_artifact(out, "profiles").frame
    assert frame.select(["model", "hardware", "batch"]).is_unique().all()
    assert frame["model"].n_unique() == prof.read_builtin_raw(name)["model"].n_unique()


def test_accordion_rows_are_latency_over_speedup():
    frame = prof.load_builtin("accordion-cpu")
    r50 = frame.filter(pl.col("model") == "ResNet50").sort("eps")
    assert r50["eps"].to_list() == [1, 2, 4, 8]
    base = r50["latency_ms"][0]
    assert np.allclose(r50["latency_ms"].to_numpy(), base / r50["speedup"].to_numpy(), rtol=1e-3)


def test_latency_table_is_dense_integer_microseconds():
    frame = prof.load_builtin("shepherd-v100")
    lat = prof.latency_table_us(frame, "ResNet50", max_batch=128)
    assert lat.dtype == np.int64 and lat.shape == (129,)
    assert lat[0] == 0 and lat[1] == round((0.75 + 7.96) * 1000)
    assert np.all(np.diff(lat[1:]) > 0)


def test_latency_table_prefers_measured_points_and_fills_by_fit():
    measured = pl.DataFrame({
        "model": ["m"] * 3, "hardware": ["g"] * 3, "batch": [1, 2, 8], "latency_ms": [2.0, 3.0, 9.5],
    }).with_columns(pl.col("batch").cast(pl.Int32))
    frame = prof.fit_measurements(measured, "measured:test")
    lat = prof.latency_table_us(frame, "m", max_batch=8)
    assert lat[1] == 2000 and lat[2] == 3000 and lat[8] == 9500
    fit = prof.fit_linear(np.array([1, 2, 8]), np.array([2.0, 3.0, 9.5]))
    assert lat[5] == round((fit.alpha * 5 + fit.beta) * 1000)


def test_unknown_model_in_lookup_is_a_user_error():
    with pytest.raises(UserError, match="no model 'NoSuchNet'"):
        prof.latency_table_us(prof.load_builtin("shepherd-v100"), "NoSuchNet")


def test_profile_from_measured_csv_fits_per_model(tmp_path, cli):
    rng = np.random.default_rng(3)
    rows = []
    for model, (a, b) in {"A": (0.5, 4.0), "B": (2.0, 10.0)}.items():
        for batch in (1, 2, 4, 8, 16, 32):
            for _ in range(5):
                rows.append((model, "L4", batch, (a * batch + b) * (1 + 0.01 * rng.standard_normal())))
    csv = tmp_path / "measured.csv"
    pl.DataFrame(rows, schema=["model", "hardware", "batch", "latency_ms"], orient="row").write_csv(csv)
    out = tmp_path / "p.parquet"
    result = cli("profile", "--from", csv, "-o", out)
    assert result.code == 0, result.err
    art = read_artifact(out, "profiles")
    params = prof.model_params(art.frame).sort("model")
    assert params["alpha_ms"].to_list() == pytest.approx([0.5, 2.0], rel=0.05)
    assert params["beta_ms"].to_list() == pytest.approx([4.0, 10.0], rel=0.05)
    assert all(r2 > 0.99 for r2 in params["r2"].to_list())
    assert art.provenance["inputs"] == {"measured.csv": sha256_file(csv)}
