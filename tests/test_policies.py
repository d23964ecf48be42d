"""Policy logic against hand-computed cases: Flex batch generation and preemption,
Clockwork's batch choice, Nexus's batch-size rule, the registry."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.core.engine import EngineConfig, OverheadConfig, simulate
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.policies.queues import DeadlineQueues
from shepherd.core.profiles import load_builtin
from shepherd.solvers.demand import sustainable_batch
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")
NO_OVERHEAD = OverheadConfig(mode="none")
LAT10 = [10 * b for b in range(129)]  # ℓ(b) = 10·b µs


def queue_with(deadlines, m=0):
    q = DeadlineQueues(1)
    for i, d in enumerate(deadlines):
        q.push(m, d, i)
    return q


# --------------------------------------------------------------------------- batch generation

def test_largest_feasible_skips_requests_too_tight_for_the_batch():
    # now = 0, ℓ(b) = 10b: b=3 needs 3 deadlines ≥ 30 (30, 35, 40); b=4 needs 4 ≥ 40 (only 1)
    q = queue_with([5, 25, 30, 35, 40])
    b, i0 = q.largest_feasible(0, 0, LAT10, 128)
    assert (b, i0) == (3, 2)
    assert q.take(0, i0, b) == [2, 3, 4]
    assert q.r[0][q.h[0]:] == [0, 1]  # the tighter ones stay for a smaller batch


def test_expired_requests_are_removed_lazily():
    q = queue_with([5, 9, 10, 50])
    assert q.expire(0, 10) == [0, 1]  # deadline < now + ℓ(1) = 10
    assert q.length(0) == 2
    assert q.largest_feasible(0, 0, LAT10, 128) == (1, q.h[0])  # 10 < 0 + ℓ(2): only a batch of one


def test_deadline_ties_are_fifo_and_reentries_go_after_equal_deadlines():
    q = queue_with([100, 100, 100])
    q.push(0, 100, 99)  # a re-entered request with an equal deadline
    q.push(0, 50, 77)  # an earlier deadline goes to the front
    assert q.r[0][q.h[0]:] == [77, 0, 1, 2, 99]


def test_max_batch_caps_the_batch():
    q = queue_with([10**9] * 300)
    b, i0 = q.largest_feasible(0, 0, LAT10, 128)
    assert b == 128 and i0 == 0
    assert q.largest_feasible(0, 0, LAT10, 7)[0] == 7


def test_nothing_feasible_gives_an_empty_batch():
    q = queue_with([3, 4])
    assert q.largest_feasible(0, 0, LAT10, 128)[0] == 0


def test_flex_picks_the_largest_feasible_batch_across_models():
    """Worker busy with a long batch; when it frees, the model with more feasible requests wins."""
    l_rs = 78_570  # ResNeSt269 ℓ(1)
    blocker = np.array([0], dtype=np.int64)
    a = np.full(5, 1_000, dtype=np.int64)  # 5 × ResNet18
    b = np.full(9, 2_000, dtype=np.int64)  # 9 × ResNet50
    trace = assemble([blocker, a, b], ["ResNeSt269", "ResNet18", "ResNet50"], [200_000, 200_000, 200_000])
    res = simulate(trace, PROF, "flex-np", gpus=1, overhead=NO_OVERHEAD)
    bt = res.batches_frame().sort("start_us")
    assert bt["model"].to_list() == ["ResNeSt269", "ResNet50", "ResNet18"]
    assert bt["size"].to_list() == [1, 9, 5]
    assert bt["start_us"][1] == l_rs


def test_flex_breaks_equal_sizes_by_earliest_deadline():
    blocker = np.array([0], dtype=np.int64)
    a = np.full(4, 1_000, dtype=np.int64)
    b = np.full(4, 2_000, dtype=np.int64)
    # stream of ResNet50 has the tighter SLO, so its batch goes first despite arriving later
    trace = assemble([blocker, a, b], ["ResNeSt269", "ResNet18", "ResNet50"], [200_000, 300_000, 150_000])
    res = simulate(trace, PROF, "flex-np", gpus=1, overhead=NO_OVERHEAD)
    assert res.batches_frame().sort("start_us")["model"].to_list() == ["ResNeSt269", "ResNet50", "ResNet18"]


# --------------------------------------------------------------------------- preemption

def preemption_trace(n_small: int, running: int = 1):
    """A ResNeSt269 batch of ``running`` requests is on the GPU when ``n_small`` ResNet18 requests arrive.

    running = 1: one ResNeSt269 request at t=0, the small ones at t=1 ms. running = k > 1: one
    ResNeSt269 at t=0 (batch of 1 until 78.57 ms), k more at 0.5 ms (k < λ: no preemption) which
    start together at 78.57 ms; the small ones arrive at 80 ms.
    """
    slo = 1_000_000
    if running == 1:
        return assemble([np.zeros(1, np.int64), np.full(n_small, 1_000, np.int64)],
                        ["ResNeSt269", "ResNet18"], [slo, slo])
    big = np.concatenate([[0], np.full(running, 500)]).astype(np.int64)
    return assemble([big, np.full(n_small, 80_000, np.int64)], ["ResNeSt269", "ResNet18"], [slo, slo])


@pytest.mark.parametrize("running, below, at", [(1, 3, 4), (2, 6, 7), (3, 9, 10)])
def test_preemption_happens_exactly_when_candidate_reaches_lambda_times_running(running, below, at):
    """Alg. 1 line 16: preempt when |B_g| ≥ λ·|B_c| (λ = 3.03: 1 → 4, 2 → 7, 3 → 10)."""
    res = simulate(preemption_trace(below, running), PROF, "flex", gpus=1, overhead=NO_OVERHEAD)
    assert not res.batches_frame()["preempted"].any()
    res = simulate(preemption_trace(at, running), PROF, "flex", gpus=1, overhead=NO_OVERHEAD)
    bt = res.batches_frame().sort("batch_id")
    victim = 0 if running == 1 else 1
    assert bt["preempted"].to_list()[victim] is True and bt["size"][victim] == running
    assert bt["model"][victim + 1] == "ResNet18" and bt["size"][victim + 1] == at


def test_preemption_stops_at_the_next_exit_point_and_requeues_the_victims():
    res = simulate(preemption_trace(4), PROF, "flex", gpus=1, overhead=NO_OVERHEAD)
    bt = res.batches_frame().sort("batch_id")
    span = 78_570  # ResNeSt269 ℓ(1), 128 exit points (Table 4) every span/129
    exits = [k * span // 129 for k in range(1, 129)]
    stop = min(x for x in exits if x >= 1_000)
    assert bt["end_us"][0] == stop
    assert bt["start_us"][1] == stop  # the new batch starts when the old one reaches its exit point
    assert res.workers_frame()["wasted_us"][0] == stop
    req = res.requests_frame()
    victim = req.filter(pl.col("model") == "ResNeSt269")
    assert victim["preemptions"][0] == 1
    assert victim["outcome"][0] == "served"  # re-entered, still met its 500 ms deadline


def test_flex_np_and_lambda_option_disable_or_tune_preemption():
    res = simulate(preemption_trace(50), PROF, "flex-np", gpus=1, overhead=NO_OVERHEAD)
    assert not res.batches_frame()["preempted"].any()
    res = simulate(preemption_trace(5), PROF, "flex", {"lam": 6.0}, gpus=1, overhead=NO_OVERHEAD)
    assert not res.batches_frame()["preempted"].any()


@pytest.mark.parametrize("lam", [1.0, 1.0 + 1e-12, 0.5, float("inf"), float("nan")])
def test_lambda_that_cannot_end_a_preemption_cascade_is_rejected(lam):
    """λ ∈ (1, ∞) (Shepherd App. B). With λ = 1 a batch of one preempts a batch of one, whose victim then
    preempts it back, forever (``preemption_trace(1)`` never finished on the reference engine)."""
    with pytest.raises(UserError, match="λ must be a finite number > 1"):
        registry.make_config("flex", {"lam": lam}).validate()


def test_lambda_just_above_one_ends_its_cascades():
    """Just above 1, λ still makes every preemption grow the running batch (1 → 2 here), so the victim
    cannot preempt back and the run ends."""
    res = simulate(preemption_trace(2), PROF, "flex", {"lam": 1.0000001}, gpus=1, overhead=NO_OVERHEAD)
    bt = res.batches_frame().sort("batch_id")
    assert bt["preempted"].to_list() == [True, False, False] and bt["size"].to_list() == [1, 2, 1]


def test_cli_lambda_one_is_one_error_line(cli, tmp_path):
    write_artifact(preemption_trace(1), tmp_path / "t.parquet", "trace", make_provenance())
    r = cli("simulate", "--policy", "flex", "--trace", tmp_path / "t.parquet", "--gpus", "1", "--set", "lam=1",
            "-o", tmp_path / "out")
    assert_user_error(r, "λ must be a finite number > 1")
    assert not (tmp_path / "out").exists()


def test_victims_that_can_no_longer_meet_their_deadline_are_dropped():
    big = np.zeros(1, dtype=np.int64)
    small = np.full(4, 1_000, dtype=np.int64)
    trace = assemble([big, small], ["ResNeSt269", "ResNet18"], [80_000, 500_000])  # 80 ms < stop + 78.57 ms
    res = simulate(trace, PROF, "flex", gpus=1, overhead=NO_OVERHEAD)
    victim = res.requests_frame().filter(pl.col("model") == "ResNeSt269")
    assert victim["outcome"][0] == "dropped" and victim["preemptions"][0] == 1


# --------------------------------------------------------------------------- clockwork, nexus

def test_clockwork_sizes_the_batch_for_the_most_urgent_request():
    blocker = np.array([0], dtype=np.int64)
    reqs = np.full(100, 1_000, dtype=np.int64)
    slo = 100_000  # at t = ℓ_RS269(1) = 78.57 ms the head (deadline 101 ms) has 22.43 ms: 0.22b + 3.74 ≤ 22.43 → b = 84
    trace = assemble([blocker, reqs], ["ResNeSt269", "ResNet18"], [500_000, slo])
    # admission off: this checks the batch choice alone (with it, the controller admits
    # only the ~25 requests it predicts it can serve one by one)
    res = simulate(trace, PROF, "clockwork", {"admission": "none"}, gpus=1, overhead=NO_OVERHEAD)
    bt = res.batches_frame().sort("start_us")
    assert bt["size"].to_list()[:2] == [1, 84]


def test_nexus_batch_rule_two_latencies_fit_the_slo():
    lat = np.array([0] + [int(round((0.75 * b + 7.96) * 1000)) for b in range(1, 129)])  # ResNet50
    for slo_ms in (20, 50, 100, 250):
        b = sustainable_batch(lat, slo_ms * 1000)
        assert 2 * lat[b] <= slo_ms * 1000
        assert b == 128 or 2 * lat[b + 1] > slo_ms * 1000
    # 2·ℓ(1) > SLO ≥ ℓ(1): a batch of one; below ℓ(1): unservable
    assert sustainable_batch(lat, 10_000) == 1
    assert sustainable_batch(lat, 5_000) == 0


def test_nexus_provisions_dedicated_gpus_at_the_eq1_batch():
    rate_per_ms = 2  # 2000 req/s of ResNet50, SLO 50 ms: b = 22 (2·(0.75·22+7.96) = 48.9 ≤ 50 < 2·ℓ(23)),
    # one GPU serves 22/24.46 ms = 899 req/s → 2 dedicated GPUs + a shared one for the residual
    a = np.arange(0, 3_000_000, 1000 // rate_per_ms, dtype=np.int64)
    trace = assemble([a], ["ResNet50"], [50_000])
    res = simulate(trace, PROF, "nexus", gpus=4, overhead=NO_OVERHEAD, engine=EngineConfig(path="reference"))
    pol = res.engine.policies[0]  # the policy object: the reference engine's
    lat = np.array([0] + [int(round((0.75 * b + 7.96) * 1000)) for b in range(1, 129)])
    expected = sustainable_batch(lat, 50_000)
    assert expected == 22
    batches = [slots[0][1] for slots in pol.slots if slots]
    assert batches.count(expected) == 2 and all(b <= expected for b in batches)
    assert res.batches_frame()["size"].max() <= expected


def test_nexus_drops_streams_it_did_not_provision_and_never_preempts():
    a = np.arange(0, 2_000_000, 100, dtype=np.int64)  # 10 k req/s of ResNet152 on one GPU: overload
    trace = assemble([a], ["ResNet152"], [100_000])
    res = simulate(trace, PROF, "nexus", gpus=1)
    s = res.summary_frame()
    assert s["dropped"][0] > 0 and s["preemptions"][0] == 0
    assert s["good"][0] > 0


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.sampled_from([1, 3]), st.sampled_from([0.4, 2.0]))
def test_nexus_run_admission_agrees_with_the_per_request_path(seed, gpus, frontends, epoch_s):
    """Vectorised admission of a run of arrivals (coins drawn at once, runs cut where a dispatch
    lowers ``until``) gives the same outcomes as ``on_arrival`` per request, overloaded or not."""
    from shepherd.core.policies import nexus

    rng = np.random.default_rng(seed)
    models = ["ResNet50", "BERT", "ResNet152"]
    per_stream = [np.sort(rng.integers(0, 3_000_000, int(rng.integers(50, 6_000)))) for _ in range(5)]
    trace = assemble(per_stream, [models[i % 3] for i in range(5)], [int(rng.choice([100_000, 250_000]))] * 5)
    frames = []
    for threshold in (1, 10**9):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(nexus, "VECTOR_MIN_RUN", threshold)
            res = simulate(trace, PROF, "nexus", {"frontends": frontends, "epoch_s": epoch_s,
                                                  "peak_window_s": 0.2}, gpus=gpus, seed=seed % 7,
                           engine=EngineConfig(path="reference"))  # the reference policy's two paths
        frames.append(res.requests_frame())
    assert frames[0].equals(frames[1])


# --------------------------------------------------------------------------- registry

def test_registry_lists_the_four_policies_and_rejects_unknown_names():
    assert {"flex", "flex-np", "clockwork", "nexus"} <= set(registry.names())
    with pytest.raises(UserError, match="unknown policy 'fifo'"):
        registry.get("fifo")
    with pytest.raises(UserError, match="no option 'lambda'"):
        registry.make_config("flex", {"lambda": 2})
    assert registry.make_config("flex-np", None).preemption is False


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5_000_000), st.sampled_from([0, 3, 7, 2_000_000_000, -5])),
                min_size=1, max_size=300),
       st.sampled_from([(1_000_000, 250_000), (2_000_000, 2_000_000), (700_000, 100_000)]))
def test_nexus_epoch_peaks_match_a_group_by_reference(points, sizes):
    """Peak rate per (epoch, stream) = max count over windows inside the epoch × windows per second."""
    from shepherd.core.policies.nexus import epoch_peaks

    epoch_us, window_us = sizes
    points.sort()
    t = np.array([p[0] for p in points], dtype=np.int64)
    s = np.array([p[1] for p in points], dtype=np.int64)
    ref: dict = {}
    counts = pl.DataFrame({"e": (t // window_us) * window_us // epoch_us, "w": t // window_us, "s": s}) \
        .group_by("e", "w", "s").len().group_by("e", "s").agg(pl.col("len").max())
    for e, stream, n in counts.iter_rows():
        ref.setdefault(e, {})[stream] = n * 1e6 / window_us
    assert epoch_peaks(t, s, epoch_us, window_us) == ref


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=300), st.booleans())
def test_nexus_stream_info_counts_small_ids_as_unique_sorts_them(streams, big):
    """The counted path of ``stream_info`` (small non-negative ids) gives ``np.unique``'s arrays: sorted ids,
    each request's index into them, each stream's first request (its model and SLO)."""
    from shepherd.core.policies.nexus import DENSE_STREAM_IDS, stream_info

    stream = np.array(streams, np.int64) + (DENSE_STREAM_IDS if big else 0)  # big: np.unique's own path
    n = len(stream)
    arrival = np.arange(n, dtype=np.int64) * 10
    model = np.arange(n, dtype=np.int64) % 7
    deadline = arrival + 1000 + np.arange(n, dtype=np.int64)
    sm, slo, ids, inverse = stream_info(arrival, deadline, model, stream)
    u, first, inv = np.unique(stream, return_index=True, return_inverse=True)
    assert np.array_equal(ids, u) and np.array_equal(inverse, inv.ravel())
    assert sm == {int(s): int(model[i]) for s, i in zip(u, first)}
    assert slo == {int(s): int(deadline[i] - arrival[i]) for s, i in zip(u, first)}
