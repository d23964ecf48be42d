"""PPipe's load-factor sweep runs through ``core.capacity.scan_down`` with the outputs it had before
(recorded from the private loop on one small cell: one DNN on HC1-S, 0.5 s per factor, seed 3)."""

from __future__ import annotations

import pytest

from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.cluster import make_cluster
from shepherd.experiments.ppipe import common as c
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_milp import PPipePlanConfig, solve_pipelines

from conftest import PPIPE_DATA, needs_ppipe

DATA = PPIPE_DATA
MODEL = "fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024"
# recorded with the loop before the move (commit c009864's experiments/ppipe/common.py: sweep)
BEFORE_ATT = [(1.0, 0.5126227208976157), (0.9, 0.5703125), (0.8, 0.6458149779735682), (0.7, 0.7512639029322548),
              (0.6, 0.8850710900473934), (0.5, 1.0)]


@needs_ppipe
def test_sweep_through_scan_down_gives_the_recorded_max_load_factor(monkeypatch):
    profs = {p.model: p for p in blocks.read_ppipe_dir(DATA, [MODEL])}
    plan = solve_pipelines(list(profs.values()), {MODEL: 1.0}, make_cluster("HC1-S"), PPipePlanConfig(),
                           SolverConfig("highs", 20.0, 0.01))
    assert plan.normalized_xput == pytest.approx(1490.027236585244, rel=1e-9)
    monkeypatch.setattr(c, "profiles", lambda: profs)
    # capacity 2× the plan's: attainment falls below 99 % above load factor 0.5
    found, runs = c.sweep(plan, 2 * plan.normalized_xput, (MODEL,), "poisson", 0.5, 3, 0.1)
    assert found == {MODEL: 0.5}
    assert [(r["lf"], r["att"][MODEL]) for r in runs] == BEFORE_ATT  # stopped once found, same numbers
    found, runs = c.sweep(plan, 2 * plan.normalized_xput, (MODEL,), "poisson", 0.5, 3, 0.1, stop_when_found=False)
    assert found == {MODEL: 0.5} and len(runs) == 10
