"""Third-party policies: a policy defined outside ``core/`` registers and runs from the CLI and the API.

Two ways (``core.policies.registry``): the ``shepherd.policies`` entry-point
group of an installed distribution — here a distribution made in a temporary
folder on ``sys.path`` (a ``*.dist-info`` with ``entry_points.txt``), exactly
what ``pip install`` of a researcher's package leaves behind — and the
in-process equivalent ``register(name, Config)(Policy)``.
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass

import numpy as np
import pytest

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.engine import OverheadConfig, simulate
from shepherd.core.policies import registry
from shepherd.core.policies.base import Policy
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")


@dataclass(frozen=True)
class LifoConfig:
    batch: int = 2  #: requests per batch


class Lifo(Policy):
    """Newest-first batches of at most ``batch`` requests on any idle worker (a toy, not a paper's)."""

    def __init__(self, act, config):
        super().__init__(act, config)
        self.stack: list[int] = []
        self.model: list[int] = []

    def _go(self, now):
        for w in self.act.workers:
            if not self.stack:
                return
            if not self.act.busy(w):
                m = self.model[-1]
                take = []
                while self.stack and self.model[-1] == m and len(take) < self.config.batch:
                    self.model.pop()
                    take.append(self.stack.pop())
                self.act.start(w, m, take, now)

    def on_arrival(self, now, rid, model, deadline, stream):
        self.stack.append(rid)
        self.model.append(model)
        self._go(now)

    def on_completion(self, now, worker):
        self._go(now)


@pytest.fixture
def trace_file(tmp_path):
    rng = np.random.default_rng(1)
    trace = assemble([np.sort(rng.integers(0, 200_000, 300)).astype(np.int64)], ["ResNet50"], [60_000])
    path = tmp_path / "trace.parquet"
    write_artifact(trace, path, "trace", make_provenance({}, 0))
    return trace, path


def test_in_process_registration_runs_from_the_api_and_the_cli(cli, trace_file, tmp_path):
    trace, path = trace_file
    registry.register("lifo", LifoConfig)(Lifo)
    try:
        api = simulate(trace, PROF, "lifo", {"batch": 3}, gpus=2, seed=0)
        assert api.good > 0 and api.batches_frame()["size"].max() == 3
        r = cli("simulate", "--policy", "lifo", "--trace", path, "--gpus", "2", "--set", "batch=3", "-o", tmp_path / "o")
        assert r.code == 0, r.err
        req = read_artifact(tmp_path / "o" / "requests.parquet", "requests").frame
        assert req["finish_us"].to_list() == api.requests_frame()["finish_us"].to_list()
        assert "lifo" in registry.names()
    finally:
        registry.unregister("lifo")
    assert_user_error(cli("simulate", "--policy", "lifo", "--trace", path, "--gpus", "2", "-o", tmp_path / "p"),
                      "unknown policy 'lifo'")


def test_an_installed_entry_point_registers_the_policy(cli, trace_file, tmp_path, monkeypatch):
    """A distribution (module + dist-info with a ``shepherd.policies`` entry point) on ``sys.path``."""
    trace, path = trace_file
    site = tmp_path / "site"
    site.mkdir()
    (site / "toy_newest_first.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from shepherd.core.policies.base import Policy

        @dataclass(frozen=True)
        class Config:
            batch: int = 1

        class NewestFirst(Policy):
            """One request at a time, newest first (an installed third-party toy)."""
            config_class = Config

            def __init__(self, act, config):
                super().__init__(act, config)
                self.stack = []

            def _go(self, now):
                for w in self.act.workers:
                    if self.stack and not self.act.busy(w):
                        rid, m = self.stack.pop()
                        self.act.start(w, m, [rid], now)

            def on_arrival(self, now, rid, model, deadline, stream):
                self.stack.append((rid, model))
                self._go(now)

            def on_completion(self, now, worker):
                self._go(now)
    '''))
    dist = site / "toy_newest_first-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-newest-first\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[shepherd.policies]\nnewest-first = toy_newest_first:NewestFirst\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_loaded_entry_points", False)
    try:
        assert "newest-first" not in registry.POLICIES
        r = cli("simulate", "--policy", "newest-first", "--trace", path, "--gpus", "1", "-o", tmp_path / "o")
        assert r.code == 0, r.err
        spec = registry.get("newest-first")
        assert spec.cls.__module__ == "toy_newest_first" and spec.config_cls.__name__ == "Config"
        api = simulate(trace, PROF, "newest-first", gpus=1)
        req = read_artifact(tmp_path / "o" / "requests.parquet", "requests").frame
        assert req["finish_us"].to_list() == api.requests_frame()["finish_us"].to_list()
        # newest first: among the requests served, some later arrival is served before an earlier one
        served = api.requests_frame().drop_nulls("start_us").sort("arrival_us")
        assert (np.diff(served["start_us"].to_numpy()) < 0).any()
    finally:
        registry.unregister("newest-first")
        sys.modules.pop("toy_newest_first", None)


class TableDriven(Policy):
    """Requires an artifact kind the engine has never heard of and builds its runtime from it alone."""

    requires = ("toy_table",)
    default_overhead = OverheadConfig(mode="none")

    @classmethod
    def prepare(cls, inputs, config):
        from shepherd.core.engine import Runtime, uniform_cluster

        table = inputs.get("toy_table")  # model → µs per request
        return Runtime(uniform_cluster(inputs.gpus, "toy"), ["toy"],
                       tables={"us": [table[m] for m in inputs.models]})

    def on_arrival(self, now, rid, model, deadline, stream):
        self.act.book(self.act.workers[0], model, [rid], now, duration_us=self.act.runtime.tables["us"][model])


def test_a_policy_prepares_its_runtime_from_its_own_artifact_kind(monkeypatch):
    from shepherd.core.errors import UserError

    monkeypatch.setitem(registry.POLICIES, "table", registry.PolicySpec("table", TableDriven, registry.NoOptions, ""))
    trace = assemble([np.array([0, 0], dtype=np.int64), np.array([10], dtype=np.int64)], ["A", "B"], [10**6, 10**6])
    with pytest.raises(UserError, match="requires toy_table"):
        simulate(trace, None, "table", gpus=1)
    res = simulate(trace, None, "table", gpus=1, artifacts={"toy_table": {"A": 100, "B": 7}})
    assert res.requests_frame().sort("request")["finish_us"].to_list() == [100, 200, 207]
    assert res.workers_frame()["hardware"].to_list() == ["toy"]
