"""Package discovery for the flat layout in which the repository root *is* the ``shepherd`` package.

pyproject.toml maps ``shepherd`` to the root (``package-dir``); setuptools'
``packages.find`` cannot add that prefix, so the sub-packages are found here:
every directory with an ``__init__.py`` below the root (a new
``experiments/symphony/`` included, ``tests/test_packaging.py``), except tests,
benchmarks and results. Everything else is configured in pyproject.toml.
"""

from setuptools import find_packages, setup

EXCLUDE = ["tests", "tests.*", "benchmarks", "benchmarks.*", "results", "results.*", "build", "build.*"]

setup(packages=["shepherd"] + [f"shepherd.{p}" for p in find_packages(".", exclude=EXCLUDE)])
