"""What an experiment is: a grid of cells, a cell function, and a report.

An experiment reproduces one paper figure or table (DESIGN.md "Experiments and
report"). It is data plus two functions:

* :meth:`Experiment.cells` — the grid at a given :class:`Scale` (policies ×
  loads × SLOs × seeds …). Each :class:`Cell` is a JSON-able parameter dict.
* :meth:`Experiment.run_cell` — runs one cell (profile → plan → simulate …) and
  returns a small polars frame of results. It must be a pure function of the
  cell's parameters (seed included), so a cell's result can be cached under the
  content hash of its parameters and recomputed anywhere (a local process or a
  Ray worker) with identical output.
* :meth:`Experiment.report` — draws the figure from all cells' results and
  states the paper's headline numbers next to ours.

Experiments register by name in :mod:`shepherd.experiments.registry`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import polars as pl

#: Bump when the meaning of cached cell results changes (invalidates caches).
CELL_FORMAT = 2


def is_synthetic(results: pl.DataFrame) -> bool:
    """Whether any cell ran on a synthetic stand-in (cells report a ``synthetic`` column)."""
    return bool(results.height and "synthetic" in results.columns and results["synthetic"].any())


@dataclass(frozen=True)
class Scale:
    """How big to run: ``quick`` shrinks durations/sizes; ``seeds`` per cell."""

    quick: bool = False
    seeds: int = 3

    @classmethod
    def default(cls, quick: bool, seeds: int | None) -> "Scale":
        return cls(quick=quick, seeds=seeds if seeds is not None else (1 if quick else 3))


@dataclass(frozen=True)
class Cell:
    """One point of an experiment's grid."""

    experiment: str
    params: Mapping[str, Any]

    def key(self) -> str:
        """Content hash of the cell's configuration (STYLE.md pattern 3).

        Parameters whose name starts with ``_`` are locations, not content (a
        sweep's input file paths; the files' SHA-256 are parameters of their
        own): they reach :meth:`Experiment.run_cell` but are not hashed.
        """
        content = {k: v for k, v in self.params.items() if not str(k).startswith("_")}
        blob = json.dumps(
            {"experiment": self.experiment, "params": content, "format": CELL_FORMAT},
            sort_keys=True, separators=(",", ":"), default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:20]

    def path(self, results_dir: Path) -> Path:
        return results_dir / "cells" / self.experiment / f"{self.key()}.parquet"


@dataclass
class Claim:
    """A qualitative claim of the paper checked on our numbers.

    ``state`` is the judge's verdict where the claim was decided from per-seed values
    (:func:`shepherd.experiments.judge.judge_claim`); a claim given only ``holds`` holds or fails."""

    text: str
    holds: bool
    detail: str = ""
    state: str | None = None

    @property
    def verdict(self):
        from shepherd.experiments.judge import FAILS, HOLDS, Verdict

        return Verdict(self.state or (HOLDS if self.holds else FAILS))


@dataclass
class Headline:
    """A number the paper reports and ours, with a 95 % half-width; judged when it has a rule.

    Build a judged row from its per-seed values (:meth:`of_seeds`): the judge
    (:mod:`shepherd.experiments.judge`) decides holds / fails / inconclusive from them, and the REPORT
    prints them where there are ≤ 5. ``tolerance`` is shorthand for ``Rule.near(paper, tolerance)``."""

    what: str
    paper: float | None
    ours: float
    half_width: float = 0.0
    unit: str = ""
    #: ours under a second rule set (PPipe: ``--rules artifact``), shown as its own column when set
    artifact: float | None = None
    artifact_half_width: float = 0.0
    #: how far ours may be from the paper's number (in the row's unit) and still hold; None: not judged
    tolerance: float | None = None
    #: what of ours agrees with the paper's sentence (judge.Rule); None with no tolerance: not judged
    rule: Any = None
    #: ours per seed (None: the row was built from an aggregate)
    seeds: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.rule is None and self.tolerance is not None and self.paper is not None:
            from shepherd.experiments.judge import Rule
            self.rule = Rule.near(self.paper, self.tolerance, self.unit)

    @classmethod
    def of_seeds(cls, what: str, paper: float | None, seeds, unit: str = "", rule: Any = None,
                 **kw: Any) -> "Headline":
        """A row from its per-seed values: ours = mean ± 95 % half-width over the finite ones (a
        non-finite seed makes the verdict inconclusive and shows in the per-seed column)."""
        import math

        from shepherd.experiments.confidence import half_width

        vals = tuple(float(v) if v is not None else float("nan") for v in seeds)
        finite = [v for v in vals if math.isfinite(v)]
        mean = sum(finite) / len(finite) if finite else float("nan")
        return cls(what, paper, mean, half_width(finite), unit, rule=rule, seeds=vals, **kw)

    @property
    def verdict(self):
        """The judge's verdict (:func:`shepherd.experiments.judge.judge`)."""
        from shepherd.experiments.confidence import domain_of_unit
        from shepherd.experiments.judge import judge

        return judge(self.rule, self.seeds, mean=self.ours, half_width=self.half_width,
                     bounds=domain_of_unit(self.unit))

    @property
    def ratio(self) -> float | None:
        if self.paper in (None, 0):
            return None
        return self.ours / self.paper  # type: ignore[operator]


@dataclass
class Section:
    """What an experiment contributes to REPORT.md."""

    title: str
    figures: list[Path] = field(default_factory=list)
    headlines: list[Headline] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: rows the paper does not state (our diagnostics): rendered in their own table, never judged
    beyond: list[Headline] = field(default_factory=list)
    #: the paper the section reproduces (REPORT's head counts verdicts per paper); set by the report
    paper: str = ""


class Experiment:
    """Base class: subclasses set the attributes and implement the three methods."""

    name: str = ""
    paper: str = ""
    title: str = ""
    #: cells need the machine to themselves (live timings): ``reproduce`` runs them one at a time
    exclusive: bool = False

    def check_inputs(self, scale: Scale | None = None) -> None:  # noqa: ARG002 - experiments may read it
        """Raise a one-line :class:`UserError` when an input the experiment reads from outside the package
        (the authors' data) is missing — called before the results folder is created. Default: none."""

    def prepare(self, results_dir: Path, scale: Scale) -> str | None:
        """Build, once, an input the grid depends on (e.g. a measured profile, cached under ``results_dir``)
        before :meth:`cells`; returns a line for the run log, or None. Default: nothing to build."""
        return None

    def cells(self, scale: Scale) -> list[Cell]:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_cell(self, params: Mapping[str, Any]) -> pl.DataFrame:  # pragma: no cover - abstract
        raise NotImplementedError

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:  # pragma: no cover - abstract
        raise NotImplementedError

    def cell(self, **params: Any) -> Cell:
        return Cell(self.name, params)
