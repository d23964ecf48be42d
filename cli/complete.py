"""Shell completion of names (``shepherd --install-completion``): record levels, traces, experiments.

Each function imports its registry only when the shell asks (a TAB), never when ``shepherd`` starts, so
``--help`` and every other command stay fast (``tests/test_startup.py``). A value that may also be a file
(``--trace``, ``report``'s run folders) completes to the matching names *and* files.
"""

from __future__ import annotations

import glob
import os
from typing import Callable, Sequence


def fixed(values: Sequence[str]) -> Callable[[str], list[str]]:
    """Complete from a fixed tuple (``--record summary|batches|requests``)."""
    def complete(incomplete: str) -> list[str]:
        return [v for v in values if v.startswith(incomplete)]
    return complete


def _paths(incomplete: str, suffixes: tuple[str, ...] = (), folders: bool = True) -> list[str]:
    """Files with one of ``suffixes`` (and folders) whose path starts with ``incomplete``."""
    out = []
    for path in sorted(glob.glob(glob.escape(incomplete) + "*")):
        if os.path.isdir(path):
            if folders:
                out.append(path + "/")
        elif path.endswith(suffixes) and suffixes:
            out.append(path)
    return out


def trace_names(incomplete: str) -> list[str]:
    """``--trace``: the named traces (``shepherd traces list``), then trace files (``*.parquet``)."""
    from shepherd.traces.registry import TRACES

    return [n for n in TRACES if n.startswith(incomplete)] + _paths(incomplete, (".parquet",))


def named_traces(incomplete: str) -> list[str]:
    """``traces maf NAME``: the named traces only."""
    from shepherd.traces.registry import TRACES

    return [n for n in TRACES if n.startswith(incomplete)]


def experiment_names(incomplete: str) -> list[str]:
    """``reproduce``: experiments and paper names (``shepherd reproduce --list``)."""
    from shepherd.experiments import registry

    experiments = registry.all_experiments()
    names = list(dict.fromkeys([e.paper for e in experiments.values()] + list(experiments)))
    return [n for n in names if n.startswith(incomplete)]


def report_targets(incomplete: str) -> list[str]:
    """``report``: experiments and papers, then run folders (a sweep's, a capacity grid's, a simulate's)."""
    return experiment_names(incomplete) + _paths(incomplete)


def slo_tables(incomplete: str) -> list[str]:
    """``--slo-from``: the built-in tables with per-model SLOs, then profiles files."""
    from shepherd.traces.slos import tables_with_slos

    return [t for t in tables_with_slos() if t.startswith(incomplete)] + _paths(incomplete, (".parquet",))
