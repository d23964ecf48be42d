"""Accordion §4.3 query streams and the CLI entry."""

import numpy as np
import pytest

from shepherd.core.errors import UserError
from shepherd.traces.accordion import STREAMS, rate_shape, stream


def test_streams_have_their_mean_batch_peaks_and_slo():
    for k in (2, 5):
        t = stream(k, "moderate", duration_s=600, seed=1)
        assert t["instances"].min() >= 1
        assert t["instances"].mean() == pytest.approx(STREAMS[k].mean_batch, rel=0.25)
        one = {"VGG16": 690.0, "ResNet50": 1400.0, "ResNet152": 4820.0}
        worst = max(i * one[m] for i, m in zip(t["instances"], t["model"])) * 1000
        assert t["slo_us"][0] == pytest.approx(0.25 * worst, rel=1e-6)
        assert set(t["priority"].unique()) == {0, 1} and t["model"].n_unique() == 3
        assert t["arrival_us"].is_sorted() and t["arrival_us"].max() < 600e6


def test_rate_shape_has_k_peaks():
    for peaks in (2, 5):
        s = rate_shape(peaks, 600)
        local_max = np.sum((s[1:-1] > s[:-2]) & (s[1:-1] >= s[2:]))
        assert local_max == peaks and s.mean() == pytest.approx(1.0)


def test_strict_is_tighter_than_relaxed_and_bad_stream():
    assert stream(3, "strict", 120)["slo_us"][0] * 5 == pytest.approx(stream(3, "relaxed", 120)["slo_us"][0], rel=1e-6)
    with pytest.raises(UserError):
        stream(7)
    with pytest.raises(UserError):
        stream(1, duration_s=601)


def test_cli_generate(tmp_path, cli):
    from shepherd.core.artifacts import read_artifact
    from conftest import assert_user_error
    out = tmp_path / "s.parquet"
    r = cli("traces", "generate", "--process", "accordion-stream", "--stream", "4", "--duration", "60", "-o", out)
    assert r.code == 0, r.err
    assert read_artifact(out, "trace").frame["instances"].min() >= 1
    assert_user_error(cli("traces", "generate", "--process", "accordion-stream", "--stream", "0", "-o", out),
                      "stream 0")
