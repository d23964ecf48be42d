"""``shepherd report A B … [--baseline POLICY]``: several runs compared on their shared axes, and paired
per-seed ratios against a baseline policy (issue 29, "comparisons stop at one sweep").

A *run* is a folder written by ``shepherd sweep`` (``sweep.json``), ``shepherd
capacity`` (``capacity.json``) or ``shepherd simulate`` (``summary.parquet``).
Their results tables are stacked with a ``run`` column (the run's name):

* **Axes** are the parameter columns every run has (policy, load, slo_ms,
  seed, gpus, trace, cluster, ``option.*``, ``trace.*``, a capacity target);
  runs that share none but the policy, or no metric, are refused with one line.
  The x axis is the first varying shared axis (numeric first, load before the
  rest), a second one is drawn as line styles, and any further varying axis
  joins the line's label. A policy that appears in several runs is labelled
  ``run · policy``.
* **The comparison** is :func:`shepherd.experiments.sweep_report.draw` over the
  stacked table: a panel per metric, a line per label, mean ± 95 % over seeds.
* **Paired ratios** (``--baseline``): every row is divided, metric by metric,
  by the baseline policy's row at the same point — the same value of every
  varying shared axis, the seed included (same seed = same arrivals: a paired
  design, so the seed-to-seed spread of the workload cancels). The baseline
  row comes from the same run where that run has one, else from the one run
  that does (two candidates: refused as ambiguous). A ratio whose baseline is
  0 (a drop rate of 0, say) is undefined and left out. Per label and point the
  ratios' mean and 95 % t interval over seeds are tabulated and drawn (ratio
  vs the x axis, a line per policy, 1.0 drawn), the interval clipped at 0
  (:data:`shepherd.experiments.confidence.DOMAINS`, ``*_ratio``); and a
  second table counts the paired points above and below 1 — a policy ahead
  of its baseline at every seed and load shows as ``9↑ 0↓ of 9`` even where
  the two bands overlap in the comparison figure.

One run and no ``--baseline`` is the single-run report
(:mod:`~shepherd.experiments.sweep_report`, :mod:`~shepherd.experiments.capacity_report`).
One run with ``--baseline`` writes into that run's folder; several runs into
``RESULTS/comparisons/<A>-vs-<B>…``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import polars as pl

from shepherd.core.errors import UserError

#: parameter columns that can be a comparison's axis, in the order the x axis is chosen
AXES = ("load", "slo_ms", "gpus", "max_batch", "target_spec", "trace", "cluster", "plan", "profiles", "seed")
NOT_LABEL = ("policy", "seed")
RATIO_METRICS = ("slo_attainment", "goodput_rps", "p99_latency_ms", "utilization", "drop_rate", "mean_batch",
                 "capacity")
#: columns carried along beside axes and metrics (offered rate; the synthetic flag)
CARRIED = ("requests", "duration_s", "synthetic")
#: what an axis left unset in a run means, written where the value would be (never None): a run without
#: ``run.slo_ms`` keeps each request's own SLO from its trace
UNSET = {"slo_ms": "trace's own", "load": "trace's own rate", "gpus": "the plan's", "plan": "none",
         "max_batch": "the profile's", "profiles": "default", "trace": "—", "cluster": "—"}
#: inputs that, where compared runs differ in them, earn a one-line notice in REPORT.md: (label, columns)
INPUTS = (("trace", ("trace", "trace_sha256")), ("profile", ("profiles", "profiles_sha256")),
          ("SLO", ("slo_ms",)), ("cluster", ("cluster",)), ("cluster", ("gpus", "plan_sha256")))


@dataclasses.dataclass
class Run:
    """One run's results: its name, kind (sweep, capacity, simulate), folder and table."""

    name: str
    kind: str
    folder: Path
    frame: pl.DataFrame

    def axes(self) -> list[str]:
        return [c for c in self.frame.columns if c in AXES or c == "policy" or c.startswith(("option.", "trace."))]

    def metrics(self) -> list[str]:
        return [m for m in RATIO_METRICS if m in self.frame.columns]


