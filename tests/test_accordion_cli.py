"""Accordion through the CLI: built-in layer profiles → simulate, and bad input (one line, exit 2)."""

import numpy as np
import polars as pl
import pytest

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, write_artifact


@pytest.fixture
def files(tmp_path, cli):
    layers, trace = tmp_path / "layers.parquet", tmp_path / "t.parquet"
    assert cli("profile", "--table", "accordion-layers", "-o", layers).code == 0
    assert cli("traces", "generate", "--process", "accordion-stream", "--stream", "2", "--duration", "30",
               "-o", trace).code == 0
    return tmp_path, layers, trace


def write_trace(path, **cols):
    n = 3
    arr = np.arange(n, dtype=np.int64) * 1000
    f = pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["VGG16"] * n,
                      "slo_us": np.full(n, 10**7), "deadline_us": arr + 10**7,
                      "instances": np.full(n, 4, np.int32), "priority": np.ones(n, np.int32)})
    f = f.with_columns([pl.lit(v).cast(f.schema[k]).alias(k) for k, v in cols.items()])
    write_artifact(f, path, "trace", make_provenance({}, 0, []))
    return path


def sim(cli, layers, trace, out, *extra):
    return cli("simulate", "--policy", "accordion", "--profiles", layers, "--trace", trace, "--gpus", "64", "-o", out, *extra)


def test_simulate_accordion_from_cli(files, cli):
    tmp, layers, trace = files
    r = sim(cli, layers, trace, tmp / "out")
    assert r.code == 0, r.err


@pytest.mark.parametrize("cols,needle", [
    (dict(instances=-5), "instances"),
    (dict(instances=10**8), "more than any configuration allows"),
    (dict(model="BERT"), "no layer profile"),
])
def test_bad_queries(files, cli, cols, needle):
    tmp, layers, _ = files
    trace = write_trace(tmp / "bad.parquet", **cols)
    assert_user_error(sim(cli, layers, trace, tmp / "out"), needle)


def test_more_than_8_eps(files, cli):
    tmp, layers, trace = files
    assert_user_error(sim(cli, layers, trace, tmp / "out", "--set", "max_eps=9"), "1 to 8")


def test_measure_bad_batch(cli, tmp_path):
    pytest.importorskip("torch")
    assert_user_error(cli("profile", "--measure", "ResNet50", "--batch", "-4", "-o", tmp_path / "p.parquet"),
                      "--batch")
