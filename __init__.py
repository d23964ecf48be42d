"""shepherd — trace-driven experiments on DNN inference serving.

The repository root is the ``shepherd`` package; its sub-packages are
``shepherd.cli`` (Typer app), ``shepherd.core`` (domain, artifacts, engine),
``shepherd.solvers`` (planners), ``shepherd.traces`` (workloads) and
``shepherd.experiments`` (one module per paper figure).
"""

__version__ = "0.1.0"
