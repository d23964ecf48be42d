"""Fail fast on a broken solver build (issue 11): every installed backend solves a tiny
MILP here, so a bad release fails CI loudly in one place; a broken backend stops `plan`
with one line naming the fix before any trace is read."""

from __future__ import annotations

import importlib.util

import pytest

from shepherd.core.errors import UserError
from shepherd.solvers import backend
from shepherd.solvers.backend import preflight

from conftest import assert_user_error

INSTALLED = ["highs", "cbc"] + (["gurobi"] if importlib.util.find_spec("gurobipy") else [])


@pytest.fixture(autouse=True)
def _fresh_preflight(monkeypatch):
    monkeypatch.setattr(backend, "_PREFLIGHT_OK", set())


@pytest.mark.parametrize("name", INSTALLED)
def test_each_installed_backend_solves_a_one_variable_milp(name):
    preflight(name)  # raises UserError unless max x s.t. 2x <= 9, x integer, gives 4
    assert name in backend._PREFLIGHT_OK


def test_highs_is_always_checked():
    assert "highs" in INSTALLED


def _broken_model(*_args, **_kwargs):
    raise Exception("HiGHS C API not accessible")  # what python-mip says beside highspy 1.16


def test_a_backend_that_cannot_load_names_the_fix(monkeypatch):
    monkeypatch.setattr(backend.mip, "Model", _broken_model)
    with pytest.raises(UserError, match="not available.*fix: .*requirements.lock"):
        preflight("highs")


def test_a_backend_that_solves_wrongly_is_refused(monkeypatch):
    wrong = backend.SolveResult("highs", "optimal", 3.0, 3.0, 0.0, 0.0)
    monkeypatch.setattr(backend, "solve", lambda model, config: wrong)
    with pytest.raises(UserError, match="not 4"):
        preflight("highs")


def test_plan_stops_before_reading_the_trace_when_the_solver_is_broken(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(backend.mip, "Model", _broken_model)
    out = tmp_path / "plan.parquet"
    # The trace does not exist: the solver check comes first, so the error is about the solver.
    res = cli("plan", "--trace", tmp_path / "missing.parquet", "--gpus", "4", "-o", out)
    assert_user_error(res, "solver backend 'highs'", "fix:")
    assert not out.exists()


def test_reproduce_stops_before_the_first_cell_when_the_solver_is_broken(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(backend.mip, "Model", _broken_model)
    res = cli("reproduce", "shepherd-theorem", "--quick", "--results", tmp_path / "r", "--no-report")
    assert_user_error(res, "solver backend 'highs'", "fix:")
    assert not (tmp_path / "r").exists()  # not even an empty results folder


def test_an_unloadable_highs_library_is_one_line_naming_the_lock_fix(tmp_path):
    """python-mip logs two lines and suggests a bare ``pip install mip[highs]`` (which ignores the lock)
    when its HiGHS library cannot load: only our line, with the lock's fix, reaches stderr."""
    import os
    import subprocess
    import sys

    env = os.environ | {"PMIP_HIGHS_LIBRARY": str(tmp_path / "missing" / "libhighs.so")}
    code = "import sys; from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, "plan", "--trace", "maf-synthetic", "-o",
                        str(tmp_path / "p.parquet")], env=env, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("error: solver backend 'highs'") and "requirements.lock" in lines[0]
    assert "mip[highs]" not in lines[0]
