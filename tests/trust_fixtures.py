"""A small slow experiment for the concurrency tests (not collected by pytest).

Each cell draws a Poisson trace and sleeps ``SLEEP_S`` so that two runs started
together overlap cell by cell; its report draws a real figure so that two
reports into one folder write the same figure files at the same time.
:func:`cli_command` runs ``shepherd`` in a fresh process with it registered.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.experiments.base import Claim, Experiment, Section
from shepherd.experiments.registry import register
from shepherd.traces import arrivals

SLEEP_S = 0.15


class SlowRate(Experiment):
    name = "trust-slow-rate"
    paper = "trust-paper"
    title = "measured Poisson rate (slow cells)"

    def cells(self, scale):
        rates = [50, 100, 150, 200]
        return [self.cell(rate=r, seed=s) for r in rates for s in range(scale.seeds)]

    def run_cell(self, params):
        time.sleep(SLEEP_S)
        rng = np.random.default_rng(params["seed"])
        t = arrivals.poisson(rng, params["rate"], 5_000_000)
        return pl.DataFrame({"measured_rate": [t.size / 5.0], "synthetic": [True]})

    def report(self, results, figures_dir):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from shepherd.experiments.report import save_figure

        fig, ax = plt.subplots()
        ax.plot(results["rate"].to_list(), results["measured_rate"].to_list(), "o")
        figures = save_figure(fig, figures_dir, "trust_slow_rate")
        ok = bool((abs(results["measured_rate"] - results["rate"]) < 0.2 * results["rate"]).all())
        return Section(title=self.title, figures=figures, claims=[Claim("measured ≈ requested", ok)])


EXPERIMENT = register(SlowRate())


def cli_command(*args: str) -> list[str]:
    """``python -c …``: the real CLI in a new process, with this experiment registered."""
    tests_dir = str(Path(__file__).resolve().parent)
    code = (f"import sys; sys.path.insert(0, {tests_dir!r}); import trust_fixtures; "
            "from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))")
    return [sys.executable, "-c", code, *map(str, args)]
