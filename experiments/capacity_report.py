"""A capacity grid's figure, table and REPORT.md: capacity against the grid's axis, a line per policy.

Each point is the mean over seeds (real replicas) of the capacity found by one
search per seed, with the 95 % t interval (:mod:`shepherd.experiments.confidence`)
clipped to the metric's domain (a capacity is never negative). One panel per target; the y
axis is the load multiplier, with req/s on the right where every search ran on one trace
(native rates within 10 %), and the table gives req/s beside it. The table
and REPORT.md name, per point, the **binding model** — the model that fails
first above the capacity, with how many seeds agree — and its SLO attainment at
the capacity; a point whose searches found the target not monotone in load is
marked, and the warnings (not monotone; never met) are listed.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import polars as pl

from shepherd.experiments.base import Section

NOT_X = ("policy", "policy_name", "seed", "sweep", "target_spec")


def x_axis(results: pl.DataFrame, swept: list[str]) -> str | None:
    """The first swept column (numeric first) other than policy and seed, or None."""
    cols = [c for c in swept if c in results.columns and c not in NOT_X]
    numeric = [c for c in cols if results[c].dtype.is_numeric()]
    return (numeric or cols or [None])[0]


SUMMARY = ("target_spec", "target", "policy", "seeds", "capacity", "capacity_hw", "capacity_rps", "capacity_rps_hw",
           "binding_model", "binding_seeds", "binding_attainment", "non_monotone")


def grid_columns(table: pl.DataFrame) -> list[str]:
    """The grid's axes among a :func:`summary` table's columns."""
    return [c for c in table.columns if c not in SUMMARY]


def summary(results: pl.DataFrame, swept: list[str]) -> pl.DataFrame:
    """One row per (target, policy, grid point): capacity mean ± half-width over seeds, in load and req/s,
    the binding model (most frequent over seeds, with its count) and its mean attainment at the capacity."""
    from shepherd.experiments.confidence import half_width

    by = ["target_spec", "policy"] + [c for c in swept if c in results.columns and c not in NOT_X]
    rows = []
    for key, part in results.group_by(by, maintain_order=True):
        caps = [float(v) for v in part["capacity"].to_list()]
        rps = [float(v) for v in part["capacity_rps"].to_list()]
        models = Counter(m for m in part["binding_model"].to_list() if m is not None)
        top, count = (models.most_common(1)[0] if models else ("—", 0))
        attained = [v for v, m in zip(part["binding_attainment"].to_list(), part["binding_model"].to_list())
                    if m == top and v is not None]
        rows.append({**dict(zip(by, key)), "target": part["target"][0], "seeds": part.height,
                     "capacity": sum(caps) / len(caps), "capacity_hw": half_width(caps),
                     "capacity_rps": sum(rps) / len(rps), "capacity_rps_hw": half_width(rps),
                     "binding_model": top, "binding_seeds": f"{count}/{part.height}",
                     "binding_attainment": sum(attained) / len(attained) if attained else None,
                     "non_monotone": int((~part["monotone"]).sum())})
    return pl.DataFrame(rows, infer_schema_length=None)


def draw(results: pl.DataFrame, figures_dir: Path, swept: list[str], name: str) -> Section:
    """The capacity figure (PNG + PDF): a panel per target, a line per policy, 95 % intervals over seeds."""
    from shepherd.experiments import plotting
    from shepherd.experiments.confidence import clip
    from shepherd.experiments.report import save_figure

    x = x_axis(results, swept)
    table = summary(results, swept)
    targets = list(dict.fromkeys(table["target"].to_list()))
    fig, axes = plotting.figure(ncols=len(targets), width=4.6, height=3.4)
    policies = list(dict.fromkeys(table["policy"].to_list()))
    for i, target in enumerate(targets):
        ax = axes[0][i]
        part = table.filter(pl.col("target") == target)
        for policy in policies:
            line = part.filter(pl.col("policy") == policy)
            xs = line[x].to_list() if x else [policy]
            mean, hw = line["capacity"].to_list(), line["capacity_hw"].to_list()
            bands = [clip(m - h, m + h, "capacity") for m, h in zip(mean, hw)]  # a capacity is ≥ 0: its band too
            ax.plot(xs, mean, marker="o", label=policy)
            ax.fill_between(xs, [b[0] for b in bands], [b[1] for b in bands], alpha=0.2)
        ax.set_title(target, fontsize=9)
        ax.set_xlabel(x or "policy")
        ax.set_ylabel("capacity (× native rate)")
        ax.set_ylim(bottom=0)
        if (native := native_rate(results)) is not None:  # the same capacity in req/s, on the right
            ax.secondary_yaxis("right", functions=(lambda y, k=native: y * k, lambda r, k=native: r / k)) \
                .set_ylabel("capacity (req/s)")
        ax.legend(fontsize=7)
    trace = ", ".join(sorted(set(map(str, results["trace"].to_list()))))
    synthetic = " — synthetic workload" if bool(results["synthetic"].any()) else ""
    seeds = results["seed"].n_unique() if "seed" in results.columns else 1
    fig.suptitle(f"{name}: capacity on {trace}; mean ± 95 % over {seeds} replica(s){synthetic}", fontsize=9)
    figures = save_figure(fig, figures_dir, f"{name}-capacity")
    section = Section(f"Capacity {name}: vs {x or 'policy'}", figures)
    section.table = markdown(table, x)  # type: ignore[attr-defined] - REPORT.md's table
    return section


def native_rate(results: pl.DataFrame) -> float | None:
    """The trace's native rate (req/s) when every search ran on one (its replicas within 10 %), else None."""
    if "native_rps" not in results.columns or results.height == 0:
        return None
    rates = results["native_rps"].drop_nulls()
    if rates.len() == 0 or rates.min() <= 0 or rates.max() > 1.1 * rates.min():
        return None
    return float(rates.mean())


