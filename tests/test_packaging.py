"""Packaging: setuptools finds every sub-package of the flat ``shepherd`` layout by itself.

The repository root is the ``shepherd`` package (pyproject ``package-dir``);
a new sub-package (``experiments/symphony/``, a later issue) must land in a
built wheel without anyone listing it. The check runs setuptools' ``build_py``
— the step that lays out a wheel's contents — on a copy of the sources with
such a package added.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".git", ".venv", "results", "build", "*.egg-info", "__pycache__", "*.parquet")


def test_a_new_subpackage_is_built_without_being_listed(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    packaged = Path("traces") / "data" / "maf2019_sample" / "invocations-500x480.parquet"  # package data
    shutil.copy2(ROOT / packaged, src / packaged)
    new = src / "experiments" / "laterpaper"  # (experiments/symphony now exists: a name no issue uses)
    new.mkdir()
    (new / "__init__.py").write_text('"""A later paper."""\n')
    (new / "fig.py").write_text("X = 1\n")
    out = tmp_path / "lib"
    # what the setuptools build backend runs for a wheel: setup.py (with pyproject.toml's configuration)
    run = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)], cwd=src,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    pkg = out / "shepherd"
    assert (pkg / "experiments" / "laterpaper" / "__init__.py").is_file()
    assert (pkg / "experiments" / "laterpaper" / "fig.py").is_file()
    for sub in ("cli", "core/engine", "core/policies", "core/pipelines", "solvers", "traces", "experiments/ppipe",
                "experiments/symphony"):
        assert (pkg / sub / "__init__.py").is_file(), sub
    assert any((pkg / "core" / "profile_tables").glob("*.csv"))  # package data still included
    assert (pkg / "core" / "policies" / "flex.verified.json").is_file()  # the fast paths' verified sources
    sample = pkg / "traces" / "data" / "maf2019_sample"  # the packaged real MAF 2019 subset + its licence
    assert (sample / "invocations-500x480.parquet").is_file() and (sample / "LICENSE").is_file()
    assert (sample / "README.md").is_file()
    assert not (pkg / "tests").exists() and not (pkg / "benchmarks").exists()
