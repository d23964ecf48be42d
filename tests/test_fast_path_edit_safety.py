"""Edit safety of the fast paths (core/engine/fastpath.py, core/engine/verify.py; issue 42 items 2–4): a
kernel is trusted only for the source it was compared against — its policy's module, what it imports, and
every engine part its declaration ``mirrors`` — read by meaning (a comment changes nothing); only a
comparison of whole tables stamps it; a class or function changed in the process is caught too.

Edits are made in a temporary copy of the package, run in a fresh interpreter, so the checkout is not
touched; there the copy's record is written by the test itself (standing in for a comparison that passed:
the product's stamp needs evidence, :func:`verify.stamp`), and the runs take the reference engine or stop
before any kernel, so nothing compiles. The stamping rules are exercised with a third party's policy whose
"kernel" is plain Python (no compile), in a pytest session of its own."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.engine import EngineConfig, OverheadConfig, fastpath, simulate, verify
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.profiles import load_builtin
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

ROOT = Path(fastpath.__file__).resolve().parents[2]  # the package (the repository root: flat layout)
TESTS = Path(__file__).resolve().parent
CLI = "import sys; from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))"
PROBE = ("import json, sys; import shepherd.core.policies; from shepherd.core.engine import fastpath; "
         "from shepherd.core.policies import registry; c = registry.get('flex').cls; ")
#: the test's stand-in for a passing comparison in the copy: the record of the copy's current source
STAMP_BY_HAND = PROBE + ("p = fastpath.record_path(c); d = fastpath.read_record(p); "
                         "d['flex'] = {'class': fastpath.class_name(c), 'form': fastpath.FORM, "
                         "'sources': fastpath.sources(c)}; p.write_text(json.dumps(d)); print(fastpath.stale('flex', c))")
CHOOSE = PROBE + ("from shepherd.core.engine import EngineConfig, OverheadConfig; "
                  "shape = fastpath.Shape(OverheadConfig(), [0, 0], [[0, 1]], EngineConfig()); "
                  "ch = fastpath.choose('flex', c, None, shape, 'auto'); print(ch.engine); print(ch.why)")


@pytest.fixture
def copy(tmp_path) -> Path:
    """The package copied (sources only) under ``<tmp>/pkg/shepherd``, flex stamped for it; returns ``<tmp>/pkg``."""
    top = tmp_path / "pkg"
    shutil.copytree(ROOT, top / "shepherd", ignore=shutil.ignore_patterns(
        ".git", "tests", "docs", "results", "examples", "benchmarks", "__pycache__", "*.parquet", ".venv*",
        "audits"))
    r = _run(top, code=STAMP_BY_HAND)
    assert r.returncode == 0 and r.stdout.strip() == "None", r.stderr  # trusted as it is
    return top


def _run(top: Path, *args: str, code: str = CLI) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(top))
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          cwd=top, timeout=300)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _trace(path: Path) -> pl.DataFrame:
    """Two GPUs, bursts of short requests behind long batches: Flex preempts."""
    rng = np.random.default_rng(5)
    trace = assemble([poisson(rng, 2500.0, 200_000), poisson(rng, 600.0, 200_000)], ["ResNet18", "ResNet152"],
                     [20_000, 150_000])
    write_artifact(trace, path, "trace", make_provenance())
    return trace


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def test_the_verified_source_is_the_policy_and_every_part_its_kernel_mirrors():
    """Named by the declaration (``mirrors``) — the engine parts the issue found in no hash among them."""
    flex = fastpath.sources(registry.get("flex").cls)
    for part in ("flex.py", "queues.py", "base.py"):
        assert f"core/policies/{part}" in flex
    for part in ("actions", "resources", "clock", "admission", "recorder", "overhead", "loop", "feed"):
        assert f"core/engine/{part}.py" in flex, part
    assert "core/policies/nexus_packing.py" in fastpath.sources(registry.get("nexus").cls)
    assert "core/pipelines/table.py" in fastpath.sources(registry.get("ppipe").cls)
    assert "core/policies/symphony_rules.py" in fastpath.sources(registry.get("symphony").cls)
    assert not any(p.endswith(("registry.py", "fastpath.py", "__init__.py", "jitcache.py")) for p in flex)
    # and the kernel's side: its module, the wing's common parts and rules it compiles, what feeds it
    for part in ("core/engine/fast/flex.py", "core/engine/fast/common.py", "core/engine/fast/stream.py",
                 "core/rules/flex.py"):
        assert part in flex, part
    assert "core/engine/fast/timers.py" in fastpath.sources(registry.get("nexus").cls)


def test_an_edit_to_the_kernel_is_trusted_only_after_a_comparison(copy):
    """The stamp says the kernel equals the reference: an edit to the kernel's own code (a change the reference
    never saw) runs the reference with one note until it is compared again; a comment in it changes nothing."""
    kernel = copy / "shepherd" / "core" / "engine" / "fast" / "flex.py"
    text = kernel.read_text()
    kernel.write_text(text + "\n# a comment\n")
    r = _run(copy, code=CHOOSE)
    assert r.stdout.split("\n")[0] == "fast", r.stdout + r.stderr
    kernel.write_text(text + "\nUNUSED = 1\n")
    r = _run(copy, code=CHOOSE)
    assert r.stdout.startswith("reference\ncore/engine/fast/flex.py changed since the fast path of 'flex'"), r.stdout
    assert "numba" not in r.stderr


def test_the_digest_reads_code_not_comments_or_docstrings(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""Doc."""\n\ndef g(x):\n    """Doc."""\n    return x + 1  # one\n')
    base = fastpath.normalised(f)
    f.write_text('"""Other words."""\n# a comment\n\ndef g(x):\n    """More words."""\n\n    return (x + 1)\n')
    assert fastpath.normalised(f) == base
    f.write_text('"""Doc."""\n\ndef g(x):\n    """Doc."""\n    return x + 2\n')
    assert fastpath.normalised(f) != base


