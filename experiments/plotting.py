"""Seaborn figure helpers shared by the experiments' reports.

Only report code imports this module (STYLE.md rule 11: metrics apart from
plotting). Error bands are the same Student-t 95 % intervals REPORT.md
prints (:mod:`shepherd.experiments.confidence`), not seaborn's bootstrap.
"""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import seaborn as sns  # noqa: E402

from shepherd.experiments.confidence import half_width  # noqa: E402

sns.set_theme(style="whitegrid", context="paper")


def t_interval(values) -> tuple[float, float]:  # noqa: ANN001 - seaborn passes a pandas Series
    vals = [float(v) for v in values]
    mean = float(np.mean(vals))
    hw = half_width(vals)
    return mean - hw, mean + hw


def lines(ax, data: pl.DataFrame, x: str, y: str, hue: str, order=None, style: str | None = None,
          markers: bool = True) -> None:
    """Mean line per ``hue`` with the 95 % t band over the rows (seeds) at each x."""
    sns.lineplot(data=data.to_pandas(), x=x, y=y, hue=hue, hue_order=order, style=style,
                 errorbar=t_interval, marker="o" if markers else None, ax=ax)


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.0, height: float = 3.0):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             layout="constrained")
    return fig, axes


def synthetic_caption(fig, synthetic: bool) -> None:  # noqa: ANN001
    if synthetic:
        fig.text(0.99, 0.01, "synthetic MAF-like workload", ha="right", va="bottom", fontsize=7,
                 color="firebrick", style="italic")
