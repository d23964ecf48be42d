"""Which engine ran, and why (issue 42 item 5): every simulation says so (``result.engine_ran``), every
``simulate`` output and every experiment cell records it in its run record (``NAME.run.json``, outside the
hashed content: the tables are the same whichever engine ran, so the artifacts' bytes are too), and the API
and the CLI choose the same engine for the same run (PPipe's default ``EngineConfig`` included)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, read_artifact, run_record_path, write_artifact
from shepherd.core.engine import EngineConfig, OverheadConfig, fastpath, simulate
from shepherd.core.policies import registry
from shepherd.core.profiles import load_builtin
from shepherd.experiments import executors, runner
from shepherd.experiments.base import Experiment
from shepherd.experiments.registry import register
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")


def _trace() -> pl.DataFrame:
    rng = np.random.default_rng(2)
    return assemble([poisson(rng, 900.0, 150_000), poisson(rng, 400.0, 150_000)], ["ResNet50", "ResNet18"],
                    [40_000, 90_000])


def test_a_result_says_which_engine_ran_and_why(monkeypatch):
    ref = simulate(_trace(), PROF, "clockwork", gpus=2, engine=EngineConfig(path="reference"))
    assert ref.engine_ran == {"engine": "reference", "why": "--engine reference"}
    pred = simulate(_trace(), PROF, "clockwork", {"admission": "predictive"}, gpus=2)
    assert pred.engine_ran["engine"] == "reference" and "covers urgency=deadline, admission=none" in \
        pred.engine_ran["why"]
    monkeypatch.setattr(fastpath, "stale", lambda name, cls: None)  # as if verified against this source
    fast = simulate(_trace(), PROF, "clockwork", gpus=2)
    assert fast.engine_ran == {"engine": "fast", "why": "the fast path of 'clockwork', verified against the "
                                                        "current source (clockwork kernel)"}
    assert len(fast.engine.policies) == 0 and len(ref.engine.policies) == 1  # each ran where it says


def test_simulate_outputs_record_the_engine_outside_their_bytes(cli, tmp_path):
    write_artifact(_trace(), tmp_path / "t.parquet", "trace", make_provenance())
    runs = {}
    for eng in ("reference", "auto"):
        r = cli("simulate", "--policy", "flex", "--trace", tmp_path / "t.parquet", "--gpus", "2", "--record",
                "requests", "--engine", eng, "-o", tmp_path / eng)
        assert r.code == 0, r.err
        assert "engine" in r.out
        runs[eng] = {p.name: p for p in sorted((tmp_path / eng).glob("*.parquet"))}
        assert len(runs[eng]) == 4
        for name, path in runs[eng].items():
            rec = json.loads(run_record_path(path).read_text())
            if eng == "reference":
                assert rec["engine"] == {"engine": "reference", "why": "--engine reference"}, name
            else:
                assert rec["engine"]["engine"] in ("fast", "reference") and rec["engine"]["why"], name
            assert read_artifact(path, path.stem).run["engine"] == rec["engine"]
    for name in runs["reference"]:  # the bytes do not depend on the engine
        assert runs["reference"][name].read_bytes() == runs["auto"][name].read_bytes(), name


def test_the_api_and_the_cli_choose_the_same_engine_for_ppipe():
    """The CLI runs reserved paths as ``record`` except on the reference engine; the API's default is
    ``events``: both speed switches of the reference, with the same tables, so the kernel covers either."""
    cls = registry.get("ppipe").cls
    cfg = registry.make_config("ppipe")
    shape = lambda engine: fastpath.Shape(OverheadConfig(mode="none"), [0, 0], [[0, 1]], engine)  # noqa: E731
    monkey = fastpath.stale
    try:
        fastpath.stale = lambda name, c: None  # as if verified against this source
        api = fastpath.choose("ppipe", cls, cfg, shape(EngineConfig()), "auto")
        cli = fastpath.choose("ppipe", cls, cfg, shape(EngineConfig(reserved="record")), "auto")
    finally:
        fastpath.stale = monkey
    assert api.engine == cli.engine == "fast"
    assert fastpath.choose("ppipe", cls, cfg, shape(EngineConfig(reserved="events")), "reference").engine == \
        "reference"


class OneFlexRun(Experiment):
    name = "test-one-flex-run"
    paper = "test-provenance"  # not test-paper: test_runner.py reproduces and reports that paper's experiments
    title = "one flex run per cell"

    def cells(self, scale):
        return [self.cell(path=p, seed=0) for p in ("reference", "auto")]

    def run_cell(self, params):
        res = simulate(_trace(), PROF, "flex", gpus=2, engine=EngineConfig(path=params["path"]))
        return pl.DataFrame({"good": [res.good]})

    def report(self, results, figures_dir):  # pragma: no cover - not reported
        raise NotImplementedError


EXP = register(OneFlexRun())


def test_a_cell_records_which_engines_its_runs_took(tmp_path):
    paths = {}
    for cell in EXP.cells(None):
        frame, engines = executors.compute_recorded(__name__, EXP.name, cell.params)
        assert [e["policy"] for e in engines] == ["flex"] and engines[0]["why"]
        paths[cell.params["path"]] = runner._write_cell(cell, frame, tmp_path, engines)
        art = read_artifact(paths[cell.params["path"]], "cell")
        assert art.run["engines"] == engines
        if cell.params["path"] == "reference":
            assert engines == [{"engine": "reference", "policy": "flex", "why": "--engine reference"}]
    assert "engines" not in read_artifact(paths["auto"], "cell").provenance  # outside the hashed content