def test_an_edit_to_resources_preempt_runs_the_reference(copy, tmp_path):
    """The kernel re-enacts ``Resources.preempt``: after an edit to it, ``--engine fast`` exits 2 naming the file,
    and ``auto`` runs the (edited) reference with one note — its provenance says so."""
    trace = _trace(tmp_path / "t.parquet")
    _edit(copy / "shepherd" / "core" / "engine" / "resources.py",
          "stop = start if start >= now else min(now + delay_us, self.w_end[worker])",
          "stop = start if start >= now else min(now + 3 * delay_us, self.w_end[worker])")
    args = ("simulate", "--policy", "flex", "--trace", str(tmp_path / "t.parquet"), "--gpus", "2", "--record",
            "batches", "--set", "exit_points=1")
    r = _run(copy, *args, "--engine", "fast", "-o", str(tmp_path / "fast"))
    assert r.returncode == 2 and _lines(r.stderr) == [_lines(r.stderr)[0]], r.stderr
    assert _lines(r.stderr)[0].startswith("error: core/engine/resources.py changed since the fast path of 'flex'")
    assert not (tmp_path / "fast").exists()

    outs = {}
    for engine in ("auto", "reference"):
        r = _run(copy, *args, "--engine", engine, "-o", str(tmp_path / engine))
        assert r.returncode == 0, r.stderr
        notes = _lines(r.stderr)
        if engine == "auto":  # one line, naming the file and what runs instead
            assert len(notes) == 1 and notes[0].startswith("note: core/engine/resources.py changed"), notes
            assert notes[0].endswith("; --engine auto runs the reference engine")
        else:
            assert not notes, notes
        outs[engine] = {p.name: read_artifact(p, p.stem) for p in sorted((tmp_path / engine).glob("*.parquet"))}
    assert outs["auto"].keys() == outs["reference"].keys() and len(outs["auto"]) >= 3
    for name, art in outs["auto"].items():
        assert art.frame.equals(outs["reference"][name].frame), name
    ran = outs["auto"]["summary.parquet"].run["engine"]  # the run record: the tables are the same either way
    assert ran["engine"] == "reference" and ran["why"].startswith("core/engine/resources.py changed"), ran
    # the edit took effect: the unedited reference (this checkout) preempts at other times
    here = simulate(trace, load_builtin("shepherd-v100"), "flex", {"exit_points": 1}, gpus=2, engine=EngineConfig(path="reference"))
    assert here.summary_frame()["preemptions"][0] > 0
    assert here.workers_frame()["wasted_us"].to_list() != outs["auto"]["workers.parquet"].frame["wasted_us"].to_list()


