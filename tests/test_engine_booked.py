"""Reserved paths (``act.book_path``): engine-executed reservations, quiet events, and agreement
with the recorder's ``record`` mode — the engine seam PPipe's data plane runs on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.engine import LATE, SERVED, EngineConfig, OverheadConfig, simulate
from shepherd.core.pipelines.reservations import Reservations
from shepherd.core.policies import registry
from shepherd.core.policies.base import Policy
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")
N_WORKERS = 4


@dataclass(frozen=True)
class BookerConfig:
    mode: str = "book"  # book | notify | record (the recorder's record mode: EngineConfig)
    stages: int = 2
    durations: tuple[int, ...] = (700, 1300, 400)
    gap_us: int = 0  # every other path starts this much later (leaves gaps that later paths fill)


class Booker(Policy):
    """Reserves each request's path with :class:`Reservations` (earliest fit, gaps included) and books it.

    Its decisions depend on arrivals only, never on completions, so every execution mode and any
    quiet lag must give the same tables."""

    def __init__(self, ctx, config):
        super().__init__(ctx, config)
        self.res = Reservations(N_WORKERS, 0)
        self.k = 0
        self.completions: list[tuple[int, int]] = []

    def on_arrival(self, now, rid, model, deadline, stream):
        cfg = self.config
        self.k += 1
        t = now + (cfg.gap_us if self.k % 2 else 0)
        slots = []
        for j in range(cfg.stages):
            w = (rid + j) % N_WORKERS
            dur = cfg.durations[(rid + j) % len(cfg.durations)]
            t = self.res.earliest([w], t, dur)
            self.res.reserve(w, t, dur, now)
            slots.append((w, t, dur))
            t += dur
        self.act.book_path(model, [rid], slots, now, notify=cfg.mode == "notify")

    def on_completion(self, now, worker):
        self.completions.append((now, worker))


@pytest.fixture
def booker(monkeypatch):
    monkeypatch.setitem(registry.POLICIES, "booker", registry.PolicySpec("booker", Booker, BookerConfig, ""))


def run(trace, lag=20_000, **cfg):
    engine = EngineConfig(reserved="record" if cfg.get("mode") == "record" else "events", quiet_lag_us=lag)
    return simulate(trace, PROF, "booker", BookerConfig(**cfg), gpus=N_WORKERS, overhead=OverheadConfig(mode="none"),
                    engine=engine)


def tables(res):
    e = res.recorder
    return ([getattr(e, c).tolist() for c in ("r_outcome", "r_start", "r_finish", "r_worker", "r_batch")],
            res.batches_frame().drop("model").rows(), res.workers_frame()["busy_us"].to_list())


@given(st.lists(st.integers(0, 3_000), min_size=1, max_size=60), st.integers(1, 3), st.integers(0, 2_000),
       st.integers(0, 40_000), st.integers(2_000, 9_000))
@settings(max_examples=40, deadline=None)
def test_booked_quiet_notify_and_recorded_give_the_same_tables(gaps, stages, gap_us, lag, slo):
    arrivals = np.cumsum(np.array(gaps, dtype=np.int64))
    trace = assemble([arrivals], ["ResNet50"], [slo])
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.POLICIES, "booker", registry.PolicySpec("booker", Booker, BookerConfig, ""))
        ref = tables(run(trace, mode="record", stages=stages, gap_us=gap_us))
        assert (np.array(ref[0][0]) != 0).all()  # every request has an outcome
        # any lag: the same outcomes
        assert tables(run(trace, lag=lag, mode="book", stages=stages, gap_us=gap_us)) == ref
        assert tables(run(trace, lag=lag, mode="notify", stages=stages, gap_us=gap_us)) == ref


def test_booked_path_runs_at_its_reserved_times_and_notifies_in_time_order(booker):
    trace = assemble([np.array([0, 100, 5_000], dtype=np.int64)], ["ResNet50"], [3_000])
    res = run(trace, mode="notify", stages=2, gap_us=0)
    e = res.recorder
    # request 0: worker 0 [0, 700) then worker 1 [700, 2000); request 1: worker 1 after request 0's
    # stage ([2000, 3300)), then worker 2 [3300, 3700); request 2 starts at its arrival
    assert e.r_start.tolist() == [700, 3_300, 5_000 + 400]
    assert e.r_finish.tolist() == [2_000, 3_700, 5_000 + 400 + 700]
    assert e.r_outcome.tolist() == [SERVED, LATE, SERVED]
    pol = res.engine.policies[0]
    assert pol.completions == sorted(pol.completions)  # events in time order
    assert [w for _, w in pol.completions] == [0, 1, 1, 2, 2, 3]


def test_quiet_completions_are_invisible_to_the_policy(booker):
    trace = assemble([np.array([0, 100], dtype=np.int64)], ["ResNet50"], [10_000])
    res = run(trace, mode="book")
    assert res.engine.policies[0].completions == []
    assert (res.recorder.r_outcome == SERVED).all()


class Clash(Booker):
    """Books two overlapping batches on worker 0 (a broken reservation)."""

    def on_arrival(self, now, rid, model, deadline, stream):
        self.act.book_path(model, [rid], [(0, now + 10, 1_000)], now)


class Past(Booker):
    def on_arrival(self, now, rid, model, deadline, stream):
        self.act.book_path(model, [rid], [(0, now - 1, 1_000)], now)


@pytest.mark.parametrize("cls, match", [(Clash, "overlaps"), (Past, "cannot book")])
def test_the_engine_refuses_a_double_booking_and_a_booking_in_the_past(monkeypatch, cls, match):
    monkeypatch.setitem(registry.POLICIES, "booker", registry.PolicySpec("booker", cls, BookerConfig, ""))
    trace = assemble([np.array([0, 500], dtype=np.int64)], ["ResNet50"], [10_000])
    with pytest.raises(RuntimeError, match=match):
        run(trace)


def test_a_started_batch_across_a_booked_one_is_detected(monkeypatch):
    class Mixed(Booker):
        def on_arrival(self, now, rid, model, deadline, stream):
            if rid == 0:
                self.act.book_path(model, [rid], [(0, 1_000, 1_000)], now)
            else:
                self.act.start(0, model, [rid], now, duration_us=5_000)

    monkeypatch.setitem(registry.POLICIES, "booker", registry.PolicySpec("booker", Mixed, BookerConfig, ""))
    trace = assemble([np.array([0, 10], dtype=np.int64)], ["ResNet50"], [10_000])
    with pytest.raises(RuntimeError, match="overlaps"):
        run(trace)
