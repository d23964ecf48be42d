"""Symphony (issue 14 part A): analytics, the scheduler's invariants, goodput, bad input."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.cli.app import main
from shepherd.core import batch_analytics as ba
from shepherd.core.artifacts import write_artifact
from shepherd.core.engine import simulate
from shepherd.core.errors import UserError
from shepherd.core.policies.queues import DeadlineQueues
from shepherd.core.policies.symphony import Symphony, SymphonyConfig
from shepherd.experiments.symphony import common as c
from shepherd.traces.arrivals import gamma
from shepherd.traces.synthetic import assemble

RESNET = ba.Linear(1.053, 5.072)
IRV2 = ba.Linear(5.090, 18.368)


# --------------------------------------------------------------------------- Table 4 analytics

def test_table4_analytic_batch_sizes_and_throughputs():
    r, i = ba.ideal(RESNET, 25, 8), ba.ideal(IRV2, 70, 8)
    assert (r.uncoordinated_batch, r.staggered_batch) == (7, 16)
    assert (i.uncoordinated_batch, i.staggered_batch) == (3, 8)
    assert [round(x) for x in (r.uncoordinated_rps, r.staggered_rps)] == [4501, 5839]
    assert [round(x) for x in (i.uncoordinated_rps, i.staggered_rps)] == [713, 1083]


@given(st.floats(0.2, 6), st.floats(0.5, 30), st.floats(1.0, 6.0), st.floats(1, 50_000))
def test_gpus_needed_is_the_smallest_sufficient_n(alpha, beta, slack, rate):
    lin = ba.Linear(alpha, beta)
    slo = slack * (alpha + beta) * 2
    n = ba.gpus_needed(lin, slo, rate)
    assert ba.throughput_rps(lin, ba.staggered_batch(lin, slo, n), n) >= rate
    if n > 1:
        assert ba.throughput_rps(lin, ba.staggered_batch(lin, slo, n - 1), n - 1) < rate


# --------------------------------------------------------------------------- the scheduler

@st.composite
def workloads(draw):
    n = draw(st.integers(1, 3))
    models = [f"m{i}" for i in range(n)]
    ab = [(draw(st.floats(0.2, 3.0)), draw(st.floats(0.5, 12.0))) for _ in models]
    slo = [int(1000 * (a + b) * draw(st.floats(1.05, 6.0))) for a, b in ab]
    rates = [draw(st.floats(50, 3000)) for _ in models]
    cv = draw(st.sampled_from([0.5, 1.0, 3.0]))
    gpus = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 1000))
    rng = np.random.default_rng(seed)
    trace = assemble([gamma(rng, r, cv, 300_000) for r in rates], models, slo)
    return trace, c.linear_profiles([(m, a, b) for m, (a, b) in zip(models, ab)]), gpus


@settings(max_examples=25)
@given(workloads(), st.sampled_from(["symphony", "symphony-wc"]), st.sampled_from(["window", "clipper"]),
       st.sampled_from(["schedulable", "all"]))
def test_symphony_never_dispatches_a_batch_that_misses_a_deadline(wl, policy, prune, rank):
    trace, prof, gpus = wl
    res = simulate(trace, prof, policy, {"prune": prune, "rank": rank}, gpus=gpus, max_batch=c.MAX_BATCH)
    rq = res.requests_frame()
    assert (rq["outcome"] == "late").sum() == 0
    served = rq.filter(pl.col("outcome") == "served")
    assert (served["finish_us"] <= served["deadline_us"]).all()
    stats = res.extra["policy_stats"]
    # a cancelled candidate timer never fires
    assert stats["stale_timer_fired"] == 0


def test_cancelled_candidate_timers_never_fire_and_some_are_cancelled():
    wl = c.workload(["a", "b"], 30.0, duration_s=1.0)
    res = c.run("symphony", wl.trace(1500, 1), c.linear_profiles([("a", 1.0, 8.0), ("b", 0.5, 3.0)]), 2)
    stats = res.extra["policy_stats"]
    assert stats["timers_cancelled"] > 20
    assert stats["stale_timer_fired"] == 0


def _stub(lat_row, maxb, prune):
    """A Symphony instance over a stub Actions: one model, one hardware."""
    dropped = []
    act = SimpleNamespace(models=["m"], max_batch=maxb, workers=[0], hardware=[0], lat=[[lat_row]],
                          runtime=SimpleNamespace(hardware=["hw"]),
                          drop=lambda rids, now: dropped.extend(rids), set_timer=lambda at, p: None,
                          cancel_timer=lambda t: None)
    return Symphony(act, SymphonyConfig(prune=prune)), dropped


@given(st.lists(st.integers(0, 20_000), min_size=1, max_size=40), st.integers(0, 5_000), st.integers(0, 3_000),
       st.floats(100, 2_000), st.floats(200, 8_000), st.sampled_from(["clipper", "window"]))
def test_pruning_keeps_the_earliest_deadline_feasible_subset(deadlines, now, wait, alpha, beta, prune):
    maxb = 16
    lat = [0] + [int(alpha * b + beta) for b in range(1, maxb + 1)]
    pol, dropped = _stub(lat, maxb, prune)
    for rid, d in enumerate(sorted(deadlines)):
        pol.q.push(0, d, rid)
    g = now + wait
    cand = pol.candidate(0, now, g)
    ds = sorted(deadlines)
    alive = [d for d in ds if d >= g + lat[1]]  # can finish alone

    def fits(window):
        return len(window) <= maxb and all(d >= g + lat[len(window)] for d in window)

    if not alive:
        assert cand is None and len(dropped) == len(ds)
        return
    if prune == "clipper":
        best_b = max(b for b in range(1, len(alive) + 1) if fits(alive[:b]))
        assert len(dropped) == len(ds) - len(alive)
        assert cand.bs == best_b
    else:  # the largest feasible window of consecutive deadlines, the earliest such — if the head's is < ¾ of it
        best_b = max(b for i in range(len(alive)) for b in range(1, len(alive) - i + 1) if fits(alive[i:i + b]))
        first = min(i for i in range(len(alive)) if fits(alive[i:i + best_b]))
        head_b = max(b for b in range(1, len(alive) + 1) if fits(alive[:b]))
        if 4 * head_b >= 3 * best_b:
            best_b, first = head_b, 0
        assert cand.bs == best_b
        assert len(dropped) == len(ds) - len(alive) + first
    # the batch is the queue's earliest-deadline prefix and it is feasible
    q: DeadlineQueues = pol.q
    batch = q.d[0][q.h[0]:q.h[0] + cand.bs]
    assert batch == sorted(batch) and fits(batch)
    assert all(d <= batch[0] for d in ds[:len(dropped)])


def _two_model_stub(rank):
    """Symphony over a stub Actions with two models (α 1 ms, β 10 ms) and one idle GPU; records starts."""
    started, timers = [], []
    lat = [0] + [1000 * b + 10_000 for b in range(1, 17)]

    def set_timer(at, payload):
        timers.append(SimpleNamespace(at=at, payload=payload, cancelled=False))
        return timers[-1]

    act = SimpleNamespace(models=["a", "b"], max_batch=16, workers=[0], hardware=[0], lat=[[lat, lat]],
                          runtime=SimpleNamespace(hardware=["hw"]), drop=lambda rids, now: None,
                          set_timer=set_timer, cancel_timer=lambda t: setattr(t, "cancelled", True),
                          start=lambda w, m, rids, now, at=None: started.append((m, list(rids), at)))
    return Symphony(act, SymphonyConfig(rank=rank)), started, timers, lat


@pytest.mark.parametrize("rank", ["schedulable", "all"])
def test_rank_all_gives_a_freeing_gpu_the_urgent_candidate_only_when_one_is_schedulable(rank):
    now = 100_000
    pol, started, timers, lat = _two_model_stub(rank)
    # model a: one request, λ ≈ 1000/s so β·λ ≈ 10 > 1 — not schedulable until sched_at = dl − ℓ(2)
    pol.first_arrival[0] = now - 50_000
    pol.recent[0].extend(range(now - 50_000, now, 1000))
    pol.q.push(0, now + 40_000, 0)
    assert not pol._grant(0, now, range(2)) and not started  # nothing schedulable: the GPU waits (NWC)
    assert [t.at for t in timers if not t.cancelled] == [now + 40_000 - lat[2]]  # a timer at a's sched_at
    # model b: three requests at a low rate (β·λ < 1), later deadlines — schedulable at once
    pol.first_arrival[1] = now - 50_000
    for rid in (1, 2, 3):
        pol.q.push(1, now + 60_000, rid)
    assert pol._grant(0, now, range(2))
    # §4.3: the schedulable candidate goes; rank="all": the earliest sched_at goes, schedulable or not
    assert started[0][0] == (1 if rank == "schedulable" else 0)


@pytest.mark.parametrize("rank", ["schedulable", "all"])
def test_rank_all_ranks_every_model_when_a_request_arrives(rank):
    """Issue 31 item 1: an arrival that makes its model schedulable lets the idle GPU rank every candidate
    under ``rank="all"`` (not only the arriving model's)."""
    now = 100_000
    pol, started, timers, lat = _two_model_stub(rank)
    pol.first_arrival[0] = now - 50_000  # model a: a lone request, β·λ ≈ 10 — waiting for its sched_at
    pol.recent[0].extend(range(now - 50_000, now, 1000))
    pol.q.push(0, now + 40_000, 0)
    assert not pol._grant(0, now, range(2)) and not started
    pol.first_arrival[1] = now - 50_000  # model b: two requests queued, a third arrives (β·λ < 1)
    for rid in (1, 2):
        pol.q.push(1, now + 60_000, rid)
    pol.on_arrival(now + 10, 3, 1, now + 60_000, 0)
    assert len(started) == 1
    assert started[0][0] == (1 if rank == "schedulable" else 0)  # rank=all: a's earlier sched_at goes


def test_an_idle_gpu_takes_a_waiting_candidate_exactly_at_its_sched_at():
    # a lone request of a model whose β·λ > 1 waits on an idle GPU until sched_at = dl − ℓ(2), then runs
    lin = (1.0, 10.0)
    early = np.arange(0, 40_000, 2_000)  # 20 arrivals at 500/s: λ over the first 200 ms ≈ 105/s, β·λ ≈ 1.05
    trace = assemble([np.append(early, 200_000)], ["a"], [50_000])
    res = simulate(trace, c.linear_profiles([("a", *lin)]), "symphony", {}, gpus=1, max_batch=c.MAX_BATCH)
    rq = res.requests_frame().sort("arrival_us")
    last = rq.row(rq.height - 1, named=True)
    assert last["start_us"] == last["deadline_us"] - int(1000 * (2 * lin[0] + lin[1]))
    wc = simulate(trace, c.linear_profiles([("a", *lin)]), "symphony-wc", {}, gpus=1, max_batch=c.MAX_BATCH)
    rq = wc.requests_frame().sort("arrival_us")
    assert rq["start_us"][-1] == 200_000  # work-conserving: at once


# --------------------------------------------------------------------------- goodput (Table 4)

@pytest.mark.parametrize("name, lin, slo, paper", [("ResNet50", RESNET, 25, 5169),
                                                   ("InceptionResNetV2", IRV2, 70, 907)])
def test_table4_simulated_goodput(name, lin, slo, paper):
    prof = c.linear_profiles([(name, lin.alpha_ms, lin.beta_ms)])
    wl = c.workload([name], slo, duration_s=3.0)
    start = 0.9 * paper
    sym = c.goodput("symphony", wl, prof, 8, 0, start=start, rel_tol=0.02)
    assert abs(sym / paper - 1) <= 0.15
    assert sym > c.goodput("clockwork", wl, prof, 8, 0, start=start, rel_tol=0.02)
    assert sym > c.goodput("nexus", wl, prof, 8, 0, start=start, rel_tol=0.02)
    # below the analytic staggered ceiling (Eq. 2-3), above the uncoordinated one
    ideal = ba.ideal(lin, slo, 8)
    assert ideal.uncoordinated_rps < sym <= ideal.staggered_rps * 1.02


# --------------------------------------------------------------------------- bad input

def test_slo_below_alpha_plus_beta_is_one_line_exit_2(tmp_path, capsys):
    wl = c.workload(["a"], 3.0, duration_s=0.2)
    path = tmp_path / "t.parquet"
    write_artifact(wl.trace(100, 0), path, "trace")
    with pytest.raises(UserError, match="below"):
        simulate(pl.read_parquet(path), c.linear_profiles([("a", 1.0, 5.0)]), "symphony", gpus=2)
    with pytest.raises(UserError, match="below"):
        ba.ideal(ba.Linear(1.0, 5.0), 3.0, 8)
    with pytest.raises(UserError):
        ba.staggered_batch(RESNET, 25, 0)
    rc = main(["simulate", "--policy", "symphony", "--trace", str(path), "--gpus", "2",
               "--profiles", str(_profiles_file(tmp_path)), "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "below" in err


def test_zero_gpus_on_the_cli_is_one_line_exit_2(capsys):
    rc = main(["simulate", "--policy", "symphony", "--trace", "t.parquet", "--gpus", "0"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "--gpus" in err


def test_delays_book_ahead_and_still_never_late():
    names = [f"r{i}" for i in range(4)]
    wl = c.workload(names, 25.0, duration_s=0.5)
    prof = c.linear_profiles([(m, 2.0, 5.0) for m in names])
    for d in (20.0, 1000.0):
        res = c.run("symphony", wl.trace(1500, 0), prof, 4, d_ctrl_us=d, d_data_us=5.0)
        rq = res.requests_frame()
        assert (rq["outcome"] == "late").sum() == 0
        assert res.extra["policy_stats"]["booked_ahead"] > 0
        # every batch starts at least d_ctrl after its requests' last arrival (its inputs travel)
        b = rq.filter(pl.col("outcome") == "served").group_by("batch_id").agg(
            pl.col("arrival_us").max(), pl.col("start_us").first())
        assert (b["start_us"] - b["arrival_us"] >= d).all()


def test_zero_gpus_is_a_user_error():
    wl = c.workload(["a"], 30.0, duration_s=0.2)
    with pytest.raises(UserError, match="GPU|gpus"):
        simulate(wl.trace(100, 0), c.linear_profiles([("a", 1.0, 5.0)]), "symphony", gpus=0)
    with pytest.raises(UserError):
        ba.gpus_needed(RESNET, 3.0, 100)


def _profiles_file(tmp_path):
    path = tmp_path / "p.parquet"
    write_artifact(c.linear_profiles([("a", 1.0, 5.0)]), path, "profiles")
    return path


def test_analytic_throughput_is_math():
    assert math.isclose(ba.throughput_rps(RESNET, 16, 8), 8 * 16 / (1.053 * 16 + 5.072) * 1000)


# --------------------------------------------------------------------------- autoscaling (§4.4)

def test_autoscale_advice_formula():
    from shepherd.core.autoscale import AutoscaleConfig, advise
    assert advise(10, 0.2, 0.0) == math.ceil(10 * 0.2 / 0.8)  # +N·b/(1−b)
    assert advise(10, 0.0, 0.35) == -3  # −N·f
    assert advise(10, 0.005, 0.35) == -3  # below the bad-rate threshold: release
    assert advise(2, 0.0, 0.9, AutoscaleConfig(min_gpus=1)) == -1


def test_closed_loop_autoscaling_follows_the_load():
    from shepherd.core.autoscale import advice_frame
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 4, 16000))
    keep = rng.uniform(0, 1, len(t)) < (300 + 3700 * np.sin(np.pi * t / 4) ** 2) / 4000
    trace = assemble([(t[keep] * 1e6).astype(np.int64)], ["a"], [30000])
    res = c.run("symphony", trace, c.linear_profiles([("a", 1.0, 5.0)]), 2, autoscale_epoch_s=0.5)
    adv = advice_frame(res.windows(500_000), 500_000)
    gpus = adv["gpus"].to_list()
    peak = int(np.argmax(gpus))
    assert max(gpus) > 2 * gpus[0]  # it grew under the rising load …
    assert gpus[-2] < max(gpus)  # … and shrank after it
    # each epoch's GPUs follow the previous epoch's advice (within the epoch boundary rounding)
    assert all(abs(gpus[k + 1] - (gpus[k] + adv["advice"][k])) <= 1 for k in range(peak))


# --------------------------------------------------------------------------- Fig. 10 flat top (quick scale)

def test_fig10_flat_top_at_quick_scale():
    from shepherd.experiments.base import Scale
    from shepherd.experiments.symphony import fig10_flat_top as f10
    exp = f10.EXPERIMENT
    cells = [cell for cell in exp.cells(Scale(quick=True, seeds=1))
             if cell.params["system"] in ("symphony", "symphony-sa", "clockwork")]
    rows = pl.concat([exp.run_cell(cell.params) for cell in cells])
    m = {s: f10.flat_top(rows.filter(pl.col("system") == s)) for s in ("symphony", "symphony-sa", "clockwork")}
    # past saturation Symphony's goodput stays within 5 % of its peak, Clockwork's falls
    assert m["symphony"]["over_min_ratio"] >= 0.95
    assert m["symphony-sa"]["over_min_ratio"] >= 0.95
    assert m["clockwork"]["last_ratio"] < 0.9
    # below saturation the idle fraction tracks (p − o)/p (Appendix C's rule; §4.3's β·λ rule does not)
    assert m["symphony-sa"]["idle_gap_max"] <= 0.1
    assert m["clockwork"]["idle_gap_max"] > 0.1


def test_symphony_experiments_are_registered_with_small_quick_grids():
    from shepherd.experiments.base import Scale
    from shepherd.experiments.registry import resolve
    names = {e.name for e in resolve(["symphony"])}
    assert {"symphony-table2", "symphony-fig1", "symphony-fig4", "symphony-fig6", "symphony-fig7",
            "symphony-table4", "symphony-fig10", "symphony-fig11", "symphony-fig13", "symphony-fig14"} <= names
    # ≤ 180: issue 31 runs every Symphony rule side by side in Figs. 4, 10 and 14; issue 41 adds Clipper pruning as a
    # labelled variant of Figs. 10 and 14 (175 cells; the quick run took 6.5 min on two loaded cores)
    assert sum(len(e.cells(Scale(quick=True, seeds=1))) for e in resolve(["symphony"])) <= 180
    assert [e.name for e in resolve(["cross-symphony-shepherd"])] == ["cross-symphony-shepherd"]


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_rank_all_on_arrival_in_both_engines(path):
    """Issue 31 item 1, end to end in both engines: model a's lone request (β·λ ≈ 1.05 > 1) waits for its
    sched_at (238 ms) or its λ to fall; model b's first request arrives at 205 ms, schedulable at once (λ = 0). Under
    ``rank="all"`` that arrival lets the idle GPU rank every candidate: a's earlier sched_at goes at 205 ms."""
    from shepherd.core.engine import EngineConfig

    lin = (1.0, 10.0)
    a = np.append(np.arange(0, 40_000, 2_000), 200_000)
    trace = assemble([a, np.array([205_000])], ["a", "b"], [50_000, 50_000])
    prof = c.linear_profiles([("a", *lin), ("b", *lin)])
    starts = {}
    for rank in ("schedulable", "all"):
        res = simulate(trace, prof, "symphony", {"rank": rank}, gpus=1, max_batch=c.MAX_BATCH,
                       engine=EngineConfig(path=path))
        rq = res.requests_frame().filter(pl.col("arrival_us") >= 200_000).sort("arrival_us")
        starts[rank] = rq["start_us"].to_list()
    assert starts["all"] == [205_000, 205_000 + 11_000]  # a at b's arrival, then b when the GPU frees
    # §4.3: only b's model is looked at, b goes; a waits until the GPU frees at 216 ms, when its λ has fallen
    # to 21 / 0.216 s ≈ 97 r/s, β·λ ≈ 0.97 ≤ 1: schedulable
    assert starts["schedulable"] == [216_000, 205_000]