def load_run(folder: Path) -> Run:
    """A run from its folder (sweep, capacity grid or simulate output); anything else: one-line error."""
    from shepherd.core.artifacts import read_artifact
    from shepherd.experiments.runs import GRID_MARKERS

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder: give the folders written by `shepherd sweep`, "
                        "`shepherd capacity` or `shepherd simulate`")
    marker = next((m for m in GRID_MARKERS if (folder / m).is_file()), None)
    if marker is not None:
        kind = GRID_MARKERS[marker]
        try:
            meta = json.loads((folder / marker).read_text())
        except (OSError, ValueError) as exc:
            raise UserError(f"{folder / marker} is damaged ({type(exc).__name__}): rerun `shepherd {kind}`") from None
        if not (folder / "results.parquet").is_file():
            raise UserError(f"{folder} has no results.parquet: run `shepherd {kind}` to the end first")
        frame = read_artifact(folder / "results.parquet", "results").frame
        name = str(meta.get("config", {}).get("name") or folder.name)
    elif (folder / "summary.parquet").is_file():
        kind, frame, name = "simulate", read_artifact(folder / "summary.parquet", "summary").frame, folder.name
    else:
        raise UserError(f"{folder} is not a run's folder (no sweep.json, capacity.json or summary.parquet)")
    if frame.height == 0 or "policy" not in frame.columns:
        raise UserError(f"{folder} has no finished results")
    return Run(name, kind, folder, frame.with_columns(pl.col("policy").cast(pl.String)))


@dataclasses.dataclass
class Combined:
    """Runs stacked on their shared axes: the table, the axes that vary, the metrics and the line labels."""

    frame: pl.DataFrame  # run, label, policy, the shared axes, the shared metrics, carried columns
    x: str | None
    style: str | None
    varying: list[str]  # varying shared axes except policy (seed included): a paired point's key
    metrics: list[str]


def combine(runs: list[Run]) -> Combined:
    """Stack ``runs`` on their shared axes (one-line refusal when they share no axis or no metric)."""
    names = [r.name for r in runs]
    if len(set(names)) < len(names):  # two runs of one name: tell them apart by folder
        names = [f"{r.name} ({r.folder})" for r in runs]
    shared = [a for a in runs[0].axes() if all(a in r.frame.columns for r in runs[1:])]
    if not [a for a in shared if a != "policy"]:
        listing = "; ".join(f"{n}: {', '.join(a for a in r.axes() if a != 'policy') or 'none'}"
                            for n, r in zip(names, runs))
        raise UserError(f"these runs share no axis to compare on ({listing})")
    metrics = [m for m in runs[0].metrics() if all(m in r.frame.columns for r in runs[1:])]
    if not metrics:
        listing = "; ".join(f"{n} ({r.kind}): {', '.join(r.metrics()) or 'none'}" for n, r in zip(names, runs))
        raise UserError(f"these runs share no metric to compare ({listing})")
    carried = [c for c in CARRIED if all(c in r.frame.columns for r in runs)]
    parts = []
    for n, r in zip(names, runs):  # a run's own varying axes the others lack join its lines' labels
        own = [a for a in r.axes() if a not in shared and a != "seed" and r.frame[a].n_unique() > 1]
        extra = _with_axes(pl.lit(""), own)
        parts.append(r.frame.with_columns(run=pl.lit(n, pl.String), _extra=extra)
                     .select("run", *shared, *metrics, *carried, "_extra"))
    frame = explicit(pl.concat(parts, how="vertical_relaxed"), [a for a in shared if a != "policy"])
    varying, options, x, style, rest = _layout(frame, [a for a in shared if a != "policy"])
    # a policy is told apart by its run where two runs have it at one point; axes beyond x and style join the label
    repeated = (frame.group_by("policy", *varying).agg(pl.col("run").n_unique().alias("k"))
                .filter(pl.col("k") > 1).height > 0)
    label = pl.col("run") + pl.lit(" · ") + pl.col("policy") if repeated else pl.col("policy")
    label = _with_axes(label, rest[1:] + options)
    frame = frame.with_columns(label=label + pl.col("_extra")).drop("_extra")
    return Combined(frame, x, style, varying, metrics)


