"""Accordion Algorithm 1: the dropout predictor."""

from hypothesis import given, settings, strategies as st

from shepherd.core.accordion.predictor import HIGH, LOW, predict, update


def test_wait_is_latest_of_earliest_candidates():
    p = predict([5.0, 1.0, 3.0, 9.0], now=0.0, n_eps=2, processing=2.0, priority=LOW, window=10.0)
    assert p.candidates == (1, 2) and p.wait == 3.0 and p.finish == 5.0 and not p.drop
    assert update([5.0, 1.0, 3.0, 9.0], p) == [5.0, 5.0, 5.0, 9.0]


def test_low_dropped_high_kept_past_window():
    ep = [10.0, 10.0]
    assert predict(ep, 0.0, 1, 1.0, LOW, window=5.0).drop
    assert not predict(ep, 0.0, 1, 1.0, HIGH, window=5.0).drop
    assert not predict(ep, 0.0, 1, 1.0, LOW, window=11.0).drop


def test_idle_eps_wait_nothing():
    p = predict([0.0, 0.0], now=7.0, n_eps=2, processing=1.5, priority=LOW, window=1.0)
    assert p.wait == 0.0 and p.finish == 8.5 and p.drop


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=1, max_size=16), st.floats(0, 50), st.floats(0.1, 20), st.data())
def test_prediction_is_monotone_in_load(ep, now, proc, data):
    n = data.draw(st.integers(1, len(ep)))
    p = predict(ep, now, n, proc, LOW, 30.0)
    later = update(ep, p)
    q = predict(later, now, n, proc, LOW, 30.0)
    assert q.finish >= p.finish  # accumulating projections never shortens the next wait
    assert p.finish - now >= proc * (1 - 1e-12)