def test_a_comment_or_docstring_in_a_mirrored_module_changes_nothing(copy):
    actions = copy / "shepherd" / "core" / "engine" / "actions.py"
    _edit(actions, "from __future__ import annotations", "from __future__ import annotations\n\n# a contributor's note")
    _edit(actions, '"""', '"""A reworded docstring. ', )
    r = _run(copy, code=CHOOSE)
    assert r.returncode == 0 and _lines(r.stdout)[0] == "fast", r.stdout + r.stderr
    assert not r.stderr.strip()
    # and the same file's code edited: caught
    _edit(actions, "# a contributor's note", "NOTE = 1")
    r = _run(copy, code=CHOOSE)
    assert _lines(r.stdout) == ["reference", _lines(r.stdout)[1]] and "core/engine/actions.py changed" in r.stdout


def test_a_monkeypatched_policy_method_runs_the_reference(copy, tmp_path):
    """In a notebook: ``Flex._check_preempt`` replaced → the reference (which runs the replacement) with one
    note naming it; ``--engine fast`` refuses. Unpatched, the copy's fast path is trusted (``CHOOSE``)."""
    _trace(tmp_path / "t.parquet")
    code = PROBE + (
        "import polars as pl; from shepherd.core.engine import EngineConfig, simulate; "
        "from shepherd.core.profiles import load_builtin; P = load_builtin('shepherd-v100'); "
        "c._check_preempt = lambda self, now, m: None; "
        f"t = pl.read_parquet({str(tmp_path / 't.parquet')!r}); "
        "r = simulate(t, P, 'flex', {'exit_points': 1}, gpus=2); "
        "print(r.engine_ran['engine']); print(r.summary_frame()['preemptions'][0]); "
        "from shepherd.core.errors import UserError\n"
        "try:\n    simulate(t, P, 'flex', gpus=2, engine=EngineConfig(path='fast'))\n"
        "except UserError as e:\n    print('refused:', e)\n")
    r = _run(copy, code=code)
    assert r.returncode == 0, r.stderr
    out = _lines(r.stdout)
    assert out[0] == "reference" and out[1] == "0", out  # the patch took effect: no preemption at all
    assert out[2].startswith("refused: Flex._check_preempt is not what core/policies/flex.py defines"), out
    notes = _lines(r.stderr)
    assert len(notes) == 1 and notes[0].startswith("note: Flex._check_preempt is not what"), notes
    assert _lines(_run(copy, code=CHOOSE).stdout)[0] == "fast"


def test_a_subclass_or_a_patched_engine_part_is_not_covered():
    """In this process (nothing run): a subclass registered under the verified name, a class defined outside a
    file, and a replaced engine function are each named."""
    from shepherd.core.engine import resources
    from shepherd.core.policies.flex import Flex

    cls = registry.get("flex").cls
    assert fastpath.patched("flex", cls) is None
    sub = type("Mine", (Flex,), {"__module__": "shepherd.core.policies.flex", "__qualname__": "Mine"})
    assert "not the class its fast path was verified for" in fastpath.stale("flex", sub) or \
        "never verified" in fastpath.stale("flex", sub)
    outside = type("Mine", (Flex,), {"__module__": "__main__"})
    assert "cannot be verified" in fastpath.stale("flex", outside) or "subclass" in fastpath.patched("flex", outside)
    original = resources.Resources.preempt
    try:
        resources.Resources.preempt = lambda self, worker, now, delay_us: original(self, worker, now, 0)
        assert fastpath.patched("flex", cls).startswith("Resources.preempt is not what core/engine/resources.py")
    finally:
        resources.Resources.preempt = original
    assert fastpath.patched("flex", cls) is None


