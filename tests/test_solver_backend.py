"""Solver seam: explicit backends, gap and time limit, statuses, missing backend (DESIGN.md "Planners")."""

from __future__ import annotations

import importlib.util

import mip
import pytest

from shepherd.core.errors import UserError
from shepherd.solvers.backend import SolverConfig, new_model, relative_gap, solve


def _knapsack(cfg: SolverConfig) -> mip.Model:
    model = new_model(cfg, mip.MAXIMIZE, "knap")
    weights = [12, 7, 11, 8, 9, 6, 14, 5]
    values = [24, 13, 23, 15, 16, 11, 27, 9]
    x = [model.add_var(f"x{i}", var_type=mip.BINARY) for i in range(len(weights))]
    model += mip.xsum(w * v for w, v in zip(weights, x)) <= 26
    model.objective = mip.maximize(mip.xsum(c * v for c, v in zip(values, x)))
    return model


@pytest.mark.parametrize("name", ["highs", "cbc"])
def test_backends_agree_on_a_small_knapsack(name):
    cfg = SolverConfig(name=name, time_limit_s=10, gap=0.0)
    res = solve(_knapsack(cfg), cfg)
    # brute force over all subsets
    weights = [12, 7, 11, 8, 9, 6, 14, 5]
    values = [24, 13, 23, 15, 16, 11, 27, 9]
    best = max(sum(v for i, v in enumerate(values) if m >> i & 1) for m in range(256)
               if sum(w for i, w in enumerate(weights) if m >> i & 1) <= 26)
    assert res.status == "optimal" and res.solver == name
    assert res.objective == pytest.approx(best)
    assert res.bound == pytest.approx(best, rel=1e-6)
    assert res.gap == pytest.approx(0.0, abs=1e-6)
    assert res.solve_s >= 0
    assert set(res.metadata()) == {"solver", "status", "objective", "bound", "gap", "solve_s"}


def test_gap_is_set_explicitly_on_the_model():
    cfg = SolverConfig(name="highs", gap=0.05)
    assert new_model(cfg).max_mip_gap == pytest.approx(0.05)


def test_infeasible_model_reports_infeasible():
    cfg = SolverConfig(name="highs", time_limit_s=5)
    model = new_model(cfg)
    x = model.add_var("x", var_type=mip.INTEGER, lb=0, ub=3)
    model += x >= 5
    model.objective = mip.maximize(x)
    res = solve(model, cfg)
    assert res.status == "infeasible" and not res.has_solution and res.objective is None


@pytest.mark.skipif(importlib.util.find_spec("gurobipy") is not None, reason="gurobipy installed here")
def test_missing_gurobi_is_a_one_line_user_error():
    cfg = SolverConfig(name="gurobi")
    with pytest.raises(UserError, match="gurobipy"):
        solve(_knapsack(cfg), cfg)


def test_bad_solver_config_is_a_user_error():
    for bad in (SolverConfig(name="cplex"), SolverConfig(time_limit_s=0), SolverConfig(gap=1.5)):
        with pytest.raises(UserError):
            bad.validate()


def test_relative_gap():
    assert relative_gap(10.0, 11.0) == pytest.approx(0.1)
    assert relative_gap(None, 1.0) is None


def test_heuristic_effort_reaches_highs_and_bad_values_are_refused(monkeypatch):
    """``heuristic_effort`` sets HiGHS's mip_heuristic_effort for that solve only (0 = HiGHS's default), and
    the solve still reaches the brute-force optimum; outside [0, 1] it is a user error."""
    seen = []
    cfg = SolverConfig(name="highs", time_limit_s=10, gap=0.0, heuristic_effort=0.4)
    model = _knapsack(cfg)
    real = model.solver._set_double_option_value
    monkeypatch.setattr(model.solver, "_set_double_option_value",
                        lambda name, value: (seen.append((name, value)), real(name, value))[1])
    res = solve(model, cfg)
    assert ("mip_heuristic_effort", 0.4) in seen
    assert model.solver._get_double_option_value("mip_heuristic_effort") == pytest.approx(0.4)
    weights, values = [12, 7, 11, 8, 9, 6, 14, 5], [24, 13, 23, 15, 16, 11, 27, 9]
    best = max(sum(v for i, v in enumerate(values) if m >> i & 1) for m in range(256)
               if sum(w for i, w in enumerate(weights) if m >> i & 1) <= 26)
    assert res.status == "optimal" and res.objective == pytest.approx(best)
    plain = _knapsack(SolverConfig(name="highs"))
    assert plain.solver._get_double_option_value("mip_heuristic_effort") == pytest.approx(0.05)
    for bad in (-0.1, 1.5):
        with pytest.raises(UserError, match="heuristic effort"):
            SolverConfig(heuristic_effort=bad).validate()
