"""Options that cannot apply to the run say so in one line, never silently (issue 33 item 8): ``--groups apart``,
``--jobs`` and ``--executor ray`` on one serving group, or on the compiled engine, which runs every group in
its own process."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.core.engine import EngineConfig, fastpath, simulate
from shepherd.core.policies import registry
from shepherd.core.profiles import load_builtin
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")


def _two_groups() -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(0)
    trace = assemble([poisson(rng, 50.0, 200_000) for _ in range(4)], ["ResNet50", "ResNet18"] * 2, [50_000] * 4)
    rows = [(g, "worker", f"w{g}{i}") for g in (0, 1) for i in range(2)]
    rows += [(s % 2, "stream", str(s)) for s in range(4)]
    plan = pl.DataFrame(rows, schema={"group": pl.Int32, "role": pl.String, "name": pl.String}, orient="row")
    return trace, plan.with_columns(hardware=pl.lit(None, dtype=pl.String))


@pytest.mark.parametrize("engine, needle", [
    (EngineConfig(path="reference", groups="apart"), None),  # used: no note
    (EngineConfig(path="auto", executor="ray", jobs=2), "compiled engine runs the 2 serving groups"),
])
def test_apart_options_on_two_groups(capsys, engine, needle):
    trace, plan = _two_groups()
    if engine.path == "auto":  # the compiled engine runs only where its stamp is current (a stale one: the
        # reference runs the groups apart, and its note was said once per process, maybe by an earlier test)
        why = fastpath.stale("flex", registry.get("flex").cls)
        assert why is None, f"{why}: test_fast_path_edit_safety.py::test_every_shipped_fast_path_is_verified"
    simulate(trace, PROF, "flex", plan=plan, seed=0, engine=engine)
    err = capsys.readouterr().err
    if needle is None:
        assert "not used" not in err, err
    else:
        assert err.count("note:") == 1 and needle in err and "--executor ray" in err and "--jobs 2" in err, err


def test_apart_options_on_one_group(capsys):
    trace, _ = _two_groups()
    simulate(trace, PROF, "flex", gpus=2, seed=0, engine=EngineConfig(path="reference", groups="apart"))
    err = capsys.readouterr().err
    assert "--groups apart not used" in err and "one serving group" in err, err
