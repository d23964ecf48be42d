"""Every example a ``--help`` page shows is a command line the parser accepts, in today's spelling (issue 44).

The examples are read from the commands' own help text (the lines after ``Example:`` / ``Examples:``), each
``shepherd …`` command line in them is parsed by the real click command tree (options, types, required
arguments; nothing runs), and a deprecated spelling fails the test: a hidden option whose help says
"Deprecated", or ``reproduce --seeds N`` as a count.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex

import pytest
import typer

from shepherd.cli.app import app
from shepherd.cli.seeds import replica_count

ROOT = typer.main.get_command(app)


def _commands(cmd=ROOT, path=()):
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _commands(sub, path + (name,))


def _help_text(cmd) -> str:
    return "\n".join(t for t in (getattr(cmd, "help", None), getattr(cmd, "epilog", None)) if t)


def examples(text: str) -> list[str]:
    """The ``shepherd …`` command lines in a help text's examples (`` · `` and `` && `` separate several)."""
    found, inside = [], False
    for line in text.replace("\\[", "[").splitlines():
        stripped = line.strip()
        if re.match(r"Examples?\b[^:]*:", stripped):  # "Example:", "Examples:", "Example (offline, …):"
            inside = True
            stripped = re.sub(r"^Examples?\b[^:]*:\s*", "", stripped)
        elif not stripped:
            continue
        elif not stripped.startswith(("shepherd ", "·")):
            inside = False
        if not inside:
            continue
        for part in re.split(r"\s+·\s+|\s+&&\s+|^·\s+", stripped):
            part = part.strip()
            if part.startswith("shepherd "):
                found.append(part)
    return found


EXAMPLES = sorted({(path, line) for path, cmd in _commands() for line in examples(_help_text(cmd))})


def test_the_help_pages_have_examples_to_check():
    # a broken extraction would make every test below vacuous
    commands = {path for path, _ in EXAMPLES}
    assert len(EXAMPLES) >= 25, EXAMPLES
    for path in [("traces",), ("traces", "maf"), ("simulate",), ("sweep",), ("plan",), ("validate",), ("report",)]:
        assert path in commands, path


def command_line(line: str) -> list[str]:
    """``shepherd ARGS`` → ARGS, up to a shell operator (``> file``, ``| less``) or a ``(comment)``."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    argv = []
    for token in lexer:
        if set(token) <= set("();<>|&"):
            break
        argv.append(token)
    assert argv[0] == "shepherd", line
    return argv[1:]


def _parse(argv: list[str]):
    """Parse ``shepherd ARGV`` down the command tree; the leaf command and its parsed parameters."""
    ctx = ROOT.make_context("shepherd", list(argv))
    cmd = ROOT
    while hasattr(cmd, "resolve_command"):  # a group (typer vendors click: no isinstance on click's classes)
        rest = list(getattr(ctx, "_protected_args", getattr(ctx, "protected_args", []))) + list(ctx.args)
        if not rest:
            break
        name, sub, remaining = cmd.resolve_command(ctx, rest)
        ctx = sub.make_context(name, remaining, parent=ctx)
        cmd = sub
    return cmd, ctx


def deprecated_spellings(cmd, params: dict) -> list[str]:
    """The deprecated spellings a parsed command line used."""
    used = [param.opts[0] for param in cmd.params
            if getattr(param, "hidden", False) and (param.help or "").lower().startswith("deprecated")
            and params.get(param.name) is not None]
    if cmd.name == "reproduce" and params.get("seeds") is not None:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            replica_count(None, params["seeds"])
        if "deprecated" in err.getvalue():
            used.append("--seeds N (a count)")
    return used


@pytest.mark.parametrize("path,line", EXAMPLES, ids=[line[:70] for _, line in EXAMPLES])
def test_every_help_example_parses_in_todays_spelling(path, line):
    cmd, ctx = _parse(command_line(line))
    assert not (list(getattr(ctx, "_protected_args", getattr(ctx, "protected_args", []))) + list(ctx.args)), f"`{line}`: left unparsed: {ctx.args}"
    assert not deprecated_spellings(cmd, ctx.params), f"`{line}` (in `shepherd {' '.join(path)} --help`) uses " \
                                                      f"{deprecated_spellings(cmd, ctx.params)}"


def test_a_deprecated_spelling_is_caught():
    # the check itself: the spellings the old examples used are found
    for line in ["shepherd traces maf maf-synthetic --duration-min 5 --load 3000 -o trace.parquet",
                 "shepherd simulate --policy flex --trace t.parquet --gpus 4 --slo 100",
                 "shepherd reproduce shepherd --quick --seeds 3"]:
        cmd, ctx = _parse(command_line(line))
        assert deprecated_spellings(cmd, ctx.params), line


def test_extraction_reads_every_form():
    text = ("Run it.\n\nExamples:\n\n  shepherd a --x 1\n\n  shepherd b\n\nExample: shepherd c · shepherd d"
            " && shepherd e\n· shepherd f\n\nNot an example: shepherd g")
    assert examples(text) == ["shepherd a --x 1", "shepherd b", "shepherd c", "shepherd d", "shepherd e",
                              "shepherd f"]
    assert command_line("shepherd sweep --schema > s.json") == ["sweep", "--schema"]
    assert command_line("shepherd x --set 'a=b c' (a comment)") == ["x", "--set", "a=b c"]
