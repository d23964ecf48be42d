"""Fig. 14's "not overloaded" capacity (Symphony §5.6 with Eqs. 2–3)."""

from hypothesis import given, settings, strategies as st

from shepherd.core import batch_analytics as ba
from shepherd.experiments.symphony.fig14_autoscale import capacity_rps


def test_one_model_capacity_is_eq3_throughput_at_the_eq2_batch():
    lin = ba.Linear(1.053, 5.072)
    b = ba.staggered_batch(lin, 25.0, 8)
    assert abs(capacity_rps([(1.053, 5.072)], [25.0], [1.0], 8) - ba.throughput_rps(lin, b, 8)) < 1e-6


@settings(max_examples=30, deadline=None)
@given(gpus=st.integers(1, 64), extra=st.integers(1, 64),
       means=st.lists(st.floats(1.0, 1000.0), min_size=1, max_size=5))
def test_capacity_grows_with_gpus_and_is_zero_without(gpus, extra, means):
    ab = [(1.0 + i, 5.0) for i in range(len(means))]
    slos = [60.0] * len(means)
    assert capacity_rps(ab, slos, means, 0) == 0.0
    assert 0 < capacity_rps(ab, slos, means, gpus) <= capacity_rps(ab, slos, means, gpus + extra)
