"""``shepherd reproduce`` and ``shepherd report``: paper figures, end to end."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Iterator, List, Optional

import typer

from shepherd.cli import complete
from shepherd.cli.grid_run import ADDRESS_HELP, JOBS_HELP, default_jobs, ray_address
from shepherd.cli.log import run_log
from shepherd.cli.seeds import replica_count
from shepherd.core.errors import UserError

# polars, the experiments and the solvers are imported inside the functions: `--help` stays fast
if TYPE_CHECKING:
    from rich.progress import Progress

RESULTS = Path("results")


def reproduce(
    experiments: Annotated[Optional[List[str]], typer.Argument(autocompletion=complete.experiment_names, help="Experiments or paper names (e.g. shepherd, shepherd-fig7).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Shrink durations and scale (minutes, not hours).")] = False,
    replicas: Annotated[Optional[int], typer.Option("--replicas", help="Replicas per cell, seeds 0 … N−1 (default 3, or 1 with --quick).")] = None,
    seeds: Annotated[Optional[str], typer.Option("--seeds", help="The seeds as a list, 0,1,…,N−1 (= --replicas N); a bare N is the deprecated count.")] = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help=JOBS_HELP)] = None,
    executor: Annotated[str, typer.Option("--executor", help="local | ray")] = "local",
    ray_addr: Annotated[Optional[str], typer.Option("--ray-address", help=ADDRESS_HELP)] = None,
    address: Annotated[Optional[str], typer.Option("--address", hidden=True, help="Deprecated: --ray-address.")] = None,
    results: Annotated[Path, typer.Option("--results", "-o", "--out", help="Results directory.")] = RESULTS,
    list_: Annotated[bool, typer.Option("--list", help="List the experiments and exit.")] = False,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write figures and REPORT.md at the end.")] = True,
) -> None:
    """Run every cell of the named experiments (skipping finished ones), then report.

    Example: shepherd reproduce shepherd --quick
    """
    import polars as pl

    from shepherd.cli.common import frame_table, summary_table
    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.experiments import registry, runner
    from shepherd.experiments.base import Scale, is_synthetic
    from shepherd.experiments.report import build_report
    from shepherd.solvers.backend import preflight

    if list_:
        rows = [{"experiment": e.name, "paper": e.paper, "what": e.title}
                for e in registry.all_experiments().values()]
        frame_table("experiments", pl.DataFrame(rows, schema={"experiment": pl.String, "paper": pl.String, "what": pl.String}))
        return
    if not experiments:
        raise UserError("name an experiment or a paper (see `shepherd reproduce --list`)")
    seeds_n = replica_count(replicas, seeds)
    workers = default_jobs(jobs)
    address = ray_address(ray_addr, address)
    chosen = registry.resolve(experiments)
    scale = Scale.default(quick, seeds_n)
    runner.check_executor(executor, address)
    # the experiments' planners solve with HiGHS: a broken build fails here, before anything is written
    preflight("highs")
    for exp in chosen:  # the authors' data an experiment reads (PPipe's): missing → one line, no folder made
        exp.check_inputs(scale)
    runner.check_writable(results)
    prepared = [line for e in chosen if (line := e.prepare(results, scale))]  # inputs a grid needs (measured profiles)
    grids = runner.validate_grid(chosen, scale, results)  # the whole grid and every output, before any cell
    totals = {"cells": 0, "skipped": 0, "ran": 0, "recomputed": 0}
    reused = Reused()
    grand = sum(len(cells) for cells in grids.values())
    done = 0
    with run_log(results / runner.LOG_NAME) as log, _bar(not log.echo) as bar, _log_failure(log):
        log(f"reproduce {' '.join(e.name for e in chosen)}: {grand} cells into {results}"
            f"{' (quick)' if quick else ''}, seeds {scale.seeds}")
        for line in prepared:
            log(line)
        for exp in chosen:
            cells = grids[exp.name]
            finished = len(cells) - len(runner.pending(cells, results))
            shared_here = reused.shared_by(exp.name, cells, results)
            done += finished
            task = bar.add_task(exp.name, total=len(cells)) if bar else None
            if bar:
                bar.advance(task, finished)
            log(f"[{done}/{grand}] {exp.name}: {finished} of {len(cells)} cells already done")

            def on_done(cell, seconds, task=task):
                nonlocal done
                done += 1
                if bar:
                    bar.advance(task)
                how = "done by another run" if seconds is None else f"done in {seconds:.1f} s"
                log(f"[{done}/{grand}] cell {runner.describe(cell)} {how}")
                reused.computed(cell, exp.name, results)

            stats = runner.run_cells(cells, results, executor=executor, jobs=1 if exp.exclusive else workers,
                                     address=address, on_done=on_done, log=log, log_file=log.file)
            frame = runner.collect(cells, results)
            synthetic = is_synthetic(frame)
            written = write_artifact(frame, runner.results_path(results, exp.name), "results",
                                     # how it ran (--jobs, --executor, where) is not an input: a fixed command
                                     make_provenance({"experiment": exp.name, "quick": quick, "seeds": scale.seeds},
                                                     seed=None, argv=["shepherd", "reproduce", exp.name]),
                                     extra={"synthetic": synthetic})
            reused.add(stats, shared_here)
            log(f"{exp.name}: {stats.ran} ran ({stats.recomputed} recomputed), {stats.skipped} cached"
                f"{reused.why(stats.skipped, stats.shared, shared_here, results)} → {written}")
            totals["cells"] += stats.total
            totals["skipped"] += stats.skipped
            totals["ran"] += stats.ran
            totals["recomputed"] += stats.recomputed
        rows = {"experiments": ", ".join(e.name for e in chosen), **totals, "results": results}
        rows["skipped"] = f"{totals['skipped']}{reused.why(totals['skipped'], reused.concurrent, reused.here, results)}"
        if report:
            path, _ = build_report(chosen, results)
            rows["report"] = path
            log(f"report written to {path}")
    summary_table("reproduce", rows)


class Reused:
    """Why cells were skipped: finished results reused, and whose (the summary says it, not just a count).

    A cell is skipped when its result file is already there: computed earlier in this run by another
    experiment that shares the cell (Fig. 8 reads Fig. 7's cells), by an earlier run into the same folder,
    or by another run on the folder at the same time.
    """

    def __init__(self) -> None:
        self.by: dict[Path, str] = {}  # cell file → the experiment of this run that computed it
        self.here: dict[str, int] = {}  # experiment that computed cells → how many others reused
        self.concurrent = 0

    def computed(self, cell, experiment: str, results: Path) -> None:  # noqa: ANN001 - a Cell
        self.by.setdefault(cell.path(results), experiment)

    def shared_by(self, experiment: str, cells, results: Path) -> dict[str, int]:  # noqa: ANN001
        """Of ``cells``, those another experiment computed earlier in this run: {that experiment: count}."""
        out: dict[str, int] = {}
        for cell in cells:
            who = self.by.get(cell.path(results))
            if who is not None and who != experiment:
                out[who] = out.get(who, 0) + 1
        return out

    def add(self, stats, shared_here: dict[str, int]) -> None:  # noqa: ANN001 - a RunStats
        self.concurrent += stats.shared
        for who, n in shared_here.items():
            self.here[who] = self.here.get(who, 0) + n

    @staticmethod
    def why(skipped: int, concurrent: int, shared_here: dict[str, int], results: Path) -> str:
        """`` (finished results reused: 6 shared with shepherd-fig7, computed earlier in this run)``, or ''."""
        if not skipped:
            return ""
        here = sum(shared_here.values())
        parts = [f"{n} shared with {who}, computed earlier in this run" for who, n in sorted(shared_here.items())]
        if concurrent:
            parts.append(f"{concurrent} computed meanwhile by another run on {results}")
        earlier = skipped - here - concurrent
        if earlier > 0:
            parts.append(f"{earlier} from an earlier run into {results}")
        return f" (finished results reused: {'; '.join(parts)})"


@contextmanager
def _log_failure(log) -> Iterator[None]:  # noqa: ANN001 - a RunLog
    """Leave the reason a run stopped in the log file too (the CLI prints it on stderr)."""
    try:
        yield
    except UserError as exc:
        log(f"stopped: {exc}", echo=False)
        raise
    except KeyboardInterrupt:
        log("stopped: interrupted", echo=False)
        raise
    except Exception as exc:
        log(f"stopped: internal error: {type(exc).__name__}: {exc}", echo=False)
        raise


@contextmanager
def _bar(show: bool) -> Iterator[Progress | None]:
    """The rich bar on a terminal; None in a batch job (the log lines say it instead)."""
    from shepherd.cli.common import progress

    if not show:
        yield None
        return
    with progress() as bar:
        yield bar


def report_cmd(
    experiments: Annotated[Optional[List[str]], typer.Argument(autocompletion=complete.report_targets, help="Experiments or papers (default: all with results), or one sweep's results folder.")] = None,
    results: Annotated[Path, typer.Option("--results", "-o", "--out", help="Results directory.")] = RESULTS,
    baseline: Annotated[Optional[str], typer.Option("--baseline", help="With run folders: paired per-seed ratios of every policy to this one.")] = None,
) -> None:
    """Draw figures (PNG + PDF) into results/figures/ and write results/REPORT.md.

    Given a folder written by `shepherd sweep` or `shepherd capacity`, draw its comparison into FOLDER/figures and
    FOLDER/REPORT.md. Given several run folders (sweep, capacity or simulate), compare them on their shared axes
    into RESULTS/comparisons/A-vs-B/. --baseline POLICY adds paired ratios: each policy's metric over the
    baseline's at the same load and seed, then mean and 95 % interval over seeds (a table and a figure).

    Example: shepherd report shepherd · shepherd report results/sweeps/own-study results/capacity/own-study
    · shepherd report results/sweeps/own-study --baseline clockwork
    """
    from shepherd.cli.common import console, summary_table
    from shepherd.experiments import registry
    from shepherd.experiments.report import build_report

    folders = [e for e in experiments or [] if Path(e).is_dir()]
    if baseline is not None and (not folders or len(folders) < len(experiments or [])):
        raise UserError("--baseline compares runs: give the folders written by `shepherd sweep`, "
                        "`shepherd capacity` or `shepherd simulate`")
    if experiments and folders and (len(experiments) > 1 or baseline is not None):
        return _report_compare([Path(e) for e in experiments], baseline, results)
    if experiments and len(experiments) == 1 and _is_capacity(experiments[0]):
        return _report_capacity(Path(experiments[0]))
    if experiments and len(experiments) == 1 and _is_sweep(experiments[0]):
        return _report_sweep(Path(experiments[0]))
    chosen = registry.resolve(experiments) if experiments else list(registry.all_experiments().values())
    path, sections = build_report(chosen, results)
    if path is None:
        raise UserError(f"no results under {results} for {', '.join(e.name for e in chosen) or 'any experiment'}; "
                        "run `shepherd reproduce …` first")
    figures = sum(len([f for f in s.figures if f.suffix == '.png']) for s in sections)
    from shepherd.experiments.judge import STATES, counts

    per_paper = {paper: " · ".join(f"{c[s]} {s}" for s in STATES) for paper, c in counts(sections).items()}
    summary_table("report", {"sections": len(sections), "figures": figures, **per_paper, "written": path})
    console.print()


def _is_sweep(arg: str) -> bool:
    from shepherd.experiments import registry

    from shepherd.experiments.sweep_report import is_sweep_folder

    path = Path(arg)
    if is_sweep_folder(path):
        return True
    experiments = registry.all_experiments()
    known = set(experiments) | {e.paper for e in experiments.values()}
    if path.is_dir() and arg not in known:
        raise UserError(f"{path} is a folder but not a sweep's results (no sweep.json); "
                        "name an experiment, or a folder written by `shepherd sweep`")
    return False


def _is_capacity(arg: str) -> bool:
    from shepherd.experiments.capacity_report import is_capacity_folder

    return is_capacity_folder(Path(arg))


def _report_capacity(folder: Path) -> None:
    from shepherd.cli.common import summary_table

    from shepherd.experiments.capacity_report import report_folder

    path, section, rows = report_folder(folder)
    summary_table("report", {"capacity": folder, "searches": rows,
                             "figures": ", ".join(str(f) for f in section.figures if f.suffix == ".png"),
                             "written": path})


def _report_sweep(folder: Path) -> None:
    from shepherd.cli.common import summary_table

    from shepherd.experiments.sweep_report import report_folder

    path, section, rows = report_folder(folder)
    summary_table("report", {"sweep": folder, "cells": rows,
                             "figures": ", ".join(str(f) for f in section.figures if f.suffix == ".png"),
                             "written": path})


def _report_compare(folders: list[Path], baseline: str | None, results: Path) -> None:
    from shepherd.cli.common import summary_table
    from shepherd.experiments.compare import report

    path, figures, rows = report(folders, baseline, results)
    summary_table("report", {"runs": ", ".join(str(f) for f in folders), "rows": rows,
                             **({"baseline": baseline} if baseline else {}),
                             "figures": ", ".join(str(f) for f in figures), "written": path})
