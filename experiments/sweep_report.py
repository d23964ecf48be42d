"""``shepherd report RESULTS`` on a sweep's results folder: each metric against the swept variable.

One panel per metric (SLO attainment, goodput, p99 latency, utilization, drop
rate, mean batch), one line per policy, the mean over seeds with its 95 % t
interval (:mod:`shepherd.experiments.confidence`); and a table of the same
numbers in ``REPORT.md``. The x axis is the first swept variable other than
the policy and the seed; a second one is drawn as line styles. Bands and the
table's intervals are clipped to each metric's domain
(:data:`shepherd.experiments.confidence.DOMAINS`).

A load axis (× the trace's native rate) also says the offered rate in req/s
under each tick, where the results know it: every cell records its request
count and arrival span, and the rate at a load is their quotient, averaged over
the seeds — given only when, at each load and seed, the cells agree within 10 %
(two traces behind one load multiplier offer different rates).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Section

METRICS = {"slo_attainment": "SLO attainment", "goodput_rps": "goodput (req/s)",
           "p99_latency_ms": "p99 latency (ms)", "utilization": "utilization", "drop_rate": "drop rate",
           "mean_batch": "mean batch", "capacity": "capacity (× native rate)"}
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


def draw(results: pl.DataFrame, figures_dir: Path, swept: list[str] | None = None, name: str = "sweep",
         keys: list[str] | None = None) -> Section:
    """The comparison figure (PNG + PDF) and a mean ± 95 % table per policy and swept value; ``keys``:
    columns that key the table's rows before the policy (``run`` when several runs are compared)."""
    from shepherd.experiments import plotting
    from shepherd.experiments.confidence import mean_ci
    from shepherd.experiments.report import save_figure

    x, style = axes_of(results, list(swept or []))
    metrics = [m for m in METRICS if m in results.columns]
    data = results.with_columns(pl.col("policy").cast(pl.String))
    table_data = data  # the table sorts a numeric style axis by its value (the figure draws it as a label)
    x_col = x or "policy"
    if style is not None:
        data = data.with_columns(pl.col(style).cast(pl.String))
    ncols = min(3, len(metrics))
    nrows = -(-len(metrics) // ncols)
    fig, axes = plotting.figure(ncols=ncols, nrows=nrows, width=4.2, height=3.2)
    order = list(dict.fromkeys(data["policy"].to_list()))
    values = sorted(v for v in data[x_col].unique().to_list() if isinstance(v, (int, float))) if x else []
    log_x = len(values) > 2 and values[0] > 0 and values[-1] / values[0] >= 8  # e.g. loads 2, 4, 8, 16
    rates = offered_rates(data, x_col)
    for i, metric in enumerate(metrics):
        ax = axes[i // ncols][i % ncols]
        plotting.lines(ax, data.drop_nulls(metric), x=x_col, y=metric, hue="policy", order=order, style=style)
        ax.set_ylabel(METRICS[metric])
        ax.set_xlabel(x_col)
        if log_x:
            ax.set_xscale("log", base=2)
        label_rates(ax, rates)
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
    by = list(keys or []) + ["policy"] + ([x] if x else []) + ([style] if style else [])
    section = Section(f"Sweep {name}: {', '.join(METRICS[m] for m in metrics)} vs {x_col}", figures)
    section.table = _table(table_data, by, metrics,  # type: ignore[attr-defined] - REPORT.md's table
                           offered_by_run(table_data, x_col))
    return section


def offered_by_run(data: pl.DataFrame, x: str | None) -> dict[tuple[str, float], float] | None:
    """{(run, load): offered req/s, mean over seeds} — each run on its own (``run`` column; "" for a single
    run's table), given when ``x`` is the load and, within each run at every load and seed, the cells
    (policies) agree on their rate within 10 % (one trace behind each load)."""
    if x != "load" or not {"requests", "duration_s"} <= set(data.columns):
        return None
    data = data.with_columns(_run=pl.col("run").cast(pl.String) if "run" in data.columns else pl.lit(""))
    by = ["_run", "load"] + (["seed"] if "seed" in data.columns else [])
    per = (data.filter(pl.col("duration_s") > 0)
           .with_columns(rate=pl.col("requests") / pl.col("duration_s"))
           .group_by(by).agg(mean=pl.col("rate").mean(), low=pl.col("rate").min(), high=pl.col("rate").max()))
    if per.height == 0 or per.select("_run", "load").unique().height != data.select("_run", "load").unique().height:
        return None
    if any(r["high"] > 1.1 * r["low"] for r in per.iter_rows(named=True)):
        return None
    rates = per.group_by("_run", "load").agg(pl.col("mean").mean()).sort("_run", "load")
    return {(str(run), float(load)): float(rate) for run, load, rate in rates.iter_rows()}


def offered_rates(data: pl.DataFrame, x: str | None) -> dict[float, float] | None:
    """{load: offered req/s} for the load axis' tick labels: only where every run offers the same rate at
    each load (within 10 %) — two runs on different traces get no shared rate (issue 41: never their mean)."""
    by_run = offered_by_run(data, x)
    if not by_run:
        return None
    loads: dict[float, list[float]] = {}
    for (_, load), rate in by_run.items():
        loads.setdefault(load, []).append(rate)
    if any(max(v) > 1.1 * min(v) for v in loads.values()):
        return None
    return {load: sum(v) / len(v) for load, v in sorted(loads.items())}


def label_rates(ax, rates: dict[float, float] | None) -> None:  # noqa: ANN001 - a matplotlib Axes
    """Ticks at the loads, each labelled with its multiplier and its offered rate in req/s."""
    if not rates:
        return
    from matplotlib.ticker import NullFormatter

    ax.set_xticks(list(rates), [f"{load:g}×\n{rate:,.0f} req/s" for load, rate in rates.items()], fontsize=7)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("load (× native rate) · offered req/s")


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


def _table(data: pl.DataFrame, by: list[str], metrics: list[str],
           rates: dict[tuple[str, float], float] | None = None) -> str:
    """A markdown table: one row per (run, policy, swept value), mean ± half-width per metric (the interval
    clipped to the metric's domain: ``mean [low, high]`` where it was; "(1 seed)" where one seed gave it);
    ``rates``: the offered req/s per (run, load) (:func:`offered_by_run`)."""
    from shepherd.experiments.confidence import fmt_interval, mean_ci

    merged = None
    for metric in metrics:
        part = mean_ci(data.drop_nulls(metric), by, metric)
        if part.height == 0:
            continue
        part = part.select(*by, pl.struct("mean", "half_width", "n").alias(metric))
        merged = part if merged is None else merged.join(part, on=by, how="full", coalesce=True)
    if merged is None:
        return "no finished cells"
    merged = merged.sort(by)
    rate_col = ["offered (req/s)"] if rates and "load" in by else []
    head = "| " + " | ".join(by + rate_col + [METRICS[m] for m in metrics]) + " |"
    lines = [head, "|" + "---|" * (len(by) + len(rate_col) + len(metrics))]
    for row in merged.iter_rows(named=True):
        cells = [f"{row[b]:g}" if isinstance(row[b], float) else str(row[b]) for b in by]  # never None: compare.explicit
        if rate_col:
            rate = rates.get((str(row.get("run", "")), float(row["load"])))
            cells.append("—" if rate is None else f"{rate:,.0f}")
        for m in metrics:
            v = row.get(m)
            cells.append("—" if not v else fmt_interval(v["mean"], v["half_width"], m, n=v["n"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
