"""Shell completion (``shepherd --install-completion``) fills --record values, trace and experiment names (issue 44).

Each case runs the completion protocol the installed bash script uses (``_SHEPHERD_COMPLETE=complete_bash``,
``COMP_WORDS``/``COMP_CWORD``) through the real entry point and reads back the candidates.
"""

from __future__ import annotations

import pytest

from shepherd.cli.simulate import RECORD_LEVELS
from shepherd.experiments import registry as experiments
from shepherd.traces import registry as traces


@pytest.fixture
def complete(cli, monkeypatch):
    def run(line: str) -> list[str]:
        words = line.split(" ")
        monkeypatch.setenv("_SHEPHERD_COMPLETE", "complete_bash")
        monkeypatch.setenv("COMP_WORDS", line)
        monkeypatch.setenv("COMP_CWORD", str(len(words) - 1))
        result = cli(*[w for w in words[1:] if w])
        assert result.code == 0, result.err
        return result.out.split()
    return run


def test_record_values(complete):
    assert complete("shepherd simulate --record ") == list(RECORD_LEVELS)
    assert complete("shepherd simulate --record b") == ["batches"]


def test_trace_names_everywhere_a_trace_is_named(complete):
    for line in ("shepherd simulate --trace maf2019-sa", "shepherd plan --trace maf2019-sa",
                 "shepherd capacity --trace maf2019-sa", "shepherd traces stats maf2019-sa",
                 "shepherd traces maf maf2019-sa"):
        assert complete(line) == ["maf2019-sample", "maf2019-sample-bursty"], line
    assert set(complete("shepherd simulate --trace ")) >= set(traces.TRACES)


def test_trace_files_complete_too(complete, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mytrace.parquet").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    assert complete("shepherd simulate --trace my") == ["mytrace.parquet"]
    assert complete("shepherd simulate --trace no") == []


def test_experiment_and_paper_names(complete):
    assert "shepherd-fig7" in complete("shepherd reproduce shepherd-fig")
    assert set(complete("shepherd reproduce sym")) == {n for e in experiments.all_experiments().values()
                                                       for n in (e.name, e.paper) if n.startswith("sym")}
    assert "shepherd" in complete("shepherd report she")
