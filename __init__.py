"""shepherd — trace-driven experiments on DNN inference serving.

The repository root is the ``shepherd`` package; its sub-packages are
``shepherd.cli`` (Typer app), ``shepherd.core`` (domain, artifacts, engine),
``shepherd.solvers`` (planners), ``shepherd.traces`` (workloads) and
``shepherd.experiments`` (one module per paper figure).

The Python API (:mod:`shepherd.api`, imported on first use so that
``import shepherd`` stays cheap)::

    import shepherd
    trace = shepherd.load_trace("maf-synthetic", duration_min=1, synthetic_rate=300)
    result = shepherd.simulate(trace, policy="flex", gpus=8, load=2.0)
    result.summary_frame()

``load_trace``, ``load_profiles``, ``plan``, ``simulate``, ``sweep`` and
``capacity`` mirror the commands of the same names (``capacity_sweep`` is
``shepherd capacity CONFIG``).
"""

__version__ = "0.1.0"

API = ("load_trace", "load_profiles", "plan", "simulate", "sweep", "capacity", "capacity_sweep")
__all__ = list(API) + ["__version__"]


def __getattr__(name: str):  # PEP 562: the API is imported on first use
    if name in API:
        from shepherd import api

        return getattr(api, name)
    raise AttributeError(f"module 'shepherd' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(API))
