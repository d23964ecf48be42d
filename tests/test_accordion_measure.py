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
    assert_user_error(r, "pip install 'shepherd[torch]'")


def test_cuda_without_gpu_is_one_line(cli, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert_user_error(cli("profile", "--measure", "ResNet50", "--device", "cuda", "-o", tmp_path / "p.parquet"),
                      "no CUDA GPU")


def test_matmul_model_fits_linear_and_layers_sum_to_whole(cli, tmp_path):
    """On a shared machine one timing run can be disturbed (whole model and layers are timed seconds apart;
    a gap of −14 % was seen from load alone, while undisturbed runs agree within ±5 %): up to five attempts,
    one must hold."""
    pytest.importorskip("torch")
    from shepherd.core.artifacts import read_artifact
    whole, layers = tmp_path / "w.parquet", tmp_path / "l.parquet"
    args = ("--measure", "test_accordion_measure:mlp", "--batch", "16,32,64,128", "--repeats", "7",
            "--threads", "1")
    errors = []
    for _ in range(5):
        r = cli("profile", *args, "-o", whole)
        assert r.code == 0, r.err
        w = read_artifact(whole, "profiles")
        assert w.provenance["config"]["environment"]["torch"] and w.frame["alpha_ms"][0] > 0
        r = cli("profile", *args, "--per-layer", "-o", layers)
        assert r.code == 0, r.err
        lf = read_artifact(layers, "layer_profiles").frame
        assert lf["layer"].to_list()[:5] == [0, 1, 2, 3, 4]
        gaps = []
        for b in (64, 128):
            total = lf.filter(lf["batch"] == b)["latency_ms"].sum()
            ref = w.frame.filter(w.frame["batch"] == b)["latency_ms"][0]
            gaps.append(abs(total - ref) / ref)
        errors.append((w.frame["r2"][0], max(gaps)))
        if w.frame["r2"][0] >= 0.9 and max(gaps) <= 0.15:
            return
    pytest.fail(f"(R², per-layer gap) per attempt: {errors}")


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
