"""Built-in policies are imported when first asked for (core/policies/registry.py BUILTIN, issue 43): the
table names every policy each module registers, a run imports its own policy's module only, and every
name is still known to names() and get()."""

from __future__ import annotations

import subprocess
import sys

from shepherd.core.policies import registry


def test_builtin_names_every_policy_its_modules_register():
    registry.load_builtin()
    built_in = {n: s.cls.__module__ for n, s in registry.POLICIES.items()
                if s.cls.__module__.startswith("shepherd.core.policies.")}
    assert {n: m.rsplit(".", 1)[1] for n, m in built_in.items()} == registry.BUILTIN
    assert set(registry.BUILTIN) <= set(registry.names())


def test_a_policy_asked_for_imports_its_module_only():
    code = ("import sys\nfrom shepherd.core.policies import registry\n"
            "registry.get('flex')\n"
            "print(sorted(m for m in sys.modules if m.startswith('shepherd.core.policies.')))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = {m.rsplit(".", 1)[1] for m in eval(run.stdout.strip())}  # noqa: S307 - our own printed list
    assert "flex" in loaded
    assert not loaded & {"accordion", "nexus", "ppipe", "symphony", "reactive", "clockwork"}
