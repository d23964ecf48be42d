"""Start-up stays light (issue 29 item 6): the entry point imports no engine, numba, polars, python-mip or
seaborn; each command imports them inside its function. Structure only, no timings
(``benchmarks/startup_speed.py`` measures the wall time)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HEAVY = ("numba", "polars", "numpy", "pyarrow", "mip", "seaborn", "matplotlib", "shepherd.core.engine",
         "shepherd.core.policies", "shepherd.experiments", "shepherd.solvers")
ENTRY = "import sys; from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))"


def _imported(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[set[str], subprocess.CompletedProcess]:
    """The module names ``python -X importtime -c CODE ARGS`` imported (parsed from its import-time log)."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args], capture_output=True, text=True,
                         env=os.environ | (env or {}), timeout=120)
    names = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    return names, run


def _heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))


def test_importing_the_cli_loads_no_heavy_library():
    names, run = _imported("import shepherd.cli.app")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "typer" in names  # the log was parsed (else the next assertion proves nothing)
    assert _heavy(names) == []


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("simulate", "--help"), ("plan", "--help"),
                                  ("traces", "--help"), ("sweep", "--help"), ("capacity", "--help"),
                                  ("reproduce", "--help"), ("warmup", "--help")])
def test_version_help_and_command_help_load_no_heavy_library(args):
    names, run = _imported(ENTRY, *args)
    assert run.returncode == 0, run.stderr[-2000:]
    assert _heavy(names) == [], args


def test_a_completion_tab_loads_no_heavy_library():
    env = {"_SHEPHERD_COMPLETE": "complete_bash", "COMP_WORDS": "shepherd simulate --re", "COMP_CWORD": "2"}
    names, run = _imported(ENTRY, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--record" in run.stdout
    assert _heavy(names) == []


def test_the_help_lists_of_names_match_their_registries():
    """simulate/plan name the built-in policies, planners and solvers in --help without importing them."""
    from shepherd.cli import plan, simulate
    from shepherd.core.policies import registry
    from shepherd.solvers.backend import BACKENDS
    from shepherd.solvers.planners import PLANNERS

    assert set(simulate.POLICY_NAMES) == {n for n in registry.names() if registry.get(n).cls.__module__
                                          .startswith("shepherd.")}
    assert list(plan.PLANNER_NAMES) == list(PLANNERS)
    assert set(plan.SOLVER_NAMES) == set(BACKENDS)


@pytest.mark.parametrize("env, imported, want", [({}, False, "1"), ({"OMP_NUM_THREADS": "3"}, False, None),
                                                 ({"OPENBLAS_NUM_THREADS": "4"}, False, "4"), ({}, True, None)])
def test_simulate_starts_numpy_s_blas_with_one_thread_unless_told_otherwise(env, imported, want):
    """``shepherd simulate`` sets ``OPENBLAS_NUM_THREADS=1`` before numpy loads (issue 43: a simulation makes no
    floating-point BLAS call), unless the user set a thread count or numpy was loaded before (a caller's
    process)."""
    code = ("import os; " + ("import numpy; " if imported else "") +
            "from shepherd.cli import simulate; simulate._one_blas_thread(); "
            "print(os.environ.get('OPENBLAS_NUM_THREADS'))")
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base | env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == str(want)


def test_the_shepherd_process_collects_cycles_less_often_and_a_caller_s_process_is_left_alone():
    """The ``shepherd`` process sets the collector's thresholds (``cli/app.py`` ``GC_THRESHOLDS``, issue 43);
    ``main(argv)`` called from another program (a test, the API) leaves that program's as they are."""
    from shepherd.cli.app import GC_THRESHOLDS

    code = ("import atexit, gc, sys; atexit.register(lambda: print(gc.get_threshold())); "
            "from shepherd.cli.app import main; sys.argv = ['shepherd', '--version']; main()")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[-2] == str(GC_THRESHOLDS) != "(700, 10, 10)"
    code = ("import gc; from shepherd.cli.app import main; before = gc.get_threshold(); "
            "assert main(['--version']) == 0; print(gc.get_threshold() == before)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.split()[-1] == "True", run.stderr[-2000:]
