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
    assert set(WARMABLE) == fast - {"ppipe"}  # PPipe's kernel needs a pipeline plan


@pytest.mark.slow
def test_warmup_runs_each_policy_on_the_compiled_engine(cli):
    res = cli("warmup", "--policy", "clockwork,flex")
    assert res.code == 0, res.err
    assert "clockwork" in res.out and "flex" in res.out and "ready in" in res.out
