"""Symphony's goodput search checks pass/fail for monotonicity over every load it evaluates (issue 41)."""

from __future__ import annotations

import pytest

from shepherd.experiments.symphony import common as c
from shepherd.experiments.symphony import fig04_nwc_vs_wc as fig4


def test_scan_grid_spans_a_quarter_to_twice_the_goodput():
    loads = c.scan_loads(900.0, 12)
    assert len(loads) == 12 and loads[0] == pytest.approx(225.0) and loads[-1] == pytest.approx(1800.0)
    assert all(b > a for a, b in zip(loads, loads[1:]))
    assert c.scan_loads(0.0, 12) == [] and c.scan_loads(900.0, 0) == []


def test_densenet121_8x8_30ms_is_flagged_non_monotone():
    # the issue's cell at full scale (5-s trace, 1-s warm-up, seed 0): §4.3's rule holds at ≈ 1,110 r/s
    # above a load where it fails (≈ 965 r/s); the bisection's own loads and 2 probes below the goodput
    # (the old check) see only passes below and fails above
    p = {"model": "DenseNet121", "n_models": 8, "ratio": 1.0, "slo_ms": 30.0, "shape": 1.0, "seed": 0,
         "duration_s": 5.0, "warmup_s": 1.0}
    wl, prof, gpus, start = fig4.setup(p)
    old_g, old_bad = c.goodput_checked("symphony", wl, prof, gpus, 0, start, rel_tol=0.02, probes=2, warmup_s=1.0)
    g, bad = c.goodput_checked("symphony", wl, prof, gpus, 0, start, rel_tol=0.02, probes=2, warmup_s=1.0,
                               scan=fig4.SCAN)
    assert old_bad is None and g == old_g
    assert bad is not None and bad[0] < bad[1] and bad[1] > g


def test_pruning_note_is_read_off_the_grid():
    note = fig4.pruning_note(0.76, 0.897, {"nwc": [0.75, 0.76, 0.77], "cp": [0.88, 0.90, 0.91]})
    assert "89.7 ±" in note and "76.0 ±" in note and "second cause" in note
    assert "not a cause" in fig4.pruning_note(0.8, 0.7, {})
