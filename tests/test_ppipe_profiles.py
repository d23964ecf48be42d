"""PPipe block profiles (the authors' data), §5.2 pre-partitioning, Table 1 clusters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shepherd.core.artifacts import read_artifact
from shepherd.core.errors import UserError
from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.cluster import make_cluster

from conftest import PPIPE_DATA, needs_ppipe, assert_user_error

DATA = PPIPE_DATA
needs_data = needs_ppipe


@needs_data
def test_real_data_units_slo_and_cut_sizes():
    p = blocks.read_model(DATA, "resnext152-32x4d_8xb32_in1k")
    # data README: SLO = 5 × mean L4 batch-1 compute = 21,288.7 µs
    assert abs(5 * p.ref_latency_us - 21288.7) < 1.0
    assert p.slo_us() == round(5 * p.ref_latency_us)
    assert p.blocks == 10 and p.cut_bytes[0] == 1_605_632
    # whole model on L4 at b=1 sums to 4,216 µs at k=1 and 10,400 at k=4 (README)
    assert p.whole_us("L4", 1, 1) == 4216 and p.whole_us("L4", 1, 4) == 10400
    raw = np.loadtxt(DATA / "models/block-timing-tf32/resnext152-32x4d_8xb32_in1k-T4-2.csv", delimiter=",")
    assert p.partition_us("T4", 2, 3, 2, 7) == int(np.maximum(np.rint(raw[2:7, 2]), 1).sum())
    assert p.max_batch("L4", 1) == 8 and p.max_batch("L4", 2) == 4 and p.max_batch("L4", 3) == 2
    assert p.levels("P4") == [1]


def test_transfer_formula_matches_readme_example():
    prof = blocks.BlockProfile("m", 2, {("L4", 1): np.ones((2, 8), np.int64)}, np.array([3_145_728]), 1000.0)
    assert abs(prof.transfer_us_per_sample(0, 6.0) - 4194.304) < 1e-6
    assert blocks.transfer_us(prof, 1, 3, 6.0) == math.ceil(3 * 4194.304)
    assert blocks.transfer_us(prof, 2, 3, 6.0) == 0  # after the last block: free
    with pytest.raises(UserError):
        prof.transfer_us_per_sample(0, 0.0)


@needs_data
def test_eighteen_models_and_frame_round_trip():
    profs = blocks.read_ppipe_dir(DATA)
    assert len(profs) == 18
    slos = sorted(p.slo_us() / 1000 for p in profs)
    assert abs(slos[0] - 23.4) < 0.05 and abs(slos[-1] - 165.6) < 0.05  # §7.1: 23.4 ms … 165.6 ms
    frame = blocks.to_frame(profs[:3])
    back = blocks.from_frame(frame)
    for p in profs[:3]:
        q = back[p.model]
        assert q.blocks == p.blocks and np.array_equal(q.cut_bytes, p.cut_bytes)
        assert set(q.lat) == set(p.lat) and all(np.array_equal(q.lat[k], p.lat[k]) for k in p.lat)
        assert q.slo_us() == p.slo_us()


@needs_data
def test_p4_slower_than_l4_at_batch_4():
    """§2 / Fig. 2: P4 is 3.0×–7.9× slower than L4 on the 18 DNNs."""
    ratios = [p.whole_us("P4", 4) / p.whole_us("L4", 4) for p in blocks.read_ppipe_dir(DATA)]
    assert min(ratios) > 2.0 and max(ratios) < 10.0


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=60), st.integers(1, 12))
def test_prepartition_contiguous_nonempty_blocks(lat, n):
    if n > len(lat):
        with pytest.raises(UserError):
            blocks.prepartition(np.array(lat), n)
        return
    ids = blocks.prepartition(np.array(lat), n)
    assert ids[0] == 0 and ids[-1] == n - 1
    assert (np.diff(ids) >= 0).all() and (np.diff(ids) <= 1).all()  # contiguous, every block used


def test_prepartition_equal_layers_split_evenly():
    ids = blocks.prepartition(np.full(100, 5.0), 10)
    assert np.bincount(ids).tolist() == [10] * 10


def test_clusters_table_1():
    c = make_cluster("HC1-L")
    assert c.count("L4") == 25 and c.count("P4") == 75 and c.bandwidth_gbps == 10.0  # 50 / 5
    s = make_cluster("hc4-s")
    assert s.count("V100") == 4 and s.count("T4") == 12 and abs(s.bandwidth_gbps - 6.4) < 1e-12
    assert s.per_server("V100") == 4 and s.per_server("T4") == 2
    assert make_cluster("HC1-L").scaled(1000).gpus == 1000
    with pytest.raises(UserError):
        make_cluster("HC9-L")
    with pytest.raises(UserError):
        make_cluster("HC1-L", bandwidth_gbps=0.0)


@needs_data
def test_cli_from_ppipe_writes_block_profiles(cli, tmp_path):
    out = tmp_path / "b.parquet"
    r = cli("profile", "--from-ppipe", DATA, "-o", out)
    assert r.code == 0, r.err
    art = read_artifact(out, "block_profiles")
    assert art.frame["model"].n_unique() == 18
    assert set(art.frame["mps"].unique().to_list()) == {0, 1, 2, 3}


def test_cli_from_ppipe_missing_folder(cli, tmp_path):
    out = tmp_path / "b.parquet"
    r = cli("profile", "--from-ppipe", tmp_path / "nope", "-o", out)
    assert_user_error(r, "not found")
    assert not out.exists()


def test_cli_from_ppipe_malformed_table(cli, tmp_path):
    root = tmp_path / "pp"
    (root / "models/block-timing-tf32").mkdir(parents=True)
    (root / "model_list.txt").write_text("m\n")
    (root / "models/block-timing-tf32/m-V100-1.csv").write_text("1,2\nx,3\n")
    out = tmp_path / "b.parquet"
    r = cli("profile", "--from-ppipe", root, "-o", out)
    assert_user_error(r, "non-numeric")
    assert not out.exists()
