"""Symphony Figs. 4 and 6 report the spread over seeds (issue 31: full grid on 3 seeds, spread in REPORT)."""

from __future__ import annotations

import polars as pl
import pytest

from shepherd.experiments.symphony import fig04_nwc_vs_wc as fig4, fig06_zoo as fig6


def fig4_results(shares: list[float], cells: int = 20) -> pl.DataFrame:
    """Per seed, ``cells`` cells of which the first ``share`` fraction have every rule at NWC = WC, the rest 0.5."""
    rows = []
    for seed, share in enumerate(shares):
        for i in range(cells):
            r = 1.0 if i < share * cells else 0.5
            row = {"model": "DenseNet121", "n_models": 8, "ratio": 1.0, "slo_ms": 30.0, "shape": 1.0, "seed": seed,
                   "gpus": 8, "wc_rps": 100.0, "nwc_rps": 100 * r, "ratio_nwc_wc": r, "non_monotone": ""}
            for stem, _, _ in fig4.VARIANTS[1:]:
                row[f"nwc_{stem}_rps"], row[f"ratio_{stem}_wc"] = 100 * r, r
            rows.append(row)
    return pl.DataFrame(rows)


def test_fig4_share_per_seed_and_its_spread(tmp_path):
    res = fig4_results([0.5, 0.75, 1.0])
    assert fig4.seed_shares(res)["nwc"] == [0.5, 0.75, 1.0]
    section = fig4.EXPERIMENT.report(res, tmp_path)
    head = next(h for h in section.headlines if h.what.startswith("cells with NWC ≥ 0.95 × WC, §4.3"))
    assert head.ours == pytest.approx(75.0)
    assert head.half_width > 0  # three different seeds: a measurable spread
    assert any("per seed" in n and "50.0 % / 75.0 % / 100.0 %" in n for n in section.notes)


def test_fig4_one_seed_has_no_spread(tmp_path):
    section = fig4.EXPERIMENT.report(fig4_results([0.5]), tmp_path)
    head = next(h for h in section.headlines if h.what.startswith("cells with NWC ≥ 0.95 × WC, §4.3"))
    assert head.ours == pytest.approx(50.0) and head.half_width == 0.0
    assert not any("per seed" in n for n in section.notes)


def test_fig6_a_seed_with_no_baseline_goodput_is_infinite_not_dropped():
    rows = [{"hardware": "A100", "set": "all", "system": sy, "seed": seed, "models": 3,
             "goodput_rps": g if seed == 0 or sy == "symphony" else 0.0}
            for seed in (0, 1) for sy, g in (("symphony", 300.0), ("clockwork", 200.0), ("nexus", 100.0),
                                             ("nexus-8fe", 80.0))]
    assert fig6.seed_ratios(pl.DataFrame(rows), "A100", "all") == [1.5, float("inf")]


def test_fig6_ratio_per_seed_over_the_best_baseline(tmp_path):
    rows = []
    for seed, sym in enumerate((300.0, 400.0)):
        for h in fig6.TABLES:
            for s in fig6.SETS:
                for sy, g in (("symphony", sym), ("clockwork", 200.0), ("nexus", 100.0), ("nexus-8fe", 80.0)):
                    rows.append({"hardware": h, "set": s, "system": sy, "seed": seed, "models": 3, "goodput_rps": g})
    res = pl.DataFrame(rows)
    assert fig6.seed_ratios(res, "A100", "all") == [1.5, 2.0]
    section = fig6.EXPERIMENT.report(res, tmp_path)
    head = next(h for h in section.headlines if h.what.startswith("§5.1 A100 all"))
    assert head.ours == pytest.approx(1.75) and head.half_width > 0
    assert head.seeds == (1.5, 2.0)
    # "2x to 2.4x": the stated range is the region; [1.5, 2.0] → the interval straddles 2 → inconclusive
    assert (head.rule.low, head.rule.high) == (2.0, 2.4) and head.verdict.state == "inconclusive"
    lt2 = next(h for h in section.headlines if h.what.startswith("§5.1 1080Ti lt2"))
    assert lt2.rule.low == pytest.approx(1 + 0.23 * 0.75)  # "23 % higher" judged on the effect
