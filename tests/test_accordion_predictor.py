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


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=1, max_size=12), st.floats(0, 50),
       st.lists(st.tuples(st.integers(1, 12), st.floats(0, 20)), max_size=8), st.integers(1, 12),
       st.floats(0.1, 20), st.floats(0, 60))
def test_a_drop_certain_midway_through_the_fold_is_certain_at_its_end(ep, now, queue, n_new, proc, window):
    """What the live predictor's early stop relies on (scheduler.live_ep_times): folding queued queries in with
    ``update`` only raises finish times, so a Low-priority arrival that would be dropped against an intermediate
    state is dropped against the final one too; and ties go to the lower index (the key (time, index))."""
    n_new = min(n_new, len(ep))
    state, dropped_midway = list(ep), False
    for n, p in queue:
        dropped_midway |= predict(state, now, n_new, proc, LOW, window).drop
        nxt = update(state, predict(state, now, min(n, len(state)), p, HIGH, 0.0))
        assert all(b >= a for a, b in zip(state, nxt))
        state = nxt
    if dropped_midway:
        assert predict(state, now, n_new, proc, LOW, window).drop
    cand = predict(state, now, n_new, proc, LOW, window).candidates
    assert list(cand) == sorted(range(len(state)), key=lambda i: (state[i], i))[:n_new]