def test_a_replaced_import_in_a_verified_module_is_caught(monkeypatch):
    """A name a verified module imports and calls, replaced in that module (``ppipe.reserve``: the policy books
    without reserving), is an in-process change too: the kernel never calls it, so the reference runs."""
    import shepherd.core.policies.ppipe as ppipe_policy

    cls = registry.get("ppipe").cls
    assert fastpath.patched("ppipe", cls) is None
    monkeypatch.setattr(ppipe_policy, "reserve", lambda res, resv, now: None)
    assert fastpath.patched("ppipe", cls).startswith("shepherd.core.policies.ppipe.reserve is not what "
                                                     "core/policies/ppipe.py defines or imports")
    shape = fastpath.Shape(OverheadConfig(mode="none"), [0, 0], [[0, 1]], EngineConfig())
    assert fastpath.choose("ppipe", cls, registry.make_config("ppipe"), shape, "auto").engine == "reference"


# -------------------------------------------------------------------------------------------- who may stamp

THIRD_PARTY = '''
"""A third party's policy with a fast path of its own: it drops every request; its "kernel" (plain Python)
writes the same tables{wrong}."""
from shepherd.core.engine.fastpath import ENGINE, FastPath, modelled
from shepherd.core.policies.base import Policy
from shepherd.core.policies.registry import register


def run_group(engine, params, runtime):
    engine.rec.r_outcome[:] = 3  # DROPPED
    {extra}
    return {{}}


@register("dropall")
class DropAll(Policy):
    fast_path = FastPath("engine", "dropall", covers="overhead model|none (mine)",
                         covered=lambda cfg, shape: modelled(shape), mirrors=ENGINE)

    def on_arrival(self, now, rid, model, deadline, stream):
        self.act.drop([rid], now)
'''


def _third_party(where: Path, wrong: bool = False) -> None:
    where.mkdir(exist_ok=True)
    extra = "engine.rec.r_preempt[:] = 1" if wrong else "pass"
    (where / "dropall.py").write_text(THIRD_PARTY.format(wrong=" (but one column)" if wrong else "", extra=extra))


@pytest.fixture
def dropall(tmp_path, monkeypatch):
    _third_party(tmp_path / "tp")
    monkeypatch.syspath_prepend(str(tmp_path / "tp"))
    sys.modules.pop("dropall", None)
    import dropall  # noqa: F401 - registers it

    yield tmp_path / "tp"
    registry.unregister("dropall")
    sys.modules.pop("dropall", None)


def test_verify_stamps_a_third_party_fast_path_after_a_real_comparison(dropall, cli):
    from shepherd.core.engine.outcomes import DROPPED

    assert DROPPED == 3
    cls = registry.get("dropall").cls
    assert "never verified" in fastpath.stale("dropall", cls)
    with pytest.raises(UserError, match="nothing compared the fast path of 'dropall'"):
        verify.stamp("dropall", cls)
    assert not (dropall / "dropall.verified.json").exists()
    r = cli("verify", "dropall", "--workloads", "3")
    assert r.code == 0, r.err
    for needle in ("workloads", "requests / batches compared", "requests, batches, workers, summary",
                   "stamp written"):
        assert needle in r.out, needle
    rec = json.loads((dropall / "dropall.verified.json").read_text())["dropall"]
    assert rec["sources"] == fastpath.sources(cls) and rec["class"] == "dropall.DropAll"
    assert rec["compared"]["workloads"] == 3 and rec["compared"]["by"] == ["shepherd verify"]
    assert rec["compared"]["requests"] > 100
    assert fastpath.stale("dropall", cls) is None


