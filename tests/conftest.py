"""Shared fixtures: run the real CLI in-process and capture its output."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from shepherd.cli.app import main
from shepherd.core import ppipe_data

# Property tests draw their examples deterministically, so a CI run is
# reproducible; run with HYPOTHESIS_PROFILE=explore to search afresh.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))



def _find_shared() -> Path:
    """A team's shared folder of real data: ``$SHEPHERD_SHARED``, else ``../shared`` beside the checkout
    (which may not exist: tests that need it skip, saying so)."""
    env = os.environ.get("SHEPHERD_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared"


SHARED = _find_shared()

#: the PPipe authors' profiling data, found the way the toolkit finds it (``shepherd.core.ppipe_data.locate``)
PPIPE_FOUND = ppipe_data.locate()
PPIPE_DATA = PPIPE_FOUND or ppipe_data.install_dir()  # a path either way; absent when PPIPE_FOUND is None
PPIPE_MISSING = ("needs the PPipe authors' profiling data: run `shepherd data fetch ppipe` "
                 "(or set SHEPHERD_SHARED to a folder holding data/ppipe)")
needs_ppipe = pytest.mark.skipif(PPIPE_FOUND is None, reason=PPIPE_MISSING)


MAF_SAMPLES = SHARED / "data" / "maf2019-sample"


def needs_maf_samples(subset: str = "") -> pytest.MarkDecorator:
    """Skip unless the real MAF 2019 sample folders (vHive's, in the layout ``<N>/invocations.csv``) are there."""
    rel = f"data/maf2019-sample/{subset + '/' if subset else ''}"
    return pytest.mark.skipif(not (SHARED / rel).exists(),
                              reason=f"needs the vHive samples of MAF 2019 at $SHEPHERD_SHARED/{rel}: copy "
                                     "data/traces/{1,5,10,100,500} of github.com/vhive-serverless/invitro there "
                                     "and set SHEPHERD_SHARED")


@pytest.fixture(autouse=True)
def _no_ambient_ray_cluster(monkeypatch):
    """Tests run Ray hermetically: a developer's ``$RAY_ADDRESS`` would send ``--executor ray`` to their cluster
    (Ray's convention, which the toolkit follows); without it every Ray test starts a private local one. A
    cluster Ray recorded in ``$RAY_TMPDIR`` is never joined (``tests/test_ray_hermetic.py``)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


@pytest.fixture(autouse=True)
def _own_trace_cache(tmp_path_factory, monkeypatch):
    """Large traces' columns (core/trace_columns.py) are kept in a folder of the test session's, never the
    user's cache."""
    if "SHEPHERD_TRACE_CACHE" not in os.environ:
        monkeypatch.setenv("SHEPHERD_TRACE_CACHE", str(tmp_path_factory.getbasetemp() / "trace-columns"))


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """``cli("traces", "generate", …)`` runs ``shepherd …`` and returns code, stdout, stderr."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def assert_user_error(result: CliResult, *needles: str) -> None:
    """Exit 2, exactly one line on stderr starting with 'error:', mentioning each needle."""
    assert result.code == 2, (result.code, result.err)
    lines = [ln for ln in result.err.splitlines() if ln.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in result.err


# ------------------------------------------------------------------------------------ agreement tests
# A test marked ``agreement`` compares a policy's compiled fast path with the reference engine: within it the
# kernel runs whatever its stamp says (``verify.comparing``: it is being compared). Only its comparisons
# (``verify.compare``, through ``assert_same``) count as evidence; at the end of a session without ``-k``,
# each policy whose agreement tests all passed and that holds evidence for its current source is stamped
# (core/engine/verify.py). A test that merely ran a kernel, or a session under ``-k``, stamps nothing.

_failed: set[str] = set()  # nodeids of failed agreement tests


@pytest.fixture(autouse=True)
def _fast_path_verification(request):
    if request.node.get_closest_marker("agreement") is None:
        yield
        return
    from shepherd.core.engine import verify

    with verify.comparing():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed and item.get_closest_marker("agreement") is not None:  # the test, its setup or teardown
        _failed.add(item.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus != pytest.ExitCode.OK or _failed or session.config.option.keyword:
        return
    from shepherd.core.engine import verify
    from shepherd.core.policies import registry

    for name in registry.names():
        cls = registry.get(name).cls
        if getattr(cls, "fast_path", None) is None or verify.evidence(name, cls) is None:
            continue
        try:
            verify.stamp(name, cls)
        except OSError:  # a read-only checkout: nothing to record
            pass
