"""One meaning per option name across every command and the Python API (STYLE.md pattern 16; issue 29 item 7).

Walks every command's options: a name means one thing (one value type) wherever it appears; ``--seed`` is
one int, ``--seeds`` a list, ``--replicas`` a count; ``-o`` is always ``--out`` (an artifact written);
``--jobs`` has one default and one help text; Ray is ``--ray-address`` wherever ``--executor`` is, the old
``--address`` only hidden; ``capacity --rel-tol``'s default is ``shepherd.capacity``'s. Old spellings keep
working for one release with one notice.
"""

from __future__ import annotations

import inspect
import types
import typing
import warnings

import pytest
import typer

from shepherd.cli.app import app
from shepherd.cli.grid_run import JOBS_HELP

#: names deliberately of two kinds, and why (each stays documented in both commands' --help)
EXCEPTIONS = {
    # traces generate: the gamma process's inter-arrival CV (a number); traces stats: print the CV tables (a flag)
    "--cv",
    # the same profiles everywhere; capacity (like a sweep config's `profiles`) also takes a built-in table's
    # name, so it is read as text, not a path
    "--profiles",
}


def _commands(cmd=None, path=()):
    cmd = cmd or typer.main.get_command(app)
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))
    if path:
        yield " ".join(path), cmd


#: each option's annotation in its command's function, by the option object's id (filled by ``_options``)
_ANNOTATIONS: dict[int, object] = {}


def _options():
    """(command, option object) for every option of every command."""
    for name, cmd in _commands():
        hints = typing.get_type_hints(inspect.unwrap(cmd.callback)) if cmd.callback else {}
        for param in cmd.params:
            if param.param_type_name == "option":
                _ANNOTATIONS[id(param)] = hints[param.name]
                yield name, param


def _by_name() -> dict[str, list[tuple[str, object]]]:
    out: dict[str, list[tuple[str, object]]] = {}
    for command, param in _options():
        if param.hidden:
            continue
        for flag in param.opts:
            out.setdefault(flag, []).append((command, param))
    return out


def test_the_walk_sees_every_command_and_their_options():
    commands = {name for name, _ in _commands()}
    assert {"simulate", "plan", "sweep", "capacity", "reproduce", "report", "warmup", "traces maf",
            "runs list"} <= commands
    assert len(list(_options())) > 100


def test_one_name_one_kind_of_value_everywhere():
    mixed = {}
    for flag, uses in _by_name().items():
        kinds = {_typename(p) for _, p in uses}
        if len(kinds) > 1 and flag not in EXCEPTIONS:
            mixed[flag] = sorted((c, _typename(p), p.is_flag) for c, p in uses)
    assert mixed == {}


