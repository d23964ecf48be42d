"""The trace's models and model index in one pass (:func:`shepherd.core.engine.inputs.trace_models`): the same
answer as the two-pass definition (distinct models sorted, then the cast), whichever rows name which model."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.engine.inputs import MODEL_PROBE_ROWS, trace_models


def two_pass(frame: pl.DataFrame) -> tuple[list[str], list[int]]:
    models = sorted(frame["model"].unique().to_list())
    return models, frame["model"].cast(pl.Enum(models)).to_physical().to_list()


def check(frame: pl.DataFrame) -> None:
    models, codes = trace_models(frame)
    assert (models, codes.to_physical().to_list()) == two_pass(frame)
    assert codes.dtype == pl.Enum(models)


@settings(max_examples=60, deadline=None)
@given(head=st.lists(st.sampled_from("abcde"), min_size=1, max_size=30),
       tail=st.lists(st.sampled_from("abcdefg"), max_size=30), late=st.integers(0, 2))
def test_one_pass_equals_the_distinct_models_then_the_cast(head, tail, late):
    # ``late``: how many probe-sized runs of the head's first model come before the rest, so models named only
    # after the probed rows (f, g; or the head's others) are met past MODEL_PROBE_ROWS
    rows = [head[0]] * (late * MODEL_PROBE_ROWS) + head + tail
    check(pl.DataFrame({"model": rows}))


def test_a_model_first_named_after_the_probed_rows_is_in_the_index():
    rows = ["resnet"] * MODEL_PROBE_ROWS + ["bert", "resnet", "alexnet"]
    models, codes = trace_models(pl.DataFrame({"model": rows}))
    assert models == ["alexnet", "bert", "resnet"]
    assert codes.to_physical().to_list()[-3:] == [1, 2, 0]
    assert set(codes.to_physical().to_list()[:MODEL_PROBE_ROWS]) == {2}


def test_an_empty_trace_has_no_models():
    models, codes = trace_models(pl.DataFrame({"model": []}, schema={"model": pl.String}))
    assert models == [] and codes.len() == 0