def explicit(frame: pl.DataFrame, axes: list[str]) -> pl.DataFrame:
    """Each axis with a null anywhere (a run that left it unset) as text with the null written as what it
    means (:data:`UNSET`: ``slo_ms`` → "trace's own"), so a row is never keyed, drawn or tabulated as None.
    A policy option (``option.*``) stays null where the policy has no such option: it only labels lines."""
    out = []
    for a in axes:
        if a.startswith("option.") or frame[a].null_count() == 0:
            continue
        words = [UNSET.get(a, "unset") if v is None else (f"{v:g}" if isinstance(v, float) else str(v))
                 for v in frame[a].to_list()]
        out.append(pl.Series(a, words, pl.String))
    return frame.with_columns(out) if out else frame


def _value(col: str, v) -> str:  # noqa: ANN001 - a cell's value
    if v is None:
        return UNSET.get(col, "unset")
    if col == "slo_ms" and isinstance(v, (int, float)):
        return f"{v:g} ms"
    if col.endswith("sha256"):
        return f"sha256 {str(v)[:12]}"
    return f"{v:g}" if isinstance(v, float) else str(v)


def input_notices(runs: list[Run], names: list[str] | None = None) -> list[str]:
    """One line per input (:data:`INPUTS`: trace, profile, SLO, cluster) in which the compared runs differ,
    naming each run's value(s); none where they agree. An input a run does not record reads "not recorded"."""
    names = names or [r.name for r in runs]
    out, said = [], set()
    for label, cols in INPUTS:
        if label in said or not any(cols[0] in r.frame.columns for r in runs):
            continue  # the cluster: by its label where the runs have one, else by GPUs and plan
        per = []
        for r in runs:
            present = [c for c in cols if c in r.frame.columns]
            per.append(sorted({_describe(present, row) for row in r.frame.select(present).unique().iter_rows()})
                       if present else ["not recorded"])
        said.add(label)
        if any(p != per[0] for p in per[1:]):
            out.append(f"**Inputs differ — {label}:** " + "; ".join(f"{n}: {', '.join(p)}" for n, p in zip(names, per))
                       + ".")
    return out


def _describe(cols: list[str], row: tuple) -> str:
    parts = [_value(c, v) for c, v in zip(cols, row) if v is not None]
    return " ".join(parts) if parts else _value(cols[0], None)


def paired_ratios(comb: Combined, baseline: str) -> pl.DataFrame:
    """One row per (row of a non-baseline policy, metric): ``ratio`` = its value / the baseline's at the same
    point (same run where it has the baseline, else the one run that does). Columns: label, policy, run, the
    varying axes, metric, ratio."""
    frame = comb.frame
    if baseline not in set(frame["policy"].to_list()):
        raise UserError(f"--baseline {baseline}: no such policy in these runs "
                        f"(policies: {', '.join(sorted(set(frame['policy'].to_list())))})")
    key = comb.varying
    base: dict[tuple, dict[str, dict]] = {}
    for row in frame.filter(pl.col("policy") == baseline).iter_rows(named=True):
        point = base.setdefault(tuple(row[k] for k in key), {})
        if row["run"] in point:
            raise UserError(f"--baseline {baseline}: {row['run']} has it twice at "
                            f"{', '.join(f'{k}={row[k]}' for k in key) or 'one point'} (another axis varies: "
                            "compare one setting at a time)")
        point[row["run"]] = row
    out = []
    for row in frame.filter(pl.col("policy") != baseline).iter_rows(named=True):
        point = tuple(row[k] for k in key)
        found = base.get(point, {})
        if row["run"] in found:
            ref = found[row["run"]]
        elif len(found) == 1:
            ref = next(iter(found.values()))
        elif not found:
            continue
        else:
            raise UserError(f"--baseline {baseline}: runs {', '.join(sorted(found))} each have it at "
                            f"{', '.join(f'{k}={v}' for k, v in zip(key, point))}; compare one of them at a time")
        for m in comb.metrics:
            v, b = row[m], ref[m]
            ratio = None if v is None or b is None or b == 0 else float(v) / float(b)
            out.append({"label": row["label"], "policy": row["policy"], "run": row["run"],
                        **{k: row[k] for k in key}, "metric": m, "ratio": ratio})
    if not out:
        raise UserError(f"--baseline {baseline}: no point of another policy shares "
                        f"{', '.join(key) or 'a point'} with it, so nothing pairs")
    return pl.DataFrame(out, infer_schema_length=None).with_columns(pl.col("ratio").cast(pl.Float64))