def _typename(param) -> str:
    """The value's type from the command function's annotation, as typer reads it: int, float, str, Path, or
    'flag' (read from the annotation rather than typer's private parameter objects, which change between
    typer releases)."""
    if param.is_flag:
        return "flag"
    kind = _ANNOTATIONS[id(param)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # Optional[X]: an unset X
        (kind,) = [arg for arg in typing.get_args(kind) if arg is not type(None)]
    if typing.get_origin(kind) is list:  # repeatable: the same kind of value, several times
        (kind,) = typing.get_args(kind)
    return getattr(kind, "__name__", str(kind))


def test_the_exceptions_are_real():
    """An exception that no longer mixes two kinds is dropped from the list (the list stays honest)."""
    for flag in EXCEPTIONS:
        kinds = {_typename(p) for _, p in _by_name()[flag]}
        assert len(kinds) > 1, flag


def test_seed_is_one_int_seeds_a_list_replicas_a_count():
    uses = _by_name()
    assert {_typename(p) for _, p in uses["--seed"]} == {"int"}
    assert {_typename(p) for _, p in uses["--seeds"]} == {"str"}  # parsed as 0,1,2 by cli/seeds.py
    assert {_typename(p) for _, p in uses["--replicas"]} == {"int"}
    # every command that takes a list of seeds takes the count too
    assert {c for c, _ in uses["--seeds"]} <= {c for c, _ in uses["--replicas"]}


def test_o_is_always_out_an_artifact_written():
    for command, param in _options():
        if "-o" in param.opts and not param.hidden:
            assert "--out" in param.opts, command
    for command, param in _options():
        if "--out" in param.opts:
            assert "-o" in param.opts, command


def test_jobs_has_one_default_and_one_help():
    uses = _by_name()["--jobs"]
    assert {c for c, _ in uses} >= {"simulate", "reproduce", "sweep", "capacity"}
    for command, param in uses:
        assert param.default is None, command  # None → every core (cli/grid_run.default_jobs)
        assert param.help.startswith(JOBS_HELP), command
        assert "-j" in param.opts, command


def test_ray_is_ray_address_wherever_there_is_an_executor():
    uses = _by_name()
    with_executor = {c for c, _ in uses["--executor"]}
    assert with_executor <= {c for c, _ in uses["--ray-address"]}
    assert "--address" not in uses  # only the hidden, deprecated spelling remains


def test_rel_tol_default_is_the_same_on_the_cli_and_in_the_api():
    from shepherd import api
    from shepherd.experiments.sweep_schema import CapacitySection

    api_default = inspect.signature(api.capacity).parameters["rel_tol"].default
    assert CapacitySection.model_fields["rel_tol"].default == api_default
    param = next(p for c, p in _options() if c == "capacity" and "--rel-tol" in p.opts)
    assert f"default {api_default:g}" in param.help


# --------------------------------------------------------------------------- the old spellings, one release


def _stop_at_scale(monkeypatch) -> dict:
    """Record the replica count reproduce computes, then stop it (one user error) before any cell runs."""
    from shepherd.core.errors import UserError
    from shepherd.experiments import base

    seen: dict = {}

    def record(quick, seeds):
        seen["seeds"] = seeds
        raise UserError("stopped by the test after the options were parsed")

    monkeypatch.setattr(base.Scale, "default", staticmethod(record))
    return seen


def test_reproduce_seeds_as_a_count_is_replicas_with_a_notice(cli, monkeypatch):
    seen = _stop_at_scale(monkeypatch)
    res = cli("reproduce", "shepherd-theorem", "--seeds", "2", "--no-report")
    assert seen.pop("seeds") == 2
    assert "--seeds N as a count is deprecated" in res.err and "--replicas N" in res.err
    res = cli("reproduce", "shepherd-theorem", "--replicas", "2", "--no-report")
    assert seen.pop("seeds") == 2 and "deprecated" not in res.err
    res = cli("reproduce", "shepherd-theorem", "--seeds", "0,1,2", "--no-report")
    assert seen.pop("seeds") == 3 and "deprecated" not in res.err
    res = cli("reproduce", "shepherd-theorem", "--seeds", "1,2", "--no-report")
    assert res.code == 2 and "--replicas N" in res.err and "seeds" not in seen
    res = cli("reproduce", "shepherd-theorem", "--seeds", "2", "--replicas", "2", "--no-report")
    assert res.code == 2 and "not both" in res.err


def test_reproduce_address_is_ray_address_with_a_notice(cli, monkeypatch):
    _stop_at_scale(monkeypatch)
    res = cli("reproduce", "shepherd-theorem", "--executor", "local", "--address", "h:1", "--no-report")
    assert "--address is deprecated" in res.err and "--ray-address" in res.err


def test_runs_o_is_results_with_a_notice(cli, tmp_path):
    res = cli("runs", "list", "-o", tmp_path)
    assert res.code == 0, res.err
    assert "-o is deprecated" in res.err and "--results" in res.err
    res = cli("runs", "list", "--results", tmp_path)
    assert res.code == 0 and "deprecated" not in res.err


def test_api_load_trace_rate_is_req_per_s_and_load_is_its_old_spelling():
    from shepherd import api

    new = api.load_trace("maf-synthetic", duration_min=1, rate=200.0, seed=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = api.load_trace("maf-synthetic", duration_min=1, load=200.0, seed=3)
    assert new.equals(old)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "rate=" in str(caught[0].message)
    assert 150 * 60 < new.height < 250 * 60  # req/s over one minute
    plain = api.load_trace("maf-synthetic", duration_min=1, seed=3)
    assert not plain.equals(new)


def test_api_load_trace_refuses_both_spellings():
    from shepherd import api
    from shepherd.core.errors import UserError

    with pytest.raises(UserError, match="not both"):
        api.load_trace("maf-synthetic", duration_min=1, rate=200.0, load=100.0)