def test_a_kernel_that_disagrees_is_not_stamped(tmp_path, monkeypatch, cli):
    _third_party(tmp_path / "tp", wrong=True)
    monkeypatch.syspath_prepend(str(tmp_path / "tp"))
    sys.modules.pop("dropall", None)
    import dropall  # noqa: F401

    try:
        r = cli("verify", "dropall", "--workloads", "2")
        assert r.code == 1 and "requests, summary differ between the reference and the fast engine on workload 0; not stamped" in r.err, r.err
        assert not (tmp_path / "tp" / "dropall.verified.json").exists()
    finally:
        registry.unregister("dropall")
        sys.modules.pop("dropall", None)


SESSION_CONFTEST = '''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("project_conftest", {conftest!r})
project = importlib.util.module_from_spec(spec)
sys.modules["project_conftest"] = project
spec.loader.exec_module(project)
cli = project.cli
_fast_path_verification = project._fast_path_verification
pytest_runtest_makereport = project.pytest_runtest_makereport
pytest_sessionfinish = project.pytest_sessionfinish
'''

SESSION_TESTS = '''
import numpy as np, pytest
import dropall  # noqa: F401
from shepherd.core.engine import EngineConfig, simulate, verify
from shepherd.core.profiles import load_builtin
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

pytestmark = pytest.mark.agreement
TRACE = assemble([poisson(np.random.default_rng(1), 900.0, 100_000)], ["ResNet50"], [40_000])


def run(path):
    return simulate(TRACE, load_builtin("shepherd-v100"), "dropall", gpus=2, engine=EngineConfig(path=path))


def test_runs_the_kernel_only():
    assert run("fast").dropped == len(TRACE)


def test_compares():
    verify.compare(run("reference"), run("fast"))
'''


def _session(where: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(where), str(ROOT.parent)]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           "--rootdir", str(where), *args],
                          env=env, capture_output=True, text=True, cwd=where, timeout=300)


def test_only_a_comparison_in_a_session_without_k_stamps(tmp_path):
    """An agreement test that runs the kernel without comparing stamps nothing; nor does a session under
    ``-k``, even one that compares; a session whose agreement tests compared stamps."""
    where = tmp_path / "tp"
    _third_party(where)
    (where / "conftest.py").write_text(SESSION_CONFTEST.format(conftest=str(TESTS / "conftest.py")))
    (where / "test_session.py").write_text(SESSION_TESTS)
    (where / "pytest.ini").write_text("[pytest]\nmarkers =\n    agreement: compared\n")
    stamp = where / "dropall.verified.json"

    tests = str(where / "test_session.py")
    r = _session(where, tests, "-k", "kernel_only")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert not stamp.exists()  # ran the kernel, compared nothing
    r = _session(where, tests, "-k", "compares")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    assert not stamp.exists()  # compared, but under -k
    r = _session(where, f"{tests}::test_runs_the_kernel_only")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not stamp.exists()  # no -k, nothing compared
    r = _session(where, tests)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr
    rec = json.loads(stamp.read_text())["dropall"]
    assert rec["compared"]["workloads"] == 1 and rec["compared"]["by"] == ["a comparison"]


def test_shepherd_verify_flex_compares_and_restamps(cli, tmp_path, monkeypatch):
    """``shepherd verify flex`` runs both engines and, identical, writes the stamp (here into a copy of the
    record, so the checkout's is untouched)."""
    real = fastpath.record_path(registry.get("flex").cls)
    target = tmp_path / "flex.verified.json"
    target.write_text(json.dumps({k: v for k, v in fastpath.read_record(real).items() if k != "flex"}))
    monkeypatch.setattr(fastpath, "record_path", lambda cls: target)
    cls = registry.get("flex").cls
    assert "never verified" in fastpath.stale("flex", cls)
    r = cli("verify", "flex", "--workloads", "3")
    assert r.code == 0, r.err
    rec = json.loads(target.read_text())["flex"]
    assert rec["sources"] == fastpath.sources(cls) and rec["compared"]["workloads"] == 3
    assert fastpath.stale("flex", cls) is None
    assert_user_error(cli("verify", "reactive"), "'reactive' has no fast path to verify")
    ppipe = registry.get("ppipe").cls
    monkeypatch.setattr(ppipe, "fast_path", dataclasses.replace(ppipe.fast_path, workloads=None))
    assert_user_error(cli("verify", "ppipe"), "requires pipeline_plan")  # no workloads of its own: refused


