"""audits/hostile_catalogue.py sees a write outside a case's folder, however far up (issue 44).

The audit used to list only its own temporary folder, so a case writing to ``../../x`` passed. Each case here
is constructed to write where it should not (``profile -o`` an artifact there, exit 0) and must come out
"bad: wrote outside"; a case writing only inside its folder must not.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

AUDIT = Path(__file__).resolve().parents[1] / "audits" / "hostile_catalogue.py"


@pytest.fixture(scope="module")
def audit():
    spec = importlib.util.spec_from_file_location("hostile_catalogue", AUDIT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _profile_to(audit, target: str):
    return audit.Case(f"writes {target}", ["profile", "--table", "shepherd-v100", "-o", target])


@pytest.mark.parametrize("up", [1, 2, 5])
def test_a_write_up_the_tree_is_flagged(audit, tmp_path, up):
    # up = 1: ../x (the old check saw it); 2: ../../x (it did not); 5: DEPTH + 2 levels, the audit-owned folder
    assert up <= audit.DEPTH + 2
    verdict, why = audit._run(_profile_to(audit, "../" * up + "x.parquet"), tmp_path / "owned" / "case")
    assert verdict == "bad" and why.startswith("wrote outside:"), (verdict, why)
    written = Path(why.split(": ", 1)[1])
    assert written.name == "x.parquet" and written.exists()


def test_an_absolute_path_the_case_names_is_checked(audit, tmp_path):
    target = tmp_path / "elsewhere" / "x.parquet"
    target.parent.mkdir()
    verdict, why = audit._run(_profile_to(audit, str(target)), tmp_path / "owned" / "case")
    assert (verdict, why) == ("bad", f"wrote outside: {target}")


def test_a_write_inside_the_working_folder_is_not_outside(audit, tmp_path):
    verdict, why = audit._run(_profile_to(audit, "sub/p.parquet"), tmp_path / "owned" / "case")
    assert verdict == "weak" and "outside" not in why  # exit 0 where the case expected a refusal: weak, not bad


def test_the_path_cases_run_for_real(audit):
    path_cases = [c for c in audit.CASES if "traversal" in c.id or "absolute" in c.id or "/etc/" in c.id]
    assert len(path_cases) >= 4
    assert all("--dry-run" not in c.args for c in path_cases)