def markdown(table: pl.DataFrame, x: str | None) -> str:
    """The summary as a markdown table (one row per target, policy and grid point); intervals clipped at 0."""
    from shepherd.experiments.confidence import fmt_interval

    axes = grid_columns(table)
    head = ["target", "policy", *axes, "capacity (× native)", "capacity (req/s)", "binding model (seeds)",
            "its attainment at capacity", "non-monotone seeds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table.iter_rows(named=True):
        att = row["binding_attainment"]
        cells = [row["target"], row["policy"], *[f"{row[a]:g}" if isinstance(row[a], float) else str(row[a])
                                                 for a in axes],
                 fmt_interval(row["capacity"], row["capacity_hw"], "capacity"),
                 fmt_interval(row["capacity_rps"], row["capacity_rps_hw"], "capacity_rps"),
                 f"{row['binding_model']} ({row['binding_seeds']})",
                 "—" if att is None else f"{100 * att:.2f} %", str(row["non_monotone"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(folder: Path, results: pl.DataFrame, swept: list[str], name: str, marker: str) -> tuple[Path, Section]:
    """``folder/figures/<name>-capacity.png`` and ``folder/REPORT.md`` from a capacity grid's results."""
    from shepherd.core.artifacts import write_bytes_atomic
    from shepherd.experiments.report import _close_figures

    try:
        section = draw(results, folder / "figures", swept, name)
    finally:
        _close_figures()
    warnings = sorted(set(w for w in results["warning"].to_list() if w))
    lines = [f"# Capacity {name}", "", f"Generated by `shepherd capacity` into {folder.name}/ ({results.height} "
             "searches). Capacity: the highest load (× the trace's native rate) at which the target held; mean ± "
             "95 % half-width over seeds. Binding model: the model that fails first above the capacity.", ""]
    if bool(results["synthetic"].any()):
        lines += ["> **Synthetic data.** The trace is a synthetic stand-in, not a real one.", ""]
    lines += [f"![{f.stem}]({os.path.relpath(f, folder)})" for f in section.figures if f.suffix == ".png"]
    lines += ["", section.table, ""]  # type: ignore[attr-defined]
    if warnings:
        lines += ["## Warnings", ""] + [f"* {w}" for w in warnings] + [""]
    lines += [f"Config: see {marker}."]
    return write_bytes_atomic(folder / "REPORT.md", ("\n".join(lines) + "\n").encode()), section


def is_capacity_folder(path: Path) -> bool:
    """A folder written by ``shepherd capacity`` (its resolved config marks it)."""
    from shepherd.experiments.capacity_sweep import MARKER

    return Path(path).is_dir() and (Path(path) / MARKER).is_file()


def report_folder(folder: Path) -> tuple[Path, Section, int]:
    """``shepherd report FOLDER`` on a capacity grid's results: the figure and REPORT.md drawn again."""

    from shepherd.core.artifacts import read_artifact
    from shepherd.core.errors import UserError
    from shepherd.experiments.capacity_sweep import MARKER, RESULTS_NAME

    folder = Path(folder)
    path = folder / RESULTS_NAME
    if not path.is_file():
        raise UserError(f"{folder} holds a capacity config but no {RESULTS_NAME}: run `shepherd capacity` to the end")
    frame = read_artifact(path, "results").frame
    if frame.height == 0:
        raise UserError(f"{path} has no finished searches")
    from shepherd.experiments.runs import read_marker

    meta = read_marker(folder / MARKER)
    name = str(meta.get("config", {}).get("name", folder.name))
    report, section = write_report(folder, frame, list(meta.get("swept", [])), name, MARKER)
    return report, section, frame.height
