"""The compiled fast path (core/engine/fast/): the reference engine's tables, identical, for the same inputs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.core.engine import EngineConfig, OverheadConfig, simulate
from shepherd.core.errors import UserError
from shepherd.core.profiles import load_builtin
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

pytest.importorskip("numba")
PROF = load_builtin("shepherd-v100")
MODELS = ["ResNet18", "ResNet50", "ResNet101", "DenseNet121", "ResNeSt269", "ResNet152"]


def workload(seed: int, n_streams: int, horizon_us: int, rate: float, ties: bool) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    arrs = [poisson(rng, rate * (0.3 + rng.random()), horizon_us) for _ in range(n_streams)]
    if ties:  # equal arrival times across and within streams
        arrs[0] = np.sort(np.concatenate([arrs[0], arrs[-1][::2], arrs[0][::5]]))
    slos = [int(x) for x in rng.choice([15_000, 40_000, 90_000, 250_000], n_streams)]
    return assemble(arrs, [MODELS[s % len(MODELS)] for s in range(n_streams)], slos)


def assert_same(a, b) -> None:
    for x, y in zip((a.requests_frame(), a.batches_frame(), a.workers_frame(), a.summary_frame()),
                    (b.requests_frame(), b.batches_frame(), b.workers_frame(), b.summary_frame())):
        assert x.equals(y)
    assert np.array_equal(np.sort(np.frombuffer(a.engine.admission.shed_ids, np.int64)),
                          np.sort(np.frombuffer(b.engine.admission.shed_ids, np.int64)))


OVERHEADS = [
    None,  # Clockwork's calibrated default (admission control on, bound 50 ms)
    OverheadConfig(mode="none"),
    OverheadConfig(base_us=40.0, per_worker_us=3.0, per_request_us=25.0, arrival_us=120.0, max_lag_us=3_000.0),
    OverheadConfig(base_us=5.0, per_request_us=10.0, arrival_us=0.0, max_lag_us=500.0),
    OverheadConfig(base_us=5.0, arrival_us=60.0, max_lag_us=float("inf")),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 5), streams=st.integers(1, 6),
       rate=st.sampled_from([200.0, 1500.0, 8000.0]), ties=st.booleans(), ovh=st.sampled_from(range(len(OVERHEADS))),
       chunk=st.sampled_from([1, 7, 64, 1 << 15]), max_batch=st.sampled_from([1, 8, 128]))
def test_fast_clockwork_equals_reference(seed, gpus, streams, rate, ties, ovh, chunk, max_batch):
    trace = workload(seed, streams, 120_000, rate, ties)
    kw = dict(gpus=gpus, seed=seed, overhead=OVERHEADS[ovh], max_batch=max_batch)
    ref = simulate(trace, PROF, "clockwork", engine=EngineConfig(chunk=chunk), **kw)
    fast = simulate(trace, PROF, "clockwork", engine=EngineConfig(chunk=chunk, path="fast"), **kw)
    assert_same(ref, fast)


SHEDDING = OverheadConfig(base_us=40.0, per_request_us=25.0, arrival_us=300.0, max_lag_us=3_000.0)


@pytest.mark.parametrize("ovh", [None, SHEDDING])
def test_fast_clockwork_equals_reference_on_100k_requests(ovh):
    """A fixed medium workload: 13 models on 12 GPUs served (default overhead), or overloaded and shedding."""
    rng = np.random.default_rng(18)
    models = ["ResNet18", "ResNet34", "ResNet50", "ResNet101", "ResNet152", "ResNeSt50", "ResNeSt101",
              "ResNeSt200", "ResNeSt269", "DenseNet121", "DenseNet161", "DenseNet169", "DenseNet201"]
    arrs = [poisson(rng, 300.0, 27_000_000) for _ in models]
    trace = assemble(arrs, models, [250_000] * len(models))
    assert trace.height >= 100_000
    ref = simulate(trace, PROF, "clockwork", gpus=12, overhead=ovh)
    fast = simulate(trace, PROF, "clockwork", gpus=12, overhead=ovh, engine=EngineConfig(path="fast"))
    assert_same(ref, fast)
    if ovh:
        assert ref.shed > 0  # admission control is exercised
    else:
        assert ref.good > 0.5 * trace.height


def test_fast_path_refuses_what_it_does_not_cover():
    trace = workload(1, 2, 50_000, 500.0, False)
    with pytest.raises(UserError, match="no fast path.*clockwork"):
        simulate(trace, PROF, "flex", gpus=2, engine=EngineConfig(path="fast"))
    with pytest.raises(UserError, match="covers"):
        simulate(trace, PROF, "clockwork", {"admission": "predictive"}, gpus=2, engine=EngineConfig(path="fast"))
    with pytest.raises(UserError, match="reference or fast"):
        EngineConfig(path="turbo").validate()


def test_cli_engine_fast(cli, tmp_path):
    write_artifact(workload(2, 3, 300_000, 1500.0, True), tmp_path / "t.parquet", "trace", make_provenance())
    outs = {}
    for eng in ("reference", "fast"):
        r = cli("simulate", "--policy", "clockwork", "--trace", tmp_path / "t.parquet", "--gpus", "3",
                "--engine", eng, "-o", tmp_path / eng)
        assert r.code == 0, r.err
        outs[eng] = {p.name: p.read_bytes() for p in sorted((tmp_path / eng).glob("*.parquet"))}
    assert len(outs["fast"]) == 4 and outs["fast"] == outs["reference"]
    assert_user_error(cli("simulate", "--policy", "flex", "--trace", tmp_path / "t.parquet", "--gpus", "3",
                          "--engine", "fast", "-o", tmp_path / "x"), "clockwork")
