"""``shepherd report RESULTS`` on a sweep's results folder: each metric against the swept variable.

One panel per metric (SLO attainment, goodput, p99 latency, utilization, drop
rate, mean batch), one line per policy, the mean over seeds with its 95 % t
interval (:mod:`shepherd.experiments.confidence`); and a table of the same
numbers in ``REPORT.md``. The x axis is the first swept variable other than
the policy and the seed; a second one is drawn as line styles.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Section

METRICS = {"slo_attainment": "SLO attainment", "goodput_rps": "goodput (req/s)",
           "p99_latency_ms": "p99 latency (ms)", "utilization": "utilization", "drop_rate": "drop rate",
           "mean_batch": "mean batch"}
NOT_X = ("policy", "policy_name", "seed", "sweep")


def axes_of(results: pl.DataFrame, swept: list[str]) -> tuple[str | None, str | None]:
    """(x, style): the swept columns to draw against, besides policy and seed."""
    cols = [c for c in swept if c in results.columns and c not in NOT_X]
    if not cols:  # a results table from elsewhere: find varying parameter columns
        cols = [c for c in ("load", "slo_ms", "gpus") if c in results.columns and results[c].n_unique() > 1]
    numeric = [c for c in cols if results[c].dtype.is_numeric()]
    x = (numeric or cols or [None])[0]
    rest = [c for c in cols if c != x]
    return x, (rest[0] if rest else None)


def draw(results: pl.DataFrame, figures_dir: Path, swept: list[str] | None = None, name: str = "sweep") -> Section:
    """The comparison figure (PNG + PDF) and a mean ± 95 % table per policy and swept value."""
    from shepherd.experiments import plotting
    from shepherd.experiments.confidence import mean_ci
    from shepherd.experiments.report import save_figure

    x, style = axes_of(results, list(swept or []))
    metrics = [m for m in METRICS if m in results.columns]
    data = results.with_columns(pl.col("policy").cast(pl.String))
    x_col = x or "policy"
    if style is not None:
        data = data.with_columns(pl.col(style).cast(pl.String))
    ncols = min(3, len(metrics))
    nrows = -(-len(metrics) // ncols)
    fig, axes = plotting.figure(ncols=ncols, nrows=nrows, width=4.2, height=3.2)
    order = list(dict.fromkeys(data["policy"].to_list()))
    values = sorted(v for v in data[x_col].unique().to_list() if isinstance(v, (int, float))) if x else []
    log_x = len(values) > 2 and values[0] > 0 and values[-1] / values[0] >= 8  # e.g. loads 2, 4, 8, 16
    for i, metric in enumerate(metrics):
        ax = axes[i // ncols][i % ncols]
        plotting.lines(ax, data.drop_nulls(metric), x=x_col, y=metric, hue="policy", order=order, style=style)
        ax.set_ylabel(METRICS[metric])
        ax.set_xlabel(x_col)
        if log_x:
            ax.set_xscale("log", base=2)
        if metric in ("utilization", "drop_rate"):
            ax.set_ylim(-0.02, 1.02)
        elif metric == "slo_attainment":  # zoomed to the data: the differences that matter are near 1
            ax.set_ylim(max(-0.02, float(data[metric].min() or 0.0) - 0.02), 1.005)
        if i:
            legend = ax.get_legend()
            if legend is not None:
                legend.remove()
    for j in range(len(metrics), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    trace = ", ".join(sorted(set(map(str, data["trace"].to_list())))) if "trace" in data.columns else ""
    cluster = ", ".join(sorted(set(map(str, data["cluster"].to_list())))) if "cluster" in data.columns else ""
    seeds = data["seed"].n_unique() if "seed" in data.columns else 1
    fig.suptitle(f"{name}: {trace} on {cluster}; mean ± 95 % over {seeds} seed(s)")
    plotting.synthetic_caption(fig, bool("synthetic" in data.columns and data["synthetic"].any()), data)
    figures = save_figure(fig, figures_dir, f"{name}-comparison")
    by = ["policy"] + ([x] if x else []) + ([style] if style else [])
    section = Section(f"Sweep {name}: {', '.join(METRICS[m] for m in metrics)} vs {x_col}", figures)
    section.table = _table(data, by, metrics)  # type: ignore[attr-defined] - REPORT.md's table
    return section


def is_sweep_folder(path: Path) -> bool:
    """A folder written by ``shepherd sweep`` (its resolved config marks it)."""
    from shepherd.experiments.sweep import CONFIG_NAME

    return Path(path).is_dir() and (Path(path) / CONFIG_NAME).is_file()


def report_folder(folder: Path) -> tuple[Path, Section, int]:
    """Figures into ``folder/figures`` and ``folder/REPORT.md`` from a sweep's results; (report, section, rows)."""
    import os

    from shepherd.core.artifacts import read_artifact, write_bytes_atomic
    from shepherd.core.errors import UserError
    from shepherd.experiments.report import _close_figures
    from shepherd.experiments.sweep import CONFIG_NAME, RESULTS_NAME

    folder = Path(folder)
    path = folder / RESULTS_NAME
    if not path.is_file():
        raise UserError(f"{folder} holds a sweep config but no {RESULTS_NAME}: run `shepherd sweep` to the end first")
    art = read_artifact(path, "results")
    if art.frame.height == 0:
        raise UserError(f"{path} has no finished cells")
    from shepherd.experiments.runs import read_marker

    meta = read_marker(folder / CONFIG_NAME)
    name = str(meta.get("config", {}).get("name", folder.name))
    try:
        section = draw(art.frame, folder / "figures", meta.get("swept", []), name)
    finally:
        _close_figures()
    lines = [f"# Sweep {name}", "", f"Generated by `shepherd report {folder}` from {RESULTS_NAME} "
             f"({art.frame.height} cells). Mean ± 95 % half-width over seeds.", ""]
    if bool(art.extra.get("synthetic")):
        lines += ["> **Synthetic data.** The trace is a synthetic stand-in, not a real one.", ""]
    lines += [f"![{f.stem}]({os.path.relpath(f, folder)})" for f in section.figures if f.suffix == ".png"]
    lines += ["", section.table, "", "Config: see " + CONFIG_NAME + "."]  # type: ignore[attr-defined]
    report = write_bytes_atomic(folder / "REPORT.md", ("\n".join(lines) + "\n").encode())
    return report, section, art.frame.height


def _table(data: pl.DataFrame, by: list[str], metrics: list[str]) -> str:
    """A markdown table: one row per (policy, swept value), mean ± half-width per metric."""
    from shepherd.experiments.confidence import mean_ci

    merged = None
    for metric in metrics:
        part = mean_ci(data.drop_nulls(metric), by, metric)
        if part.height == 0:
            continue
        part = part.select(*by, pl.struct("mean", "half_width").alias(metric))
        merged = part if merged is None else merged.join(part, on=by, how="full", coalesce=True)
    if merged is None:
        return "no finished cells"
    merged = merged.sort(by)
    head = "| " + " | ".join(by + [METRICS[m] for m in metrics]) + " |"
    lines = [head, "|" + "---|" * (len(by) + len(metrics))]
    for row in merged.iter_rows(named=True):
        cells = [f"{row[b]:g}" if isinstance(row[b], float) else str(row[b]) for b in by]
        for m in metrics:
            v = row.get(m)
            cells.append("—" if not v or v["mean"] is None else f"{v['mean']:.4g} ± {v['half_width']:.2g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
