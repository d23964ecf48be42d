"""``shepherd profile --measure``: real PyTorch timings (skipped without the torch extra)."""

import sys

import numpy as np
import pytest

from conftest import assert_user_error


def mlp():
    """A model dominated by batched matrix products (factory used as test_accordion_measure:mlp)."""
    import torch.nn as nn
    # Layers large enough (tens of ms at batch 128) that per-call overhead does not dominate a layer.
    m = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 512))
    m.input_shape = (512,)
    return m


def test_without_torch_one_line_install_hint(cli, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch → ImportError
    r = cli("profile", "--measure", "ResNet50", "-o", tmp_path / "p.parquet")
    from shepherd.core.measure import TORCH_PIP
    assert_user_error(r, TORCH_PIP)


def test_cuda_without_gpu_is_one_line(cli, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert_user_error(cli("profile", "--measure", "ResNet50", "--device", "cuda", "-o", tmp_path / "p.parquet"),
                      "no CUDA GPU")


ARGS = ("--measure", "test_accordion_measure:mlp", "--batch", "16,32,64,128", "--repeats", "7", "--threads", "1")


def test_matmul_model_fits_linear_and_grows_with_batch(cli, tmp_path):
    """The whole-model profile: a linear fit with R² ≥ 0.9 and latencies that grow with the batch (each batch
    doubles the work, far beyond load noise); the per-layer run lists the layers in execution order."""
    pytest.importorskip("torch")
    from shepherd.core.artifacts import read_artifact
    whole, layers = tmp_path / "w.parquet", tmp_path / "l.parquet"
    r = cli("profile", *ARGS, "-o", whole)
    assert r.code == 0, r.err
    w = read_artifact(whole, "profiles")
    assert w.provenance["config"]["environment"]["torch"] and w.frame["alpha_ms"][0] > 0
    assert w.frame["r2"][0] >= 0.9
    lat = w.frame.sort("batch")["latency_ms"].to_list()
    assert all(a < b for a, b in zip(lat, lat[1:])), lat
    r = cli("profile", *ARGS, "--per-layer", "-o", layers)
    assert r.code == 0, r.err
    lf = read_artifact(layers, "layer_profiles").frame
    assert lf["layer"].to_list()[:5] == [0, 1, 2, 3, 4]
    assert (lf["latency_ms"] > 0).all()


@pytest.mark.slow
def test_matmul_layers_sum_to_whole(cli, tmp_path):
    """A timing comparison, so not in the default suite (``-m slow``): the per-layer latencies sum to the
    whole model's within 15 % at batches 64 and 128. Whole model and layers are timed seconds apart, so
    load alone moved the gap to −14 % on a shared machine: up to five attempts, one must hold."""
    pytest.importorskip("torch")
    from shepherd.core.artifacts import read_artifact
    whole, layers = tmp_path / "w.parquet", tmp_path / "l.parquet"
    errors = []
    for _ in range(5):
        assert cli("profile", *ARGS, "-o", whole).code == 0
        assert cli("profile", *ARGS, "--per-layer", "-o", layers).code == 0
        w, lf = read_artifact(whole, "profiles").frame, read_artifact(layers, "layer_profiles").frame
        gaps = []
        for b in (64, 128):
            total = lf.filter(lf["batch"] == b)["latency_ms"].sum()
            ref = w.filter(w["batch"] == b)["latency_ms"][0]
            gaps.append(abs(total - ref) / ref)
        errors.append(max(gaps))
        if max(gaps) <= 0.15:
            return
    pytest.fail(f"per-layer gap per attempt: {errors}")


def test_measured_layers_feed_accordion(tmp_path):
    pytest.importorskip("torch")
    import polars as pl
    from shepherd.core.engine import simulate
    from shepherd.core.measure.artifact import measure
    kind, lf, _ = measure(["test_accordion_measure:mlp"], "cpu", True, 1, [4], warmup=1, repeats=2)
    assert kind == "layer_profiles"
    n = 6
    arr = np.arange(n, dtype=np.int64) * 1000
    t = pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["mlp"] * n,
                      "slo_us": np.full(n, 10**7), "deadline_us": arr + 10**7, "instances": np.full(n, 3, np.int32)})
    res = simulate(t, None, "accordion", {"eps": 4}, artifacts={"layer_profiles": lf})
    assert (res.requests_frame()["outcome"] == "served").all()
