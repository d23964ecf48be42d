"""``shepherd warmup`` (issue 29 item 6): compiles the fast kernels ahead through the public simulate API."""

from __future__ import annotations

import pytest

from conftest import assert_user_error


def test_a_policy_without_a_compiled_path_is_refused_in_one_line(cli):
    assert_user_error(cli("warmup", "--policy", "accordion"), "--policy accordion", "flex")


def test_the_warmable_policies_are_those_with_a_fast_path():
    """warmup names them without importing the fast engine (cli/warmup.py); they must match the engine's."""
    from shepherd.cli.warmup import WARMABLE
    from shepherd.core.policies import registry

    fast = {n for n in registry.names() if getattr(registry.get(n).cls, "fast_path", None) is not None}
    assert set(WARMABLE) == fast  # PPipe's too, on a tiny plan of its own (issue 43)


def test_the_ppipe_warmup_workload_reaches_the_data_plane():
    """The tiny plan warmup runs PPipe's kernel on serves requests through both pipelines, with transfers
    (checked on the reference engine: no compile here)."""
    from shepherd.cli.warmup import ppipe_workload
    from shepherd.core.engine import EngineConfig, simulate

    trace, profs, plan = ppipe_workload()
    res = simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="record", path="reference"))
    served = res.requests_frame().filter(res.requests_frame()["finish_us"] >= 0)
    assert res.extra["policy_stats"]["dispatched"] > 0
    assert served.height > 0.5 * trace.height
    assert set(served["model"].unique()) == {"m0", "m1"}


@pytest.mark.slow
def test_warmup_runs_each_policy_on_the_compiled_engine(cli):
    res = cli("warmup", "--policy", "clockwork,flex,ppipe")
    assert res.code == 0, res.err
    for name in ("clockwork", "flex", "ppipe"):
        assert f"{name} kernel compiled in" in res.out or f"{name} kernel loaded from the cache" in res.out, name
