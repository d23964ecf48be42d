"""``import shepherd``: the lazy API and the README's notebook example (run as written)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import polars as pl

import shepherd

README = Path(__file__).resolve().parents[1] / "README.md"


def notebook_example() -> str:
    text = README.read_text()
    section = text[text.index("## In a notebook"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_notebook_example_runs(capsys):
    code = notebook_example()
    assert len([ln for ln in code.splitlines() if ln.strip()]) <= 5
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    summary = scope["summary"]
    assert isinstance(summary, pl.DataFrame) and summary.height == 1
    assert summary["requests"][0] > 1000 and 0.0 <= summary["slo_attainment"][0] <= 1.0
    assert "slo_attainment" in capsys.readouterr().out


def test_api_names_have_docstrings_and_import_lazily():
    for name in ("load_trace", "load_profiles", "plan", "simulate", "sweep", "capacity"):
        assert getattr(shepherd, name).__doc__, name
    code = "import sys, shepherd; print('polars' in sys.modules, 'shepherd.api' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]  # import shepherd stays cheap


def test_api_simulate_and_capacity_agree_with_the_engine():
    trace = shepherd.load_trace("maf-synthetic", duration_min=1, synthetic_rate=50, functions=20, seed=1)
    a = shepherd.simulate(trace, policy="clockwork", gpus=2, load=1.5, seed=1).summary_frame()
    from shepherd.core.engine import simulate

    b = simulate(trace, shepherd.load_profiles(), "clockwork", gpus=2, load=1.5, seed=1).summary_frame()
    assert a.equals(b)


def test_api_sweep_returns_the_tidy_table(tmp_path):
    config = tmp_path / "s.toml"
    config.write_text('policies = ["flex", "clockwork"]\n[trace]\nname = "maf-synthetic"\nduration_min = 1\n'
                      'synthetic_rate = 20.0\nfunctions = 10\n[cluster]\ngpus = 1\n')
    table = shepherd.sweep(config, results=tmp_path / "out")
    assert table.height == 2 and sorted(table["policy"]) == ["clockwork", "flex"]
    assert {"load", "seed", "cluster", "slo_attainment"} <= set(table.columns)
