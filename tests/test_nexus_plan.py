"""Nexus provisioning (Symphony §2.2 Eq. 1, Shepherd §7): batch rule, shares, capacity per epoch."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.profiles import latency_table_us, load_builtin
from shepherd.solvers.demand import single_gpu_goodput
from shepherd.solvers.nexus import plan_nexus

PROFILES = load_builtin("shepherd-v100")
MODELS = ["ResNet18", "ResNet50", "DenseNet121", "ResNeSt50"]


def _trace(seed: int, n_streams: int, rate: float, seconds: int, slo_ms: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(n_streams):
        k = rng.poisson(rate * seconds)
        arr = np.sort(rng.uniform(0, seconds * 1e6, k)).astype(np.int64)
        parts.append(pl.DataFrame({"arrival_us": arr, "stream": np.full(k, s, np.int32),
                                   "model": [MODELS[s % 4]] * k, "slo_us": np.full(k, slo_ms * 1000, np.int64)}))
    return pl.concat(parts).sort("arrival_us").with_columns(deadline_us=pl.col("arrival_us") + pl.col("slo_us"))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 8), st.floats(5, 400), st.sampled_from([60, 100, 250]))
def test_nexus_plan_invariants(seed, n_streams, rate, slo_ms):
    trace = _trace(seed, n_streams, rate, 4, slo_ms)
    if trace.height == 0:
        return
    frame, meta = plan_nexus(trace, PROFILES, 2.0, "V100")
    streams = frame.filter(pl.col("role") == "stream")
    # every stream that has requests in an epoch is fully routed there
    shares = streams.group_by("epoch", "name").agg(pl.col("share").sum())
    assert np.allclose(shares["share"].to_numpy(), 1.0)
    slo_us = slo_ms * 1000
    for (_epoch, _group), part in frame.group_by("epoch", "group"):
        workers = part.filter(pl.col("role") == "worker").height
        rows = part.filter(pl.col("role") == "stream").join(
            part.filter(pl.col("role") == "model").select(pl.col("name").alias("model")), how="cross")
        lats = []
        for name, batch in part.filter(pl.col("role") == "stream").select("name", "batch").iter_rows():
            model = MODELS[int(name) % 4]
            lat = latency_table_us(PROFILES, model)
            lats.append(int(lat[batch]))
            if workers > 1 or part.filter(pl.col("role") == "stream").height == 1 and batch == single_gpu_goodput(lat, slo_us)[0]:
                assert 2 * lat[batch] <= slo_us or batch == 1  # dedicated: Nexus batch rule
        assert workers >= 1 and rows.height >= 1
        if workers == 1 and len(lats) > 1:  # shared GPU: one cycle of all batches, then its own, fits the SLO
            assert sum(lats) + max(lats) <= slo_us
    assert meta["gpus_peak"] >= 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["ResNeSt269", "ResNet50", "BERT", "DenseNet121", "ResNet18"]),
                          st.floats(1.0, 3_000.0)), min_size=1, max_size=6),
       st.sampled_from([100_000, 250_000, 500_000]))
def test_every_planned_gpu_fits_its_duty_cycle(sessions, slo_us):
    """Nexus §6.1: a GPU runs its sessions' batches once per duty cycle, so Σ ℓ(b) ≤ duty on every
    allocation (a residual whose rounded-up batch over-fills the cycle gets a dedicated GPU)."""
    from shepherd.solvers.nexus import plan_epoch

    tables = {m: latency_table_us(PROFILES, m, None, 32) for m, _ in sessions}
    rows = [(i, m, slo_us, r) for i, (m, r) in enumerate(sessions) if 2 * tables[m][1] <= slo_us]
    if not rows:
        return
    frame = pl.DataFrame(rows, schema={"stream": pl.Int64, "model": pl.String, "slo_us": pl.Int64,
                                       "peak_rps": pl.Float64}, orient="row")
    for a in plan_epoch(frame, tables):
        assert sum(tables[m][b] for _, m, b, _ in a["streams"]) <= a["duty_us"] + 1e-6


# --------------------------------------------------------------------------- plan → simulate (issue 33 item 6)

def _split_plan(cli, tmp_path):
    """A 5 s Zipf trace whose Nexus plan splits BERT's stream over two GPUs (groups 1 and 3)."""
    trace, plan = tmp_path / "t.parquet", tmp_path / "p.parquet"
    assert cli("traces", "generate", "--rate", "3000", "--duration-s", "5", "--zipf", "1.0", "-o", trace).code == 0
    assert cli("plan", "--trace", trace, "--planner", "nexus", "--gpus", "8", "-o", plan).code == 0
    frame = pl.read_parquet(plan)
    split = frame.filter(pl.col("role") == "stream").group_by("name").agg(pl.col("group").n_unique())
    assert split["group"].max() > 1, "the workload no longer splits a stream: pick another"
    return trace, plan, frame


def test_nexus_plan_simulates_with_the_nexus_policy_on_both_engines(cli, tmp_path):
    """``plan --planner nexus`` → ``simulate --policy nexus`` on the same trace: the policy owns the split
    and runs on the plan's peak worker count, the same run as ``--gpus`` that count, on either engine."""
    trace, plan, frame = _split_plan(cli, tmp_path)
    peak = frame.filter(pl.col("role") == "worker").group_by("epoch").len()["len"].max()
    summaries = []
    for name, args in [("ref", ["--plan", plan, "--engine", "reference"]), ("auto", ["--plan", plan]),
                       ("gpus", ["--gpus", str(peak)])]:
        r = cli("simulate", "--trace", trace, "--policy", "nexus", *args, "-o", tmp_path / name)
        assert r.code == 0, r.err
        summaries.append(pl.read_parquet(tmp_path / name / "summary.parquet").select("requests", "good", "dropped"))
    assert summaries[0].equals(summaries[1]) and summaries[0].equals(summaries[2])
    assert summaries[0]["good"][0] > 0


def test_a_split_nexus_plan_is_refused_by_other_policies_in_one_line(cli, tmp_path):
    from conftest import assert_user_error

    trace, plan, _ = _split_plan(cli, tmp_path)
    out = tmp_path / "flex"
    assert_user_error(cli("simulate", "--trace", trace, "--policy", "flex", "--plan", plan, "-o", out),
                      "splits stream", "--policy nexus", "--planner herd")
    assert not out.exists()