def ratio_summary(ratios: pl.DataFrame, comb: Combined) -> pl.DataFrame:
    """Per label, drawn point and metric: the mean ratio over seeds, its 95 % interval clipped at 0
    (``low``, ``high``, ``half_width``), ``n`` and the counts of paired points above and below 1."""
    from shepherd.experiments.confidence import half_width, interval

    by = _run_key(ratios) + ["label", "metric"] + [a for a in (comb.x, comb.style) if a]
    rows = []
    for keys, part in ratios.group_by(by, maintain_order=True):
        vals = [v for v in part["ratio"].to_list() if v is not None]
        mean, low, high = interval(vals, "ratio")
        rows.append({**dict(zip(by, keys)), "mean": mean, "half_width": half_width(vals), "low": low,
                     "high": high, "n": len(vals), "above": sum(v > 1 for v in vals),
                     "below": sum(v < 1 for v in vals)})
    return pl.DataFrame(rows, infer_schema_length=None)


def _run_key(ratios: pl.DataFrame) -> list[str]:
    """["run"] where the ratios come from several runs (a row per run, policy and point), else []."""
    return ["run"] if ratios["run"].n_unique() > 1 else []


def ratio_tables(ratios: pl.DataFrame, comb: Combined, baseline: str) -> str:
    """Markdown: the mean paired ratio per label and point (one column per metric), then the per-label count
    of paired points above and below 1."""
    from shepherd.experiments.confidence import fmt_interval
    from shepherd.experiments.sweep_report import METRICS

    summ = ratio_summary(ratios, comb)
    run = _run_key(ratios)
    axes = [a for a in (comb.x, comb.style) if a]
    metrics = [m for m in comb.metrics if m in set(summ["metric"].to_list())]
    head = run + ["policy", *axes] + [f"{METRICS.get(m, m)} ÷ {baseline}" for m in metrics]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    points = summ.select(*run, "label", *axes).unique(maintain_order=True).sort([*run, "label", *axes])
    for point in points.iter_rows(named=True):
        cells = [str(point[k]) for k in run] + [str(point["label"])] + [
            f"{point[a]:g}" if isinstance(point[a], float) else str(point[a]) for a in axes]
        for m in metrics:
            hit = summ.filter(pl.col("metric") == m, *[pl.col(k).eq_missing(v) for k, v in point.items()])
            r = hit.row(0, named=True) if hit.height else None
            cells.append("—" if r is None or not r["n"] else
                         fmt_interval(r["mean"], r["half_width"], f"{m}_ratio", n=r["n"]))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Paired points (one per {', '.join(comb.varying) or 'point'}) where the policy's value is above "
              f"↑ or below ↓ {baseline}'s:", ""]
    head = run + ["policy"] + [METRICS.get(m, m) for m in metrics]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in ratios.select(*run, "label").unique().sort([*run, "label"]).iter_rows(named=True):
        cells = [str(key[k]) for k in run] + [key["label"]]
        for m in metrics:
            vals = [v for v in ratios.filter(*[pl.col(k) == v for k, v in key.items()], pl.col("metric") == m)
                    ["ratio"].to_list() if v is not None]
            cells.append(f"{sum(v > 1 for v in vals)}↑ {sum(v < 1 for v in vals)}↓ of {len(vals)}" if vals else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def draw_ratios(ratios: pl.DataFrame, comb: Combined, baseline: str, figures_dir: Path, name: str) -> list[Path]:
    """The paired-ratio figure: a panel per metric, ratio vs the x axis, a line per policy, 1.0 drawn."""
    from shepherd.experiments import plotting
    from shepherd.experiments.report import save_figure
    from shepherd.experiments.sweep_report import METRICS, label_rates, offered_rates

    metrics = [m for m in comb.metrics if ratios.filter(pl.col("metric") == m)["ratio"].drop_nulls().len()]
    x = comb.x or "policy"
    data = ratios.drop_nulls("ratio").drop("policy").rename({"label": "policy"})
    if comb.style:
        data = data.with_columns(pl.col(comb.style).cast(pl.String))
    ncols = min(3, max(1, len(metrics)))
    nrows = max(1, -(-len(metrics) // ncols))
    fig, axes = plotting.figure(ncols=ncols, nrows=nrows, width=4.2, height=3.2)
    order = sorted(set(data["policy"].to_list()))
    rates = offered_rates(comb.frame, comb.x)
    values = sorted(v for v in data[x].unique().to_list() if isinstance(v, (int, float))) if comb.x else []
    log_x = len(values) > 2 and values[0] > 0 and values[-1] / values[0] >= 8
    for i, metric in enumerate(metrics):
        ax = axes[i // ncols][i % ncols]
        plotting.lines(ax, data.filter(pl.col("metric") == metric), x=x, y="ratio", hue="policy", order=order,
                       style=comb.style, metric=f"{metric}_ratio")
        ax.axhline(1.0, color="black", linewidth=1.0, linestyle="--", label=f"= {baseline}")
        ax.set_ylabel(f"{METRICS.get(metric, metric)} ÷ {baseline}")
        ax.set_xlabel(x)
        if log_x:
            ax.set_xscale("log", base=2)
        label_rates(ax, rates)
        legend = ax.get_legend()
        if i and legend is not None:
            legend.remove()
    for j in range(len(metrics), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    seeds = comb.frame["seed"].n_unique() if "seed" in comb.frame.columns else 1
    fig.suptitle(f"{name}: paired ratio to {baseline} at the same {', '.join(comb.varying) or 'point'}; "
                 f"mean ± 95 % over {seeds} seed(s)", fontsize=9)
    synthetic = bool("synthetic" in comb.frame.columns and comb.frame["synthetic"].any())
    plotting.synthetic_caption(fig, synthetic, comb.frame)
    return save_figure(fig, figures_dir, f"{name}-vs-{baseline}")


def comparison_name(runs: list[Run]) -> str:
    """``A-vs-B…``: the runs' names, made safe for a folder name."""
    safe = ["".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in r.name) for r in runs]
    return "-vs-".join(safe)


def report(folders: list[Path], baseline: str | None, results: Path) -> tuple[Path, list[Path], int]:
    """``shepherd report A B … [--baseline P]``: the comparison (and ratio) figures and REPORT.md; returns
    (report, PNG figures, rows compared). One folder: its own report, written into it, with the ratio section
    added; several: RESULTS/comparisons/<name>."""
    from shepherd.core.artifacts import write_bytes_atomic
    from shepherd.experiments.report import _close_figures

    runs = [load_run(Path(f)) for f in folders]
    comb = combine(runs) if len(runs) > 1 else _single(runs[0])
    ratios = paired_ratios(comb, baseline) if baseline else None  # bad --baseline: refused before anything is drawn
    command = f"shepherd report {' '.join(str(f) for f in folders)}{f' --baseline {baseline}' if baseline else ''}"
    single = len(runs) == 1 and runs[0].kind in ("sweep", "capacity")
    if single:
        out, name = runs[0].folder, runs[0].name
        text, figures = _single_report(runs[0])
    else:
        name = comparison_name(runs) if len(runs) > 1 else runs[0].name
        out = runs[0].folder if len(runs) == 1 else Path(results) / "comparisons" / name
        text, figures = _comparison_report(runs, comb, out, name, command)
    if ratios is not None:
        try:
            ratio_figs = draw_ratios(ratios, comb, baseline, out / "figures", name)
        finally:
            _close_figures()
        figures += ratio_figs
        text += "\n".join([
            "", f"## Paired ratios to {baseline}", "",
            f"From `{command}`. Each policy's metric divided by {baseline}'s at the same "
            f"{', '.join(comb.varying) or 'point'} (same seed: the same arrivals), then the mean and 95 % interval "
            "over seeds, clipped at 0 (`mean [low, high]` where clipped). A ratio over a baseline of 0 is "
            "undefined (—).", "",
            *[f"![{f.stem}]({os.path.relpath(f, out)})" for f in ratio_figs if f.suffix == ".png"],
            "", ratio_tables(ratios, comb, baseline), ""])
    path = write_bytes_atomic(out / "REPORT.md", text.encode())
    return path, [f for f in figures if f.suffix == ".png"], comb.frame.height


def _single_report(run: Run) -> tuple[str, list[Path]]:
    """A sweep's or capacity grid's own REPORT.md text and figures (as ``shepherd report FOLDER`` draws them)."""
    if run.kind == "capacity":
        from shepherd.experiments.capacity_report import report_folder
    else:
        from shepherd.experiments.sweep_report import report_folder
    path, section, _ = report_folder(run.folder)
    return path.read_text(), list(section.figures)


def _comparison_report(runs: list[Run], comb: Combined, out: Path, name: str, command: str) -> tuple[str, list[Path]]:
    """Several runs on their shared axes: the comparison figure and table (REPORT.md text, figures)."""
    from shepherd.experiments.report import _close_figures
    from shepherd.experiments.sweep_report import draw

    try:
        section = draw(comb.frame.with_columns(policy=pl.col("label")), out / "figures",
                       [a for a in (comb.x, comb.style) if a], name, keys=["run"] if len(runs) > 1 else None)
    finally:
        _close_figures()
    notices = input_notices(runs, sorted(set(comb.frame["run"].to_list()), key=comb.frame["run"].to_list().index))
    lines = [f"# Comparison {name}", "", f"Generated by `{command}`. Mean ± 95 % half-width over seeds, clipped to "
             "each metric's domain (`mean [low, high]` where clipped).", "",
             "Runs: " + ", ".join(f"{r.name} ({r.kind}, {r.frame.height} rows)" for r in runs) + ".",
             f"Axes: x = {comb.x or '—'}{f', style = {comb.style}' if comb.style else ''}; "
             f"points paired on {', '.join(comb.varying) or '—'}.", ""]
    for n in notices:  # one line each, its own paragraph
        lines += [f"> {n}", ""]
    if bool("synthetic" in comb.frame.columns and comb.frame["synthetic"].any()):
        lines += ["> **Synthetic data.** A trace is a synthetic stand-in, not a real one.", ""]
    lines += [f"![{f.stem}]({os.path.relpath(f, out)})" for f in section.figures if f.suffix == ".png"]
    lines += ["", section.table, ""]  # type: ignore[attr-defined]
    return "\n".join(lines), list(section.figures)


def _single(run: Run) -> Combined:
    """One run as a comparison of its own policies (the axes it swept)."""
    axes = [a for a in run.axes() if a != "policy"]
    frame = explicit(run.frame.with_columns(run=pl.lit(run.name, pl.String)), axes)
    varying, options, x, style, rest = _layout(frame, axes)
    if run.kind == "capacity" and "target_spec" in frame.columns and "target_spec" not in varying:
        varying.append("target_spec")  # a capacity row is one target's search: pair within it
    label = _with_axes(pl.col("policy"), rest[1:] + options)
    carried = [c for c in CARRIED if c in frame.columns]
    frame = frame.select("run", "policy", *axes, *run.metrics(), *carried).with_columns(label=label)
    return Combined(frame, x, style, varying, run.metrics())


def _with_axes(label: pl.Expr, axes: list[str]) -> pl.Expr:
    """``label`` followed by `` axis=value`` for each of ``axes`` where the row has a value (a policy option
    is null for the policies without it)."""
    for a in axes:
        label = label + (pl.lit(f" {a}=") + pl.col(a).cast(pl.String)).fill_null("")
    return label


def _layout(frame: pl.DataFrame, axes: list[str]) -> tuple[list[str], list[str], str | None, str | None, list[str]]:
    """(varying, options, x, style, drawn but x) among ``axes``: the axes that vary, in :data:`AXES` order
    (load first), less any that only renames an earlier one (``cluster`` beside ``gpus``); the policy options
    among them (labels, not axes); the x axis (numeric first) and the line-style axis."""
    def rank(a: str) -> int:
        return AXES.index(a) if a in AXES else len(AXES)

    varying: list[str] = []
    for a in sorted((a for a in axes if frame[a].n_unique() > 1), key=rank):
        if not any(frame.select(b, a).unique().height == frame[b].n_unique() == frame[a].n_unique() for b in varying):
            varying.append(a)
    options = [a for a in varying if a.startswith("option.")]  # a policy's own knob: part of its label
    varying = [a for a in varying if a not in options]
    drawn = [a for a in varying if a != "seed"]
    numeric = [a for a in drawn if frame[a].dtype.is_numeric()]
    x = (numeric or drawn or [None])[0]
    rest = [a for a in drawn if a != x]
    return varying, options, x, (rest[0] if rest else None), rest
