"""Experiments by name: one module per paper figure, one line each here.

``EXPERIMENT_MODULES`` lists the modules that define experiments; importing
one registers its experiments through :func:`register`. Names of papers act
as groups: ``shepherd reproduce shepherd`` runs every experiment whose
``paper`` is ``shepherd``.
"""

from __future__ import annotations

import importlib

from shepherd.core.errors import UserError
from shepherd.experiments.base import Experiment

EXPERIMENT_MODULES: tuple[str, ...] = (
    "shepherd.experiments.shepherd.fig02_05_predictability",
    "shepherd.experiments.shepherd.fig03_worked_example",
    "shepherd.experiments.shepherd.fig07_load",
    "shepherd.experiments.shepherd.fig08_latency_cdf",
    "shepherd.experiments.shepherd.fig09_slo",
    "shepherd.experiments.shepherd.fig10_scale",
    "shepherd.experiments.shepherd.fig11a_two_stream",
    "shepherd.experiments.shepherd.fig11b_group_limit",
    "shepherd.experiments.shepherd.fig12_preemption",
    "shepherd.experiments.shepherd.table5_planning",
    "shepherd.experiments.shepherd.theorem",
    "shepherd.experiments.ppipe.fig02_latency",
    "shepherd.experiments.ppipe.fig06_load_factor",
    "shepherd.experiments.ppipe.fig07_attainment",
    "shepherd.experiments.ppipe.fig08_utilization",
    "shepherd.experiments.ppipe.fig10_reactive",
    "shepherd.experiments.ppipe.fig13_sensitivity",
    "shepherd.experiments.ppipe.fig14_milp_runtime",
    "shepherd.experiments.symphony.fig15_partition",
    "shepherd.experiments.accordion.fig01_motivation",
    "shepherd.experiments.accordion.fig03_predictor",
    "shepherd.experiments.accordion.streams",
    "shepherd.experiments.accordion.maps",
    "shepherd.experiments.symphony.table2_frontends",
    "shepherd.experiments.symphony.fig01_frontends",
    "shepherd.experiments.symphony.fig04_nwc_vs_wc",
    "shepherd.experiments.symphony.fig06_zoo",
    "shepherd.experiments.symphony.fig07_workload",
    "shepherd.experiments.symphony.table4_batching",
    "shepherd.experiments.symphony.fig10_flat_top",
    "shepherd.experiments.symphony.fig11_gpus",
    "shepherd.experiments.symphony.fig13_network",
    "shepherd.experiments.symphony.fig14_autoscale",
    "shepherd.experiments.symphony.cross_shepherd",
    "shepherd.experiments.validate",
)

_REGISTRY: dict[str, Experiment] = {}
_loaded = False


def register(experiment: Experiment) -> Experiment:
    if not experiment.name:
        raise ValueError("an experiment needs a name")
    _REGISTRY[experiment.name] = experiment
    return experiment


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in EXPERIMENT_MODULES:
            importlib.import_module(module)
        _loaded = True


def all_experiments() -> dict[str, Experiment]:
    _load()
    return dict(_REGISTRY)


def get(name: str) -> Experiment:
    experiments = all_experiments()
    try:
        return experiments[name]
    except KeyError:
        raise UserError(f"unknown experiment '{name}' (see `shepherd reproduce --list`)") from None


def resolve(names: list[str]) -> list[Experiment]:
    """Experiment names or paper names → experiments, in registry order, without repeats."""
    experiments = all_experiments()
    chosen: dict[str, Experiment] = {}
    for name in names:
        if name in experiments:
            chosen[name] = experiments[name]
            continue
        group = [e for e in experiments.values() if e.paper == name]
        if not group:
            known = sorted(set(experiments) | {e.paper for e in experiments.values()})
            raise UserError(f"unknown experiment '{name}' (known: {', '.join(known) or 'none'})")
        for exp in group:
            chosen[exp.name] = exp
    return list(chosen.values())
