"""The PyTorch extra's install hint names this project's distribution, ``shepherd-serving`` (issue 44).

The package index's ``shepherd`` is an unrelated project, so a hint saying ``pip install 'shepherd[torch]'``
installs the wrong thing. One constant (``shepherd.core.measure.TORCH_PIP``) is the hint; this test greps the
package, the docs and every ``--help`` page for any other spelling (this file, which holds wrong ones to check
the grep, aside), and checks rich markup leaves the
``[torch]`` of the help text alone.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from shepherd.cli.app import app
from shepherd.core.measure import INSTALL_HINT, TORCH_PIP

ROOT = Path(__file__).resolve().parents[1]
#: an install command naming a distribution with an extra: ``pip install 'NAME[extra]'`` (quoted or not)
PIP_EXTRA = re.compile(r"pip install (?:-e )?['\"]?([A-Za-z0-9_.\-]+)\\?\[([a-z,]+)\]")
#: this project's name with an extra but without ``-serving``, anywhere (a hint quoted in prose, a help text)
BARE = re.compile(r"(?<![\w.\-])shepherd\\?\[[a-z,]+\]")
SKIP_DIRS = {".venv", ".git", "results", "build", "__pycache__", ".pytest_cache", "node_modules"}


def _files() -> list[Path]:
    out = []
    for path in ROOT.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".md", ".toml", ".txt", ".json", ".cfg"} \
                and not SKIP_DIRS & set(path.relative_to(ROOT).parts) and path != Path(__file__).resolve():
            out.append(path)
    return out


def test_the_constant_names_the_distribution_in_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert TORCH_PIP == f"pip install '{project['name']}[torch]'"
    assert "torch" in project["optional-dependencies"]
    assert TORCH_PIP in INSTALL_HINT


def test_no_file_in_the_package_or_docs_names_another_distribution():
    files = _files()
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".py" for p in files)
    wrong = []
    for path in files:
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            names = [name for name, _extra in PIP_EXTRA.findall(line)]
            # another project's hint (python-mip's `pip install mip[highs]`) is not ours to rename
            if any(name.startswith("shepherd") and name != "shepherd-serving" for name in names) or BARE.search(line):
                wrong.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not wrong, "\n".join(wrong)


def test_the_readme_gives_the_constant_verbatim():
    assert TORCH_PIP in (ROOT / "README.md").read_text()


def _all_help() -> dict[str, str]:
    root = typer.main.get_command(app)
    runner = CliRunner()
    pages = {}

    def walk(cmd, path):
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        pages[" ".join(path) or "shepherd"] = result.output
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, path + [name])

    walk(root, [])
    return pages


def test_every_help_page_prints_the_hint_whole():
    pages = _all_help()
    assert len(pages) > 15
    text = "\n".join(pages.values())
    assert TORCH_PIP in " ".join(pages["validate"].split()), pages["validate"]  # rich kept `[torch]`
    flat = " ".join(text.split())
    assert not BARE.search(flat), BARE.search(flat)
    for name, _extra in PIP_EXTRA.findall(flat):
        assert not name.startswith("shepherd") or name == "shepherd-serving", name
    assert "pip install 'shepherd'" not in text  # what rich printed before: the extra swallowed as markup


def test_the_runtime_error_is_the_constant(cli, monkeypatch, tmp_path):
    import sys
    monkeypatch.setitem(sys.modules, "torch", None)
    r = cli("profile", "--measure", "ResNet50", "-o", tmp_path / "p.parquet")
    assert r.code == 2 and TORCH_PIP in r.err


@pytest.mark.parametrize("line,bad", [("pip install 'shepherd[torch]'", True), ("pip install shepherd[torch]", True),
                                      ("pip install -e '.[ray]'", False), (TORCH_PIP, False)])
def test_the_grep_sees_a_wrong_hint(line, bad):
    names = [n for n, _ in PIP_EXTRA.findall(line)]
    assert names and (any(n.startswith("shepherd") and n != "shepherd-serving" for n in names) == bad)
    assert bool(BARE.search(line)) == bad
