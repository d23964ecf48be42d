"""An imported subset of MAF 2019 is labelled as such in figures and REPORT.md, never as plain "maf2019"."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from maf_helpers import write_maf2019
from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.experiments import plotting
from shepherd.experiments.base import Section
from shepherd.experiments.report import build_report
from shepherd.experiments.runner import results_path
from shepherd.traces import fetch, maf2019

NOTE = "MAF 2019 subset: 4 functions, minutes 480–489 of invocations.csv, not the full trace"


@pytest.fixture
def subset_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHEPHERD_DATA", str(tmp_path / "cache"))
    src = write_maf2019(tmp_path / "sample" / "invocations.csv", np.ones((4, 10), int), minutes=range(480, 490))
    fetch.import_path(src.parent)
    return tmp_path


def _results(trace: str, synthetic: bool) -> pl.DataFrame:
    return pl.DataFrame({"trace": [trace, trace], "synthetic": [synthetic] * 2, "goodput_rps": [1.0, 2.0]})


def test_subset_note_only_for_real_maf2019_results(subset_cache):
    assert plotting.subset_note(_results("maf2019-stable", False)) == NOTE
    assert plotting.subset_note(_results("maf-synthetic", True)) is None
    assert plotting.subset_note(pl.DataFrame({"x": [1]})) is None


def test_no_note_when_the_cache_holds_full_days(tmp_path, monkeypatch):
    monkeypatch.setenv("SHEPHERD_DATA", str(tmp_path / "cache"))
    write_maf2019(tmp_path / "full" / maf2019.DAY_FILE.format(day=1), np.ones((2, 1440), int))
    fetch.import_path(tmp_path / "full")
    assert plotting.subset_note(_results("maf2019-stable", False)) is None


def test_figure_caption_says_subset(subset_cache):
    fig, _ = plotting.figure()
    plotting.synthetic_caption(fig, False, _results("maf2019-bursty", False))
    assert [t.get_text() for t in fig.texts] == [NOTE]
    fig2, _ = plotting.figure()
    plotting.synthetic_caption(fig2, True, _results("maf-synthetic", True))
    assert [t.get_text() for t in fig2.texts] == ["synthetic MAF-like workload"]


class _OneSection:
    name = "test-subset-label"

    def report(self, results, figures_dir):
        return Section(title="a figure on MAF 2019")


def test_report_md_says_subset(subset_cache):
    results_dir = subset_cache / "results"
    write_artifact(_results("maf2019-stable", False), results_path(results_dir, "test-subset-label"), "results",
                   make_provenance({}, 0, []), extra={"synthetic": False})
    path, sections = build_report([_OneSection()], results_dir)
    text = path.read_text()
    assert f"Real data, but a subset — {NOTE}." in text
    assert "Synthetic data" not in text
