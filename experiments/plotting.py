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

from shepherd.experiments.confidence import half_width, interval  # noqa: E402

sns.set_theme(style="whitegrid", context="paper")


def t_interval(values) -> tuple[float, float]:  # noqa: ANN001 - seaborn passes a pandas Series
    """The 95 % t band of ``values``, unclipped (a metric of unknown domain): prefer :func:`band`."""
    vals = [float(v) for v in values]
    mean = float(np.mean(vals))
    hw = half_width(vals)
    return mean - hw, mean + hw


def band(metric: str | None):  # noqa: ANN201 - seaborn's errorbar callable
    """seaborn's ``errorbar``: the 95 % t band clipped to ``metric``'s domain
    (:data:`shepherd.experiments.confidence.DOMAINS`)."""
    def errorbar(values) -> tuple[float, float]:  # noqa: ANN001 - a pandas Series
        _, low, high = interval([float(v) for v in values], metric)
        return low, high

    return errorbar


def lines(ax, data: pl.DataFrame, x: str, y: str, hue: str, order=None, style: str | None = None,
          markers: bool = True, metric: str | None = None) -> None:
    """Mean line per ``hue`` with the 95 % t band over the rows (seeds) at each x, clipped to the domain of
    ``metric`` (default: the column ``y``'s own name)."""
    sns.lineplot(data=data.to_pandas(), x=x, y=y, hue=hue, hue_order=order, style=style,
                 errorbar=band(metric or y), marker="o" if markers else None, ax=ax)
    integer_ticks(ax, data[x] if x in data.columns else None)


def integer_ticks(ax, values) -> None:  # noqa: ANN001 - a matplotlib Axes, a polars Series
    """An axis whose values are whole numbers (GPUs, workers, a batch limit) gets whole-number ticks only
    (never a tick at 1.5 GPUs)."""
    if values is None or not values.dtype.is_numeric():
        return
    vals = values.drop_nulls().to_list()
    if vals and all(float(v).is_integer() for v in vals):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.0, height: float = 3.0):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                             layout="constrained")
    return fig, axes


def subset_note(results: pl.DataFrame) -> str | None:
    """"MAF 2019 subset: …" when ``results`` ran on real MAF 2019 data that is only a subset
    (an imported sample, see :func:`shepherd.traces.maf2019.subset_of`), else None.

    Cells record their trace name (a ``trace`` column) but not which copy of the
    data stood behind it, so the note describes the MAF 2019 data registered in
    the data cache when the report is drawn (documented limitation).
    """
    if not results.height or "trace" not in results.columns:
        return None
    real = results.filter(pl.col("trace").cast(pl.String).str.starts_with("maf2019"))
    if "synthetic" in real.columns:
        real = real.filter(~pl.col("synthetic").fill_null(False))
    if real.height == 0:
        return None
    from shepherd.traces.registry import SAMPLE_SUBSET, maf2019_subset  # local: only when a report needs it

    if real["trace"].cast(pl.String).str.starts_with("maf2019-sample").all():
        return f"real MAF 2019 subset: {SAMPLE_SUBSET}, not the full trace"

    subset = maf2019_subset()
    return f"MAF 2019 subset: {subset}, not the full trace" if subset else None


def synthetic_caption(fig, synthetic: bool, results: pl.DataFrame | None = None) -> None:  # noqa: ANN001
    """Caption a figure drawn from synthetic data, or from a subset of the real trace (``results``
    given, or else the MAF 2019 data in the cache when the figure is not synthetic).

    A figure that already has a title keeps it: the caption then goes below the axes (issue 29: the
    sweep report's title vanished on synthetic traces, replaced by this caption)."""
    if synthetic:
        _caption(fig, "synthetic MAF-like workload", "firebrick")
        return
    note = subset_note(results if results is not None else pl.DataFrame({"trace": ["maf2019"]}))
    if note:
        _caption(fig, note, "darkorange")


def _caption(fig, text: str, color: str) -> None:  # noqa: ANN001
    # a suptitle or supxlabel, not fig.text: the constrained layout reserves room for those
    # (a bottom fig.text caption overlapped the x-axis labels of Figs. 7–11b)
    place = fig.supxlabel if fig.get_suptitle() else fig.suptitle
    place(text, x=0.99, ha="right", fontsize=7, color=color, style="italic")
