"""Shepherd §7.2 / Fig. 11(a): the two-stream workload on one V100-profiled worker.

Paper: Flex beats Clockwork by 3.7× at 250 ms SLO and by 6.2× at 90 ms; Flex-NP
matches Flex at 250 ms and Clockwork at 90 ms. The four goodputs are printed
(run with ``-s`` to see them).
"""

from __future__ import annotations

import pytest

from shepherd.core.engine import simulate
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import two_stream

PROF = load_builtin("shepherd-v100")


@pytest.fixture(scope="module")
def goodputs():
    out = {}
    for slo in (250, 90):
        trace = two_stream(slo_ms=slo)
        for policy in ("flex", "flex-np", "clockwork"):
            out[policy, slo] = float(simulate(trace, PROF, policy, gpus=1).summary_frame()["goodput_rps"][0])
    print("\nFig. 11(a) goodput (req/s):", {f"{p}@{s}ms": round(g) for (p, s), g in out.items()})
    return out


def test_flex_beats_clockwork_3x_at_250ms(goodputs):
    assert goodputs["flex", 250] >= 3.0 * goodputs["clockwork", 250]


def test_flex_np_matches_flex_at_250ms(goodputs):
    assert goodputs["flex-np", 250] == pytest.approx(goodputs["flex", 250], rel=0.05)


def test_flex_np_matches_clockwork_at_90ms(goodputs):
    assert goodputs["flex-np", 90] == pytest.approx(goodputs["clockwork", 90], rel=0.25)


def test_preemption_is_what_wins_at_90ms(goodputs):
    assert goodputs["flex", 90] >= 2.0 * goodputs["flex-np", 90]
    assert goodputs["flex", 90] >= 2.0 * goodputs["clockwork", 90]


@pytest.mark.xfail(strict=True, reason=(
    "Not reproduced: at 90 ms Flex is capped by the GPU (≈358 ResNet18 requests per 120 ms burst "
    "fit before the deadline: ≈2.97 k req/s, 29.7 k requests in the 10 s run) and our Clockwork serves ≈154 per burst "
    "(one 79 ms ResNeSt269 batch, then 128+26 ResNet18), so the ratio is ≈2.2×, not ≥4×; see the issue note"))
def test_flex_beats_clockwork_4x_at_90ms(goodputs):
    assert goodputs["flex", 90] >= 4.0 * goodputs["clockwork", 90]
