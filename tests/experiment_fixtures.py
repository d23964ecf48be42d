"""A small real experiment for testing the runner (not collected by pytest).

It draws a Poisson trace per cell and reports the measured rate — real work,
a pure function of the cell's parameters. ``SHEPHERD_TEST_DIE_AT`` makes the
process kill itself with SIGKILL before computing the cell whose rate equals
it, to test resuming a killed run.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import polars as pl

from shepherd.experiments.base import Claim, Experiment, Section
from shepherd.experiments.registry import register
from shepherd.traces import arrivals


class MeasuredRate(Experiment):
    name = "test-measured-rate"
    paper = "test-paper"
    title = "measured Poisson rate vs requested rate"

    def cells(self, scale):
        rates = [100, 200] if scale.quick else [100, 200, 400, 800]
        return [self.cell(rate=r, seed=s) for r in rates for s in range(scale.seeds)]

    def run_cell(self, params):
        if os.environ.get("SHEPHERD_TEST_DIE_AT") == str(params["rate"]):
            os.kill(os.getpid(), signal.SIGKILL)
        rng = np.random.default_rng(params["seed"])
        t = arrivals.poisson(rng, params["rate"], 20_000_000)
        return pl.DataFrame({"measured_rate": [t.size / 20.0], "synthetic": [True]})

    def report(self, results, figures_dir):
        from shepherd.experiments.confidence import mean_ci

        ci = mean_ci(results, ["rate"], "measured_rate")
        ok = all(abs(r["mean"] - r["rate"]) < 0.1 * r["rate"] for r in ci.iter_rows(named=True))
        return Section(title=self.title, claims=[Claim("measured ≈ requested", ok)])


EXPERIMENT = register(MeasuredRate())


class SharedRate(Experiment):
    """Reads some of MeasuredRate's cells (as Shepherd's Fig. 8 reads Fig. 7's): run with it, they are skipped."""

    name = "test-shared-rate"
    paper = "test-shared"
    title = "the 100 req/s cells of test-measured-rate"

    def cells(self, scale):
        return [c for c in EXPERIMENT.cells(scale) if c.params["rate"] == 100]

    def run_cell(self, params):  # pragma: no cover - its cells are MeasuredRate's (the runner runs that one's)
        return EXPERIMENT.run_cell(params)

    def report(self, results, figures_dir):
        return Section(title=self.title, claims=[Claim("rows", results.height > 0)])


SHARED = register(SharedRate())
