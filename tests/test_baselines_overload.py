"""Nexus and Clockwork under overload (Shepherd §7.1): Nexus plans for the highest load it can fully
satisfy, drops the excess at admission, keeps its goodput flat as the load grows,
and merges streams of one model and SLO into one session (Nexus §6.1)."""

from __future__ import annotations

import numpy as np
import pytest

from shepherd.core.engine import EngineConfig, OverheadConfig, simulate
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")
NO_OVERHEAD = OverheadConfig(mode="none")
#: the tests that read the policy object's plan run on the reference engine (the fast path keeps none)
REFERENCE = EngineConfig(path="reference")


def _poisson(rate_per_s: float, seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = rng.poisson(rate_per_s * seconds)
    return np.sort(rng.integers(0, int(seconds * 1e6), n)).astype(np.int64)


def _run(rate: float, streams: int = 1):
    arr = [_poisson(rate / streams, 3.0, s) for s in range(streams)]
    trace = assemble(arr, ["ResNet50"] * streams, [100_000] * streams)
    res = simulate(trace, PROF, "nexus", gpus=2, overhead=NO_OVERHEAD, seed=1, engine=REFERENCE)
    return res.summary_frame().row(0, named=True), res.engine.policies[0]


def test_nexus_goodput_is_flat_under_overload_and_the_excess_is_dropped():
    # two GPUs of ResNet50 at a 100 ms SLO serve ≈ 2 × 52/47 ms ≈ 2.2k req/s
    low, _ = _run(8_000)
    high, pol = _run(24_000)
    assert pol.plans[0]["scale"] < 0.2  # planned for a fraction of the offered load
    assert high["goodput_rps"] > 0.85 * low["goodput_rps"]  # flat, not collapsing
    assert high["goodput_rps"] < 1.15 * low["goodput_rps"]
    assert high["slo_attainment"] < 0.2  # the excess is dropped at admission


def test_nexus_plans_one_session_per_model_and_slo():
    _, pol = _run(1_000, streams=50)
    assert len(pol.stream_model) == 1  # 50 streams of one model and SLO: one session
    assert sum(1 for slots in pol.slots if slots) <= 2


def test_clockwork_levels_off_under_overload_instead_of_collapsing():
    """Predictive admission (Clockwork §5): goodput at 4× the load stays near the 2× level."""
    def run(rate):
        a = _poisson(rate, 2.0, 7)
        trace = assemble([a], ["ResNet50"], [100_000])
        return simulate(trace, PROF, "clockwork", {"admission": "predictive"}, gpus=2,
                        seed=1).summary_frame()["goodput_rps"][0]

    def run_no_admission(rate):
        a = _poisson(rate, 2.0, 7)
        trace = assemble([a], ["ResNet50"], [100_000])
        return simulate(trace, PROF, "clockwork", {"admission": "none"}, gpus=2,
                        seed=1).summary_frame()["goodput_rps"][0]

    mid, high = run(4_000), run(16_000)
    assert high > 0.8 * mid
    assert run_no_admission(16_000) < 0.8 * high  # without it EDF collapses under overload


def test_nexus_plans_for_the_peaks_of_the_traffic_it_admits():
    """Under overload the plan's rate per session is the busiest window count of the requests
    whose admission coin is below the plan's factor s (a group-by reference), and the token
    bucket runs at that rate."""
    import polars as pl

    arr = [_poisson(12_000, 3.0, 4), _poisson(3_000, 3.0, 5)]
    trace = assemble(arr, ["ResNet50", "ResNet18"], [100_000, 100_000])
    res = simulate(trace, PROF, "nexus", {"peak_window_s": 0.1}, gpus=1, overhead=NO_OVERHEAD, seed=2,
                   engine=REFERENCE)
    pol = res.engine.policies[0]
    s = pol.plans[0]["scale"]
    assert 0 < s < 1
    arrival, _, _, stream = pol.act.arrivals()
    admitted = pl.DataFrame({"w": arrival // 100_000, "session": pol.session_lut[np.searchsorted(pol.stream_ids, stream)],
                             "coin": pol.coin[: len(arrival)]}).filter(pl.col("coin") < s)
    ref = admitted.group_by("session", "w").len().group_by("session").agg(pl.col("len").max() * 10.0)
    want = dict(ref.iter_rows())
    got = pol.planner.admitted_peaks(0, s)
    assert got == pytest.approx(want)


def test_nexus_utilization_does_not_climb_with_the_overload():
    """§7.1: Nexus's utilization stays low "even under high load". Planning for s × the applied
    peak let it climb (0.88 → 0.95 from 2× to 36× overload here): the applied traffic's peak/mean
    tends to 1 as it grows, the admitted traffic's does not. Averaged over 8 seeds: one run's
    utilization varies by ± 0.04 with its coins (the busiest admitted window sets the plan)."""
    def util(rate):
        trace = assemble([_poisson(rate, 3.0, 0)], ["ResNet50"], [100_000])
        runs = [simulate(trace, PROF, "nexus", {"peak_window_s": 0.1}, gpus=2, overhead=NO_OVERHEAD, seed=seed)
                for seed in range(1, 9)]
        return float(np.mean([r.summary_frame()["utilization"][0] for r in runs]))

    assert util(72_000) < util(4_000) + 0.03