def test_shepherd_verify_ppipe_compares_on_its_own_workloads(cli, tmp_path, monkeypatch):
    """PPipe needs a plan and block profiles: its declaration makes its own workloads (seeded synthetic plans,
    every rule switch), so ``shepherd verify ppipe`` compares it like any other."""
    target = tmp_path / "ppipe.verified.json"
    monkeypatch.setattr(fastpath, "record_path", lambda cls: target)
    r = cli("verify", "ppipe", "--workloads", "4")
    assert r.code == 0, r.err
    rec = json.loads(target.read_text())["ppipe"]
    assert rec["compared"]["workloads"] == 4 and rec["compared"]["batches"] > 0
    assert "core/pipelines/reservations.py" in rec["sources"]
    kw = registry.get("ppipe").cls.fast_path.workloads(3)
    assert kw["plan"].pipelines and kw["engine"].reserved == "record"


def test_a_policy_never_verified_is_refused_by_fast(tmp_path, monkeypatch):
    """A fast path without a record (a new policy's, or a deleted record) is not trusted either; the choice
    says which engine ran and why in each case."""
    monkeypatch.setattr(fastpath, "record_path", lambda cls: tmp_path / "none.verified.json")
    cls = registry.get("flex").cls
    shape = fastpath.Shape(OverheadConfig(), [0, 0], [[0, 1]], EngineConfig())
    with pytest.raises(UserError, match="the fast path of 'flex' was never verified"):
        fastpath.choose("flex", cls, None, shape, "fast")
    assert fastpath.choose("flex", cls, None, shape, "auto").engine == "reference"
    assert fastpath.choose("flex", cls, None, shape, "reference").why == "--engine reference"
    reactive = registry.get("reactive").cls
    with pytest.raises(UserError, match="'reactive' has no fast path .*: clockwork, flex, flex-np, nexus, ppipe"):
        fastpath.choose("reactive", reactive, None, shape, "fast")
    assert fastpath.choose("reactive", reactive, None, shape, "auto").why == "policy 'reactive' has no fast path"
    emulated = fastpath.Shape(OverheadConfig(mode="emulation"), [0, 0], [[0, 1]], EngineConfig())
    with pytest.raises(UserError, match=r"covers overhead model\|none; use --engine reference"):
        fastpath.choose("flex", cls, None, emulated, "fast")
    with pytest.raises(ValueError, match="mode"):
        fastpath.FastPath("sideways", "x", covers="")


SHIPPED = [n for n in registry.names() if getattr(registry.get(n).cls, "fast_path", None) is not None
           and registry.get(n).cls.__module__.startswith("shepherd.")]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_fast_path_is_verified(name):
    """A checkout runs the kernels it ships: each built-in fast path's stamp is for the source as it is. An edit
    (or a merge) that touches a file a kernel mirrors leaves the stamp stale — then ``auto`` runs the reference
    engine with one note per process, and a later test expecting the kernel fails for no visible reason; this
    test names the policy instead. The fix is a comparison, never a hand-written stamp."""
    assert len(SHIPPED) >= 7  # clockwork, flex, flex-np, nexus, ppipe, symphony, symphony-wc
    why = fastpath.stale(name, registry.get(name).cls)
    assert why is None, (f"{why} — after checking the change, `shepherd verify {name}` (or `pytest -m agreement`) "
                         "compares and re-stamps; commit the .verified.json")
