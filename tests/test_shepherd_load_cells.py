"""Fig. 7 and Fig. 8 share their load cells: one simulation per (workload, load, system, seed)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.experiments import registry
from shepherd.experiments.base import Cell, Scale
from shepherd.experiments.shepherd import common as c

HORIZON = 1.0


@pytest.mark.parametrize("quick", [True, False])
def test_fig8_names_cells_of_fig7s_grid(quick):
    scale = Scale(quick=quick, seeds=2)
    fig7 = {cell.key() for cell in registry.get("shepherd-fig7").cells(scale)}
    fig8 = [cell.key() for cell in registry.get("shepherd-fig8").cells(scale)]
    assert len(fig8) == 2 * len(c.SYSTEMS) * 2
    assert set(fig8) <= fig7


@pytest.fixture(scope="module")
def fig8_results():
    """Fig. 8's cells on a 1 s horizon, joined with their parameters as the runner's ``collect`` does."""
    frames = []
    for cell in registry.get("shepherd-fig8").cells(Scale(quick=True, seeds=1)):
        params = {**cell.params, "horizon_s": HORIZON}
        frame = registry.get(cell.experiment).run_cell(params)
        frames.append(frame.with_columns([pl.lit(v).alias(k) for k, v in params.items() if k not in frame.columns]
                                         + [pl.lit(Cell(cell.experiment, params).key()).alias("cell")]))
    return pl.concat(frames, how="diagonal_relaxed")


def test_a_load_cell_stores_the_percentiles_of_its_admitted_latencies(fig8_results):
    row = fig8_results.filter((pl.col("system") == "clockwork") & (pl.col("load") == 3_000)).row(0, named=True)
    trace, _ = c.workload(row["trace"], 3_000, 0, HORIZON)
    req = c.simulate_system("clockwork", trace, c.TESTBED_GPUS, 0).requests_frame()
    lat = ((req["finish_us"] - req["arrival_us"]).drop_nulls() / 1000).to_numpy()
    assert row["admitted"] == lat.size > 0
    pct = np.array(row["latency_pct_ms"])
    assert pct.size == 101 and np.all(np.diff(pct) >= 0)
    assert pct[50] == pytest.approx(np.median(lat)) and pct[100] == pytest.approx(lat.max())


def test_fig8_report_reads_the_shared_cells(fig8_results, tmp_path):
    section = registry.get("shepherd-fig8").report(fig8_results, tmp_path)
    assert [p.suffix for p in section.figures] and all(p.exists() for p in section.figures)
    assert len(section.claims) == 2
    assert "Clockwork" in section.claims[0].detail and "ms" in section.claims[1].detail


def test_testbed_figures_run_on_the_real_sample_and_emulations_on_the_synthetic_trace(monkeypatch):
    """Without the full MAF 2019 in the cache: Figs. 7–9 (12 workers) on the packaged real sample,
    Figs. 2–5, 10, 11(b) (1000-stream groups, up to 400 workers) on the calibrated synthetic trace."""
    monkeypatch.setattr(c, "real_maf_available", lambda: False)
    scale = Scale(quick=True, seeds=1)
    traces = {name: {cell.params["trace"] for cell in registry.get(name).cells(scale)}
              for name in ("shepherd-fig7", "shepherd-fig8", "shepherd-fig9", "shepherd-fig10",
                           "shepherd-fig11b", "shepherd-fig2-5")}
    for name in ("shepherd-fig7", "shepherd-fig9"):
        assert traces[name] == {"maf2019-sample", "maf2019-sample-bursty"}
    assert traces["shepherd-fig8"] == {"maf2019-sample"}
    assert traces["shepherd-fig10"] == {"maf-synthetic", "maf-synthetic-bursty"}
    assert traces["shepherd-fig11b"] == traces["shepherd-fig2-5"] == {"maf-synthetic"}
    monkeypatch.setattr(c, "real_maf_available", lambda: True)
    assert c.trace_name("bursty", emulated=True) == c.trace_name("bursty") == "maf2019-bursty"
